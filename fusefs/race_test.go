package fusefs_test

// Acceptance 5: a host-side loop swaps a directory inside the backing root for
// a symlink to an outside directory (and back) as fast as it can, while a
// separate process creates, writes, chmods and renames files in that
// directory through the mount. Afterwards the outside directory is unchanged.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// raceChild is run by python3 with cwd = the mountpoint; argv[1] = seconds.
// It prints one line "ops=N" and one "kind:result count" line per outcome.
const raceChild = `
import os, sys, time, errno, collections
dur = float(sys.argv[1])
end = time.time() + dur
ops = 0
res = collections.Counter()
def attempt(name, f):
    global ops
    ops += 1
    try:
        f()
        res[name + ":ok"] += 1
    except OSError as e:
        res[name + ":" + errno.errorcode.get(e.errno, str(e.errno))] += 1
def create(p, data):
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
def append(p, data):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
i = 0
while time.time() < end:
    i += 1
    n, g = "work/f%d" % i, "work/g%d" % i
    attempt("create", lambda: create(n, b"pwned %d\n" % i))
    attempt("chmod-new", lambda: os.chmod(n, 0o600))
    attempt("rename-new", lambda: os.rename(n, g))
    attempt("write-secret", lambda: append("work/secret", b"pwned\n"))
    attempt("truncate-secret", lambda: os.truncate("work/secret", 0))
    attempt("chmod-secret", lambda: os.chmod("work/secret", 0o777))
    attempt("utime-secret", lambda: os.utime("work/secret", (1, 1)))
    attempt("create-sub", lambda: create("work/sub/s%d" % i, b"pwned\n"))
    attempt("overwrite-sub", lambda: create("work/sub/s", b"pwned\n"))
    attempt("mkdir", lambda: os.mkdir("work/d%d" % i))
    attempt("symlink", lambda: os.symlink("secret", "work/l%d" % i))
    attempt("link", lambda: os.link("work/secret", "work/h%d" % i))
    attempt("rename-secret", lambda: os.rename("work/secret", "work/secret.moved"))
    attempt("rename-back", lambda: os.rename("work/secret.moved", "work/secret"))
    attempt("unlink", lambda: os.unlink(g))
    attempt("unlink-sub", lambda: os.unlink("work/sub/s"))
    attempt("rmdir-sub", lambda: os.rmdir("work/sub"))
print("ops=%d loops=%d" % (ops, i))
for k in sorted(res):
    print(k, res[k])
`

// raceSeconds is how long a race test runs: WSFS_RACE_SECONDS when set, else
// def.
func raceSeconds(t *testing.T, def float64) float64 {
	s := os.Getenv("WSFS_RACE_SECONDS")
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		t.Fatalf("WSFS_RACE_SECONDS=%q: want a positive number", s)
	}
	return v
}

// runRace runs swap(0), swap(1), ... in a host loop while the python
// script child runs in mnt with argv[1] = secs, and returns the child's
// output; the test fails unless the child exits 0 having printed its
// counts, and at least one swap succeeded.
func runRace(t *testing.T, mnt, child string, secs float64, swap func(i int) error) string {
	t.Helper()
	var swaps, swapErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if swap(i) != nil {
				swapErrs.Add(1)
			} else {
				swaps.Add(1)
			}
		}
	}()
	start := time.Now()
	out, errOut, code := shEnv(t, mnt, nil, "python3 -c "+shq(child)+" "+strconv.FormatFloat(secs, 'f', -1, 64))
	close(stop)
	wg.Wait()
	t.Logf("race ran %v: %d host swaps (%d failed swap attempts); child (exit %d):\n%s", time.Since(start).Round(time.Millisecond), swaps.Load(), swapErrs.Load(), code, out)
	if code != 0 {
		t.Errorf("race child exited %d: %s", code, errOut)
	}
	if swaps.Load() == 0 || len(lines(out)) < 2 {
		t.Errorf("race did not run: swaps=%d child output %q", swaps.Load(), out)
	}
	return out
}

func TestRaceSwapDirForSymlink(t *testing.T) {
	if testing.Short() {
		t.Skip("race test: skipped with -short")
	}
	need(t, "python3")
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "secret"), "orig secret\n", 0o644)
	mkdirT(t, filepath.Join(outside, "sub"), 0o755)
	writeFileT(t, filepath.Join(outside, "sub/s"), "orig s\n", 0o600)
	writeFileT(t, filepath.Join(outside, "f1"), "orig f1\n", 0o640)
	before := treeSnapshot(t, outside)

	backing, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "work/sub"), 0o755)
		writeFileT(t, filepath.Join(b, "work/secret"), "inside secret\n", 0o644)
		writeFileT(t, filepath.Join(b, "work/sub/s"), "inside s\n", 0o644)
		symlinkT(t, outside, filepath.Join(b, "alt"))
	}))

	work, alt := filepath.Join(backing, "work"), filepath.Join(backing, "alt")
	// Alternate an atomic exchange with a non-atomic rename + symlink
	// sequence, so both kinds of host-side change are raced.
	runRace(t, mnt, raceChild, raceSeconds(t, 10), func(i int) error {
		if i%4 != 3 {
			return unix.Renameat2(unix.AT_FDCWD, work, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
		}
		// work (dir or link) -> work.tmp; symlink work -> outside; then
		// put things back the other way.
		tmp := work + ".tmp"
		err := os.Rename(work, tmp)
		if err == nil {
			if err = os.Symlink(outside, work); err == nil {
				os.Remove(work)
			}
			if e := os.Rename(tmp, work); e != nil && err == nil {
				err = e
			}
		}
		return err
	})
	// leave work as the real directory
	if st, err := os.Lstat(work); err == nil && st.Mode()&os.ModeSymlink != 0 {
		unix.Renameat2(unix.AT_FDCWD, work, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
	}
	wantUnchanged(t, "outside directory after the race", outside, before)
	// Afterwards the mount agrees with the backing directory again (the
	// kernel's caches are invalidated or expire): same names in work/.
	want := strings.Join(names(t, work), ",")
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	// Well below the 60 s cache timeouts: an invalidation that was missed
	// is not hidden by their expiry.
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = strings.Join(namesErr(filepath.Join(mnt, "work")), ",")
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("30s after the race, mnt/work lists %s; backing work lists %s", abbrev(got, 300), abbrev(want, 300))
	}
}
