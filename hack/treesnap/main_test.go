package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// describe: a hard-linked pair names its first name on both, a user xattr
// is listed, overlayfs's own is not, a directory has no size, times only
// when asked.
func TestDescribe(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "b"), []byte("x"), 0o640))
	must(os.Link(filepath.Join(root, "b"), filepath.Join(root, "a")))
	must(os.Symlink("b", filepath.Join(root, "l")))
	must(os.Mkdir(filepath.Join(root, "d"), 0o2755))
	must(unix.Chmod(filepath.Join(root, "d"), 0o2755))
	must(unix.Setxattr(filepath.Join(root, "b"), "user.k", []byte("v"), 0))
	if os.Geteuid() == 0 {
		must(unix.Setxattr(filepath.Join(root, "d"), "trusted.overlay.opaque", []byte("y"), 0))
	}
	snap, err := describe(root, false)
	must(err)
	uid, gid := os.Getuid(), os.Getgid()
	o := fmt.Sprintf("o=%d:%d", uid, gid)
	const hx = "h=2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881" // sha256("x")
	want := map[string]string{
		".": "t=d m=" + mode(t, root) + " " + o,
		"a": "t=f m=0640 " + o + " s=1 " + hx + " x=user.k=76 ln=\"a\"",
		"b": "t=f m=0640 " + o + " s=1 " + hx + " x=user.k=76 ln=\"a\"",
		"d": "t=d m=2755 " + o,
		"l": "t=l " + o + " s=1 l=\"b\"",
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("describe:\n got %q\nwant %q", snap, want)
	}
	timed, err := describe(root, true)
	must(err)
	if !strings.Contains(timed["d"], " mt=") || !strings.Contains(timed["d"], " ct=") {
		t.Fatalf("describe -times of d: %q, want mt= and ct=", timed["d"])
	}
}

// mode returns p's permission bits as describe prints them.
func mode(t *testing.T, p string) string {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%04o", st.Mode&0o7777)
}

// A git index's stat data is masked: two repositories with the same
// content (different inodes, times) hash equal, another content does not.
func TestMaskIndex(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	index := func(content string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "f"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		h, err := contentHash(filepath.Join(dir, ".git", "index"), ".git/index")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h, "index:") {
			t.Fatalf("hash %q, want a masked index", h)
		}
		return h
	}
	a, b, c := index("same\n"), index("same\n"), index("other\n")
	if a != b {
		t.Fatalf("equal content: %s != %s", a, b)
	}
	if a == c {
		t.Fatalf("other content hashes equal: %s", a)
	}
	if _, ok := maskIndex([]byte("DIRC\x00\x00\x00\x04")); ok {
		t.Fatal("maskIndex took a short version-4 header")
	}
}

// cover: a deleted directory covers what was below it, a renamed one what
// is below it now, a deletion below a renamed directory is the change of
// its old path; a changed path the diff misses and a change at an
// unchanged path are both reported.
func TestCover(t *testing.T) {
	before := map[string]string{
		".": "t=d", "src": "t=d", "src/a": "t=f h=1", "d1": "t=d", "d1/x": "t=f h=2", "d1/y": "t=f h=3",
		"keep": "t=f h=4", "same": "t=f h=5", "missed": "t=f h=6",
	}
	after := map[string]string{
		".": "t=d", "d2": "t=d", "d2/x": "t=f h=2",
		"keep": "t=f h=4 ln=\"keep\"", "hard": "t=f h=4 ln=\"keep\"", "same": "t=f h=5", "missed": "t=f h=7",
	}
	changes := []api.Change{
		{Path: "d1", Kind: "deleted", Type: "dir"},
		{Path: "d2", Kind: "renamed", Type: "dir", From: "d1"},
		{Path: "d2/y", Kind: "deleted", Type: "file"},
		{Path: "hard", Kind: "added", Type: "file"},
		{Path: "same", Kind: "modified", Type: "file", Fields: []string{"mode"}},
		{Path: "src", Kind: "deleted", Type: "dir"},
	}
	got := cover(changes, before, after)
	want := []string{`not in the diff: "missed"`, `not changed: modified "same"`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cover:\n got %q\nwant %q", got, want)
	}
	if got := changed(before, after); !reflect.DeepEqual(got, []string{"d1", "d1/x", "d1/y", "d2", "d2/x", "hard", "missed", "src", "src/a"}) {
		t.Fatalf("changed: %q", got)
	}
	if got := compare(map[string]string{"k": "t=f h=1 ln=\"h\""}, map[string]string{"k": "t=f h=1"}); !reflect.DeepEqual(got, []string{`"k": ln: "h" -> -`}) {
		t.Fatalf("compare: %q", got)
	}
	// Only mtimes, only of files on both sides.
	a := map[string]string{"f": "t=f h=1 mt=1 ct=1", "g": "t=f h=1 mt=1", "d": "t=d mt=1", "gone": "t=f mt=1"}
	b := map[string]string{"f": "t=f h=2 mt=1 ct=2", "g": "t=f h=1 mt=2", "d": "t=d mt=2", "new": "t=f mt=1"}
	if got := compareOnly(a, b, "mt", "f"); !reflect.DeepEqual(got, []string{`"g": mt: 1 -> 2`}) {
		t.Fatalf("compareOnly mt f: %q", got)
	}
}
