package mounts

import (
	"os"
	"path/filepath"
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
