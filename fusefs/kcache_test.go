package fusefs_test

// Issue 10: levers that let the kernel answer from its own caches. Each has
// a test that a host-side change is still seen (the watcher's invalidation,
// after SyncHostChanges) and that a change through the mount is seen by
// another process at once. No test here depends on timing.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// bigDir is large enough that listing it takes many READDIRPLUS requests,
// each served on its own handle at the kernel's offset (FUSE_NO_OPENDIR).
const bigDir = 300

func withBigDir(t *testing.T, b string) {
	mkdirT(t, filepath.Join(b, "d"), 0o755)
	for i := 0; i < bigDir; i++ {
		writeFileT(t, filepath.Join(b, fmt.Sprintf("d/file-with-a-longish-name-%04d", i)), "x", 0o644)
	}
}

// sortedNames lists dir on the host, sorted as ls(1) in the C locale does.
func sortedNames(t *testing.T, dir string) string {
	t.Helper()
	n := names(t, dir)
	sort.Strings(n)
	return strings.Join(n, "\n") + "\n"
}

// listCmd is a shell command printing the names in dir, sorted bytewise. It
// only reads the directory (no stat of it, unlike ls(1), whose GETATTR would
// refresh the mtime and so drop a stale listing without the watcher's help).
func listCmd(dir string) string {
	return `python3 -c 'import os, sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' ` + shq(dir)
}

// TestCachedListingThroughMount: with directories opened by the kernel alone
// (no OPENDIR) and listings kept in its page cache, a change one process
// makes through the mount is in the next listing of another process, which
// had listed the directory before.
func TestCachedListingThroughMount(t *testing.T) {
	backing, mnt, _ := mountT(t, withPopulate(withBigDir))
	d := filepath.Join(mnt, "d")
	lister := startShell(t)
	ls := listCmd(d)
	if got, want := lister.run(ls), sortedNames(t, filepath.Join(backing, "d")); got != want {
		t.Fatalf("first listing differs from the backing directory:\n%s", abbrev(got, 500))
	}
	// Another process changes the directory through the mount.
	shOK(t, d, `set -e
touch new-file
mkdir new-dir
mv file-with-a-longish-name-0001 renamed
rm file-with-a-longish-name-0002
ln -s renamed new-link
mv new-dir ../moved-out`)
	want := sortedNames(t, filepath.Join(backing, "d"))
	for _, n := range []string{"new-file", "renamed", "new-link"} {
		if !strings.Contains(want, n+"\n") {
			t.Fatalf("backing directory lacks %s: the changes did not happen", n)
		}
	}
	if got := lister.run(ls); got != want {
		t.Errorf("listing after changes through the mount:\n%s\nwant:\n%s", abbrev(got, 600), abbrev(want, 600))
	}
	if got := lister.run(listCmd(mnt)); got != "d\nmoved-out\n" {
		t.Errorf("root listing after mv out: %q, want %q", got, "d\nmoved-out\n")
	}
	// fsync(2) of a directory the kernel opened without the server.
	if got := lister.run(`python3 -c 'import os; fd = os.open("` + d + `", os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd); print("synced")'`); got != "synced\n" {
		t.Errorf("fsync of a directory: %q", got)
	}
	// Listing by descriptor (fdopendir) and by path agree, with no entry
	// twice.
	script := `import os, sys
d = sys.argv[1]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
byPath, byFd = os.listdir(d), os.listdir(fd)
print(len(byPath), len(set(byPath)) == len(byPath), sorted(byPath) == sorted(byFd))`
	wantLine := fmt.Sprintf("%d True True\n", strings.Count(want, "\n"))
	if got := lister.run("python3 -c " + shq(script) + " " + shq(d)); got != wantLine {
		t.Errorf("listdir by path and by descriptor: %q, want %q", got, wantLine)
	}
}

// TestCachedListingHostChanges: a listing the kernel keeps is dropped when
// the directory changes on the host; the next listing by a process that had
// listed it before shows the change once SyncHostChanges returns.
func TestCachedListingHostChanges(t *testing.T) {
	backing, mnt, srv := mountT(t, withPopulate(withBigDir))
	d := filepath.Join(mnt, "d")
	lister := startShell(t)
	ls := listCmd(d)
	lister.run(ls)
	bd := filepath.Join(backing, "d")
	writeFileT(t, filepath.Join(bd, "host-new"), "h", 0o644)
	mkdirT(t, filepath.Join(backing, "elsewhere"), 0o755)
	writeFileT(t, filepath.Join(backing, "elsewhere/inner"), "i", 0o644)
	if err := os.Rename(filepath.Join(backing, "elsewhere"), filepath.Join(bd, "moved-in")); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 60; i++ {
		if err := os.Remove(filepath.Join(bd, fmt.Sprintf("file-with-a-longish-name-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	if got, want := lister.run(ls), sortedNames(t, bd); got != want {
		t.Errorf("listing after host changes:\n%s\nwant:\n%s", abbrev(got, 600), abbrev(want, 600))
	}
	if got := lister.run(listCmd(filepath.Join(d, "moved-in"))); got != "inner\n" {
		t.Errorf("listing of a directory moved in on the host: %q", got)
	}
}
