package fusefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

// TestHostChangesVisible: with the default minute-long cache timeouts, a
// change made on the host is seen through the mount by the next process
// once SyncHostChanges returns (the watcher's invalidation).
func TestHostChangesVisible(t *testing.T) {
	backing, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "d"), 0o755)
		writeFileT(t, filepath.Join(b, "d/f"), "one\n", 0o644)
	}))
	sync := func() {
		t.Helper()
		if err := srv.SyncHostChanges(); err != nil {
			t.Fatalf("SyncHostChanges: %v", err)
		}
	}
	// Warm the kernel's caches: entries, attributes, listing, data.
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls d && cat d/f && stat -c %a d/f && ls nothere 2>/dev/null; true"); got != "f\none\n644\n" {
		t.Fatalf("warm-up: %q", got)
	}
	writeFileT(t, filepath.Join(backing, "d/f"), "one two three\n", 0o644)
	writeFileT(t, filepath.Join(backing, "d/g"), "g\n", 0o644)
	writeFileT(t, filepath.Join(backing, "nothere"), "now\n", 0o644)
	if err := os.Chmod(filepath.Join(backing, "d/f"), 0o600); err != nil {
		t.Fatal(err)
	}
	sync()
	want := "f\ng\none two three\n600\nnow\n"
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls d && cat d/f && stat -c %a d/f && cat nothere"); got != want {
		t.Errorf("after host changes: %q, want %q", got, want)
	}
	if err := os.Rename(filepath.Join(backing, "d"), filepath.Join(backing, "e")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(backing, "nothere")); err != nil {
		t.Fatal(err)
	}
	sync()
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls && cat e/g"); got != "e\ng\n" {
		t.Errorf("after host rename and remove: %q, want %q", got, "e\ng\n")
	}
}

// inotifyInstances counts this process's inotify instances.
func inotifyInstances(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// TestWatchersShareOneInstance: every mount of a process watches through
// one inotify instance (instances are a per-user limit, 128 by default,
// shared by the whole machine: a daemon with an instance per session ran
// out of them, and so did every other program of its user).
func TestWatchersShareOneInstance(t *testing.T) {
	var srvs []*fusefs.Server
	for i := 0; i < 3; i++ {
		_, _, srv := mountT(t)
		srvs = append(srvs, srv)
	}
	for _, srv := range srvs {
		if !srv.Watched() {
			// Until every program of this user shares its instances,
			// others may hold them all.
			t.Skip("no inotify watcher (instance limit reached by other processes?)")
		}
	}
	if n := inotifyInstances(t); n != 1 {
		t.Errorf("inotify instances of the process with %d watched mounts: %d, want 1", len(srvs), n)
	}
}

// TestWatchersShareDirectory: two mounts of one directory share its watch.
// A change through one mount is announced by that mount only: the other,
// whose kernel cache did not see it, still drops its entry, as for a host
// change; a host change reaches both.
func TestWatchersShareDirectory(t *testing.T) {
	backing, mntA, srvA := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "d"), 0o755)
	}))
	mntB := filepath.Join(filepath.Dir(mntA), "mntB")
	mkdirT(t, mntB, 0o755)
	srvB := mountCfgT(t, fusefs.Config{Root: backing, Mountpoint: mntB, Policy: compileT(t, specFor(t, backing)),
		Session: t.Name() + "-B", Logger: testLogger()})
	if !srvA.Watched() || !srvB.Watched() {
		t.Skip("no inotify watcher (instance limit reached by other processes?)")
	}
	sync := func(srv *fusefs.Server) {
		t.Helper()
		if err := srv.SyncHostChanges(); err != nil {
			t.Fatalf("SyncHostChanges: %v", err)
		}
	}
	// Both kernels cache d's listing and a negative entry for each name.
	warm := "ls %[1]s/d; for n in a b h; do test -e %[1]s/d/$n && echo $n; done; true"
	for _, m := range []string{mntA, mntB} {
		if got := shOK(t, "/", fmt.Sprintf(warm, shq(m))); got != "" {
			t.Fatalf("warm-up of %s: %q", m, got)
		}
	}
	// Made through one mount, seen through the other (the name first: a
	// listing would bring the entry back by itself, READDIRPLUS).
	for _, c := range []struct{ name, by, other, want string }{
		{"a", mntA, mntB, "a\na\n"},
		{"b", mntB, mntA, "b\na\nb\n"},
	} {
		shOK(t, "/", "echo "+c.name+" > "+shq(c.by+"/d/"+c.name))
		sync(srvA)
		sync(srvB)
		if got := shOK(t, "/", "cd "+shq(c.other+"/d")+" && cat "+c.name+" && ls"); got != c.want {
			t.Errorf("%s made through %s, seen through %s: %q, want %q", c.name, c.by, c.other, got, c.want)
		}
	}
	writeFileT(t, filepath.Join(backing, "d/h"), "h\n", 0o644)
	sync(srvA)
	sync(srvB)
	for _, m := range []string{mntA, mntB} {
		if got := shOK(t, "/", "cd "+shq(m+"/d")+" && cat h && ls"); got != "h\na\nb\nh\n" {
			t.Errorf("%s after a host change: %q", m, got)
		}
	}
}
