package fusefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wsfs/wsfs/fusefs"
)

// populateTree makes dirs directories of files files each under backing,
// every file holding its own relative path.
func populateTree(dirs, files int) func(t *testing.T, backing string) {
	return func(t *testing.T, backing string) {
		for d := 0; d < dirs; d++ {
			dir := filepath.Join(backing, fmt.Sprintf("d%02d", d))
			mkdirT(t, dir, 0o755)
			for f := 0; f < files; f++ {
				rel := fmt.Sprintf("d%02d/f%03d", d, f)
				writeFileT(t, filepath.Join(backing, rel), rel, 0o644)
			}
		}
	}
}

// wantTree is what `grep -r . .` prints for populateTree, sorted.
func wantTree(dirs, files int) string {
	var out []string
	for d := 0; d < dirs; d++ {
		for f := 0; f < files; f++ {
			rel := fmt.Sprintf("d%02d/f%03d", d, f)
			out = append(out, "./"+rel+":"+rel)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n") + "\n"
}

// A tree of many more nodes than the descriptor cache holds walks, reads
// and is read again completely: descriptors are closed and the objects
// opened again by name or by file handle, with the same identity.
func TestDescriptorCacheWalk(t *testing.T) {
	needHandles(t)
	defer fusefs.SetDescriptorCacheCap(64)()
	const dirs, files = 20, 50
	backing, mnt, _ := mountT(t, withPopulate(populateTree(dirs, files)), withoutHostView())
	before := fusefs.DescriptorCache()
	want := wantTree(dirs, files)
	for round := 1; round <= 2; round++ {
		if got := shOK(t, mnt, "grep -r . . | LC_ALL=C sort"); got != want {
			t.Fatalf("round %d: grep -r through the mount differs:\n%s", round, abbrev(got, 500))
		}
	}
	after := fusefs.DescriptorCache()
	if after.Open > 64 {
		t.Errorf("cache holds %d descriptors after the walk, capacity 64", after.Open)
	}
	if after.Evictions-before.Evictions < dirs*files {
		t.Errorf("evictions %d, want at least %d (a walk of %d nodes through a cache of 64)", after.Evictions-before.Evictions, dirs*files, dirs*files)
	}
	if after.Reopens == before.Reopens {
		t.Errorf("no descriptor was opened again: the second read did not miss")
	}
	// Identity: inode numbers through the mount are the backing ones.
	native := lstatT(t, filepath.Join(backing, "d07/f033"))
	if got := strings.TrimSpace(shOK(t, mnt, "stat -c %i d07/f033")); got != fmt.Sprint(native.Ino) {
		t.Errorf("inode of d07/f033 through the mount %s, backing %d", got, native.Ino)
	}
	// Writes land in the same objects after their descriptors were closed.
	shOK(t, mnt, "for d in d00 d10 d19; do echo more >> $d/f000; done; rm d05/f005; mv d06/f006 d06/g006")
	for _, c := range []struct{ rel, want string }{{"d00/f000", "d00/f000more\n"}, {"d10/f000", "d10/f000more\n"}, {"d06/g006", "d06/f006"}} {
		b, err := os.ReadFile(filepath.Join(backing, c.rel))
		if err != nil || string(b) != c.want {
			t.Errorf("backing %s = %q, %v; want %q", c.rel, b, err, c.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(backing, "d05/f005")); !os.IsNotExist(err) {
		t.Errorf("d05/f005 removed through the mount, backing lstat: %v", err)
	}
}

// A directory whose descriptor was closed and that was then removed on the
// host is ESTALE for a process whose cwd it is: its handle opens nothing.
// (Without the watcher: its events about the removal would use, hence open
// again, the directory while its files go, and then it is held as ext4
// holds a removed cwd: empty.)
func TestDescriptorCacheStale(t *testing.T) {
	needHandles(t)
	defer fusefs.SetDescriptorCacheCap(32)()
	noWatch := func(s *mountSetup) { s.cfg.NoWatch = true }
	backing, mnt, _ := mountT(t, withPopulate(populateTree(10, 20)), withoutHostView(), noWatch)
	s := startShell(t)
	if got := s.run("cd " + shq(mnt+"/d03") + " && ls | wc -l"); strings.TrimSpace(got) != "20" {
		t.Fatalf("ls in d03: %q, want 20", got)
	}
	// 180 nodes through 32 descriptors after d03's last use: its is closed.
	shOK(t, mnt, "grep -r . d00 d01 d02 d04 d05 d06 d07 d08 d09 >/dev/null")
	if err := os.RemoveAll(filepath.Join(backing, "d03")); err != nil {
		t.Fatal(err)
	}
	if got := s.run("ls . 2>&1; echo rc=$?"); !strings.Contains(got, "Stale file handle") || !strings.Contains(got, "rc=2") {
		t.Errorf("ls in a cwd removed on the host after its descriptor was closed: %q, want ESTALE (rc=2)", got)
	}
	if got := shOK(t, mnt, "cat d04/f004"); got != "d04/f004" {
		t.Errorf("d04/f004 = %q after d03 went stale", got)
	}
}

// One session's walk through a full cache closes its own descriptors, not
// another session's (fdcache.go, the share rule); a session beyond its
// fixed share (open files) gets EMFILE itself, and the other one goes on.
func TestDescriptorCacheShares(t *testing.T) {
	needHandles(t)
	defer fusefs.SetDescriptorCacheCap(64)()
	_, mntA, _ := mountT(t, withPopulate(populateTree(1, 20)), withoutHostView())
	sessA := t.Name()
	t.Run("B", func(t *testing.T) {
		_, mntB, _ := mountT(t, withPopulate(populateTree(20, 50)), withoutHostView())
		shOK(t, mntA, "cat d00/* >/dev/null")
		settled(t, sessA)
		openA, _ := fusefs.SessionDescriptors(sessA)
		if openA != 22 { // root, d00, 20 files
			t.Fatalf("session A holds %d descriptors, want 22", openA)
		}
		shOK(t, mntB, "grep -r . . >/dev/null")
		if got, _ := fusefs.SessionDescriptors(sessA); got != openA {
			t.Errorf("session A holds %d descriptors after B's walk of 1,000 files, want %d (its own)", got, openA)
		}
		if got, _ := fusefs.SessionDescriptors(t.Name()); got > 64-openA {
			t.Errorf("session B holds %d descriptors, more than the %d left", got, 64-openA)
		}

		// Session B holds open files up to its fixed share, then EMFILE.
		settled(t, t.Name())
		room := fusefs.FixedShare() - 1 // the root's
		var names []string
		for f := 0; f < 50; f++ {
			names = append(names, fmt.Sprintf("d01/f%03d", f))
		}
		s := startShell(t)
		got := s.run(fmt.Sprintf(`cd %s; n=0; for f in %s; do exec {fd}<$f || break; n=$((n+1)); done 2>&1; echo n=$n`, shq(mntB), strings.Join(names, " ")))
		if !strings.Contains(got, "Too many open files") || !strings.Contains(got, fmt.Sprintf("n=%d\n", room)) {
			t.Errorf("session B's opens beyond its fixed share: %q, want EMFILE after n=%d", got, room)
		}
		// Meanwhile session A opens, creates and lists.
		if got := shOK(t, mntA, "cat d00/f007; touch new; ls | wc -l"); got != "d00/f007"+"2\n" {
			t.Errorf("session A while B is at its share: %q", got)
		}
		if got, _ := sh(t, mntB, "cat d02/f002 2>&1"); !strings.Contains(got, "Too many open files") {
			t.Errorf("session B's own open while at its share: %q, want EMFILE", got)
		}
	})
}

// settled waits until session holds no descriptor but its root's fixed
// one (the kernel sends RELEASE after close(2) returns, in the
// background).
func settled(t *testing.T, session string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, fixed := fusefs.SessionDescriptors(session)
		if fixed == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still holds %d fixed descriptors (want 1, its root's)", session, fixed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A session holds at most its share of inotify watches; directories beyond
// it are not watched, and host changes there still show (short timeouts,
// listings not cached).
func TestWatchShare(t *testing.T) {
	if os.Getenv("WSFS_TEST_NOWATCH") != "" {
		t.Skip("WSFS_TEST_NOWATCH: no watcher")
	}
	defer fusefs.SetWatchShare(4)()
	backing, mnt, _ := mountT(t, withPopulate(populateTree(10, 1)), withoutHostView())
	shOK(t, mnt, "for d in d0*; do ls $d >/dev/null; done")
	if got := fusefs.SessionWatches(t.Name()); got != 4 {
		t.Fatalf("session holds %d watches after 11 directories were looked into, want its share, 4", got)
	}
	for d := 0; d < 10; d++ {
		writeFileT(t, filepath.Join(backing, fmt.Sprintf("d%02d/host", d)), "h", 0o644)
	}
	want := strings.Repeat("f000\nhost\n", 10)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := shOK(t, mnt, "for d in d0*; do ls $d; done")
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listings 10 s after the host made a file in each directory: %q, want %q", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := fusefs.SessionWatches(t.Name()); got != 4 {
		t.Errorf("session holds %d watches, want 4", got)
	}
}

// needHandles skips a test of the descriptor cache where nodes cannot be
// opened again by handle (open_by_handle_at(2) needs CAP_DAC_READ_SEARCH).
func needHandles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2) needs CAP_DAC_READ_SEARCH")
	}
}
