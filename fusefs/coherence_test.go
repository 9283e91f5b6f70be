package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsfs/wsfs/fusefs"
)

// File data is passed through (root), so a write made on the host is seen
// through the mount at once, with no watcher in between: by a reader that
// holds the file open, by a new open while another one is held, after a
// same-size rewrite whose mtime is put back, and through a shared mmap that
// writes an already dirty page (which moves no mtime and raises no inotify
// event). A FUSE page cache for file data (tried, reverted) failed each of
// these.
func TestHostWritesSeenAtOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs FUSE passthrough (root)")
	}
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "v000-"+string(make([]byte, 95)), 0o644)
	}))
	script := `import mmap, os, sys
host, mnt = sys.argv[1], sys.argv[2]
bad = []
r = os.open(mnt, os.O_RDONLY)
os.pread(r, 200, 0); os.fstat(r)
h = os.open(host, os.O_RDWR)
for i in range(200):
    want = b"v%03d-" % i
    os.pwrite(h, want, 0)
    if os.pread(r, 5, 0) != want: bad.append(("held", i))
    os.pwrite(h, b"+", os.fstat(h).st_size)
    size = os.fstat(h).st_size
    n = os.open(mnt, os.O_RDONLY)
    if len(os.pread(n, 1 << 16, 0)) != size: bad.append(("append", i))
    os.close(n)
    st = os.stat(host)
    os.pwrite(h, b"w%03d-" % i, 0)
    os.utime(host, ns=(st.st_atime_ns, st.st_mtime_ns))
    n = os.open(mnt, os.O_RDONLY)
    if os.pread(n, 5, 0) != b"w%03d-" % i: bad.append(("mtime kept", i))
    os.close(n)
os.ftruncate(h, 100)
m = mmap.mmap(h, 100)
for i in range(50):
    m[0:5] = b"m%03d-" % i
    n = os.open(mnt, os.O_RDONLY)
    if os.pread(n, 5, 0) != b"m%03d-" % i: bad.append(("mmap", i))
    os.close(n)
    if os.pread(r, 5, 0) != b"m%03d-" % i: bad.append(("mmap held", i))
print(bad[:5], len(bad))
`
	got := shOK(t, "/", "python3 -c "+shq(script)+" "+shq(filepath.Join(backing, "f"))+" "+shq(filepath.Join(mnt, "f")))
	if got != "[] 0\n" {
		t.Errorf("reads through the mount that missed a host write (first five, count): %s", got)
	}
}

// After an inotify queue overflow the kernel's attributes of every file are
// dropped, not only its entry: a process holding a file open sees its new
// size. The change is made through a hard link in a directory outside the
// mount, which the watcher never hears of, so only the overflow handling
// can make it visible before the attribute timeout (an hour here).
func TestQueueOverflowDropsFileAttributes(t *testing.T) {
	outside := canonT(t, t.TempDir())
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "12345", 0o644)
	}), func(s *mountSetup) { s.cfg.EntryTimeout, s.cfg.AttrTimeout = time.Hour, time.Hour })
	if err := os.Link(filepath.Join(backing, "f"), filepath.Join(outside, "f")); err != nil {
		t.Fatal(err)
	}
	sh := startShell(t)
	held := "stat -L -c %s /proc/$$/fd/3"
	if got := sh.run("exec 3<" + shq(filepath.Join(mnt, "f")) + " && " + held); got != "5\n" {
		t.Fatalf("size of the held file: %q, want 5", got)
	}
	writeFileT(t, filepath.Join(outside, "f"), "123456789", 0o644)
	if got := sh.run(held); got != "5\n" {
		t.Fatalf("size before the overflow: %q, want the cached 5 (else the test shows nothing)", got)
	}
	fusefs.QueueOverflow()
	if got := sh.run(held); got != "9\n" {
		t.Errorf("size of the held file after a queue overflow: %q, want 9", got)
	}
}
