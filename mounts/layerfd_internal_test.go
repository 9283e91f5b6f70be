package mounts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLayerRemoveAtReplaced: a removal told which object the diff saw
// refuses another one renamed in its place (a tree the session could not
// empty) and removes nothing of it; the object it was told of goes whole.
func TestLayerRemoveAtReplaced(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"del/x", "R/precious"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "del"), &st); err != nil {
		t.Fatal(err)
	}
	seen := objID{st.Dev, st.Ino}
	// The swap: R now at the diff's path.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "del"), unix.AT_FDCWD, filepath.Join(root, "R"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	rfd, err := openRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	if err := removeAllAt(rfd, "del", seen); err != errReplaced {
		t.Fatalf("removeAllAt del (R there): %v, want %v", err, errReplaced)
	}
	if b, err := os.ReadFile(filepath.Join(root, "del", "precious")); err != nil || string(b) != "R/precious" {
		t.Fatalf("R's file after the refusal: %q %v", b, err)
	}
	// Swapped back: the diff's directory goes, with what it holds.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "del"), unix.AT_FDCWD, filepath.Join(root, "R"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if err := removeAllAt(rfd, "del", seen); err != nil {
		t.Fatalf("removeAllAt del: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "del")); !os.IsNotExist(err) {
		t.Fatalf("del after removal: %v, want ENOENT", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "R", "precious")); err != nil || string(b) != "R/precious" {
		t.Fatalf("R's file: %q %v", b, err)
	}
}

// TestLayerMetaAtReplaced: a commit of a mode or owner change acts only on
// the project's object the diff saw: a root-owned file the session's user
// renamed to the path since (found by an attack: it was made 0666 and the
// user's) is refused, its mode untouched; the diff's own object gets the
// change.
func TestLayerMetaAtReplaced(t *testing.T) {
	src, proj := t.TempDir(), t.TempDir()
	write := func(p string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(src, "zzz"), 0o666)
	write(filepath.Join(proj, "zzz"), 0o644)
	write(filepath.Join(proj, "victim"), 0o600)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(proj, "zzz"), &st); err != nil {
		t.Fatal(err)
	}
	seen := objID{st.Dev, st.Ino}
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(proj, "zzz"), unix.AT_FDCWD, filepath.Join(proj, "victim"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	sfd, err := openRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sfd)
	pfd, err := openRoot(proj)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	err = metaAt(sfd, pfd, "zzz", seen)
	if err == nil || err.Error() != "another file now: changed since the diff" {
		t.Fatalf("metaAt zzz (the victim there): %v, want %q", err, "another file now: changed since the diff")
	}
	mode := func(p string) os.FileMode {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if m := mode(filepath.Join(proj, "zzz")); m != 0o600 {
		t.Fatalf("the victim (at zzz) after the refusal: %v, want -rw-------", m)
	}
	// Swapped back: the diff's object takes the layer's mode.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(proj, "zzz"), unix.AT_FDCWD, filepath.Join(proj, "victim"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if err := metaAt(sfd, pfd, "zzz", seen); err != nil {
		t.Fatalf("metaAt zzz: %v", err)
	}
	if m, v := mode(filepath.Join(proj, "zzz")), mode(filepath.Join(proj, "victim")); m != 0o666 || v != 0o600 {
		t.Fatalf("zzz %v, victim %v; want -rw-rw-rw- and -rw-------", m, v)
	}
}

// TestLayerForceDeleteSwap: --force skips the conflict check of a
// deletion (the host changed the path since the session's first write
// there), never the check that the object removed is the one the commit's
// diff saw: a directory and a file the host swaps (renameat2
// RENAME_EXCHANGE) with others between the checks and the removal are
// refused, "replaced in the project since the diff (not removed)", and
// what was swapped in keeps every file; swapped back, a forced commit
// removes them.
func TestLayerForceDeleteSwap(t *testing.T) {
	proj := t.TempDir()
	for _, p := range []string{"del/x", "R/precious", "f", "g"} {
		if err := os.MkdirAll(filepath.Join(proj, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proj, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := layerFor(t, proj)
	// The session removes del and f (its mount records the baseline
	// first), then the host changes both.
	for _, p := range []string{"del", "f"} {
		l.Before(filepath.Join(proj, p))
		if err := os.RemoveAll(filepath.Join(l.Merged(), p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proj, "del/y"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "f"), []byte("host's f"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := l.Commit(nil, false, allowAll)
	if err != nil || len(res.Applied) != 0 || len(res.Conflicts) != 2 {
		t.Fatalf("commit without --force: %+v %v, want del and f in conflict", res, err)
	}
	swap := map[string]string{"del": "R", "f": "g"}
	exchange := func(rel string) {
		if other, ok := swap[rel]; ok {
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(proj, rel), unix.AT_FDCWD, filepath.Join(proj, other), unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
		}
	}
	setLayerActing(t, exchange)
	res, err = l.Commit(nil, true, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	const why = "replaced in the project since the diff (not removed)"
	if len(res.Applied) != 0 || len(res.Conflicts) != 0 || len(res.Refused) != 2 ||
		res.Refused[0].Path != "f" || res.Refused[0].Reason != why || res.Refused[1].Path != "del" || res.Refused[1].Reason != why {
		t.Fatalf("commit --force with del and f swapped: %+v, want both refused: %s", res, why)
	}
	for p, want := range map[string]string{"del/precious": "R/precious", "R/x": "del/x", "R/y": "host", "f": "g", "g": "host's f"} {
		if b, err := os.ReadFile(filepath.Join(proj, p)); err != nil || string(b) != want {
			t.Errorf("%s after the refusals: %q %v, want %q", p, b, err, want)
		}
	}
	// Swapped back (the host's changes in place): --force removes them.
	for rel := range swap {
		exchange(rel)
	}
	setLayerActing(t, nil)
	res, err = l.Commit(nil, true, allowAll)
	if err != nil || len(res.Refused)+len(res.Conflicts) != 0 || !slices.Equal(res.Applied, []string{"f", "del"}) {
		t.Fatalf("commit --force: %+v %v, want f and del applied", res, err)
	}
	for _, p := range []string{"del", "f"} {
		if _, err := os.Lstat(filepath.Join(proj, p)); !os.IsNotExist(err) {
			t.Errorf("%s after commit --force: %v, want ENOENT", p, err)
		}
	}
	for p, want := range map[string]string{"R/precious": "R/precious", "g": "g"} {
		if b, err := os.ReadFile(filepath.Join(proj, p)); err != nil || string(b) != want {
			t.Errorf("%s after commit --force: %q %v, want %q", p, b, err, want)
		}
	}
}
