package fusefs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small file read again through the mount comes from the kernel's page
// cache: reading and fstat-ing it twenty times sends no GETATTR (passed
// through, each read marks atime stale and each fstat asks the server).
func TestCachedReadPagesKept(t *testing.T) {
	_, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "hello\n", 0o644)
	}))
	f := filepath.Join(mnt, "f")
	// The first read is answered by the server, which marks atime stale
	// once: the stat of atime after it asks.
	if got := shOK(t, "/", "cat "+shq(f)+" && stat -c %X "+shq(f)+" >/dev/null"); got != "hello\n" {
		t.Fatalf("cat: %q", got)
	}
	script := `import os, sys
for i in range(20):
    fd = os.open(sys.argv[1], os.O_RDONLY)
    b = os.read(fd, 100)
    os.fstat(fd)
    os.close(fd)
print(b.decode(), end="")
`
	g0 := srv.Stats().Ops["getattr"]
	if got := shOK(t, "/", "python3 -c "+shq(script)+" "+shq(f)); got != "hello\n" {
		t.Fatalf("reads: %q", got)
	}
	if g := srv.Stats().Ops["getattr"] - g0; g != 0 {
		t.Errorf("20 reads + fstat of a cached file sent %d GETATTR, want 0", g)
	}
}

// A host write is seen by the next open through the mount at once, without
// waiting for the watcher: same size and different size.
func TestCachedReadSeesHostWrite(t *testing.T) {
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "hello\n", 0o644)
	}))
	f, bf := filepath.Join(mnt, "f"), filepath.Join(backing, "f")
	for i, content := range []string{"HELLO\n", "hello again\n", "short\n", "hullo\n"} {
		if got := shOK(t, "/", "cat "+shq(f)); i == 0 && got != "hello\n" {
			t.Fatalf("first cat: %q", got)
		}
		// Written on the host and read through the mount in one
		// process, so no watcher event can come in between.
		script := `import os, sys
with open(sys.argv[1], "w") as w: w.write(sys.argv[3])
with open(sys.argv[2]) as r: print(r.read(), end="")
`
		got := shOK(t, "/", "python3 -c "+shq(script)+" "+shq(bf)+" "+shq(f)+" "+shq(content))
		if got != content {
			t.Errorf("after host write %d: read %q, want %q", i, got, content)
		}
	}
}

// Opens of one file in both io modes never meet (the kernel answers EIO to
// an open that mixes them): a write open while a cached read open lives
// writes through the page cache, and the reader sees it at once; a read
// open while a passthrough write open lives is passed through and sees the
// writer's data; afterwards a fresh read sees the last write.
func TestCachedAndPassthroughOpensMeet(t *testing.T) {
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "hello\n", 0o644)
	}))
	script := `import os, subprocess, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY)
print(os.pread(r, 100, 0))
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
os.write(w, b"world\n")
print(os.pread(r, 100, 0))
print(subprocess.run(["cat", p], capture_output=True).stdout)
os.close(r); os.close(w)
w = os.open(p, os.O_RDWR)
os.pwrite(w, b"W", 0)
r = os.open(p, os.O_RDONLY)
print(os.pread(r, 100, 0))
os.close(r); os.close(w)
print(subprocess.run(["cat", p], capture_output=True).stdout)
`
	want := strings.Join([]string{"b'hello\\n'", "b'world\\n'", "b'world\\n'", "b'World\\n'", "b'World\\n'"}, "\n") + "\n"
	if got := shOK(t, "/", "python3 -c "+shq(script)+" "+shq(filepath.Join(mnt, "f"))); got != want {
		t.Errorf("opens in both io modes:\n%s\nwant:\n%s", got, want)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "World\n" {
		t.Errorf("read back: %q, %v", got, err)
	}
}
