package mounts_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// revocationChild holds f open for reading and writing, with a shared
// writable mmap of its first page, and answers one line per command on
// stdin: "w X" appends X through the descriptor, "m N X" stores X at
// offset N through the mapping (msync), "t" ftruncates, "a" fallocates,
// "o" opens f again for writing; each answers "ok" or the errno's name.
const revocationChild = `
import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
end = 4096  # no fstat: with no server a GETATTR would wait for one
mm = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.split()
    try:
        if cmd[0] == "w":
            end += os.pwrite(fd, cmd[1].encode(), end)
        elif cmd[0] == "m":
            mm[int(cmd[1]):int(cmd[1]) + len(cmd[2])] = cmd[2].encode(); mm.flush()
        elif cmd[0] == "t":
            os.ftruncate(fd, 8192)
        elif cmd[0] == "a":
            os.posix_fallocate(fd, 0, 16384)
        elif cmd[0] == "o":
            os.close(os.open(sys.argv[1], os.O_WRONLY))
        print("ok", flush=True)
    except OSError as e:
        print(errno.errorcode[e.errno], flush=True)
`

// TestRevocationAtOpen asserts the semantics README ("Policy changes and
// open descriptors") states for a narrowing (issue 20 item 7): decisions
// are made when a file is opened, as Unix permissions and Landlock make
// them. A descriptor opened for writing before the session is narrowed to
// read-only keeps writing, through write(2) and a shared mapping; every
// new write open, ftruncate and fallocate is EROFS. A write sent after a
// kill -9 of the daemon completes once the next daemon serves the kept
// connection; then new opens are EROFS still, and the old descriptor and
// mapping write on.
func TestRevocationAtOpen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: FUSE passthrough")
	}
	need := func(name string) {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s not installed", name)
		}
	}
	need("python3")
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "p")
	mkTree(t, root, "sub/")
	backing := filepath.Join(root, "f")
	if err := os.WriteFile(backing, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "p", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("python3", "-c", revocationChild, filepath.Join(s.Mountpoint, "f"))
	child.Dir = "/"
	in, _ := child.StdinPipe()
	outp, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); child.Process.Kill(); child.Wait() })
	out := bufio.NewReader(outp)
	if line, err := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	ask := func(cmd string) string {
		t.Helper()
		fmt.Fprintln(in, cmd)
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: the child ended: %v", cmd, err)
		}
		return strings.TrimSuffix(line, "\n")
	}
	steps := func(when string, want [][2]string) {
		t.Helper()
		for _, w := range want {
			if got := ask(w[0]); got != w[1] {
				t.Errorf("%s: %q answered %s, want %s", when, w[0], got, w[1])
			}
		}
	}
	// The file on disk: the appended tail, and the bytes the mapping
	// stored at offsets 0 and 100.
	onDisk := func(when, tail, at0, at100 string) {
		t.Helper()
		b, err := os.ReadFile(backing)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b[4096:]); got != tail {
			t.Errorf("%s: appended on disk %q, want %q", when, got, tail)
		}
		if got := string(b[:len(at0)]); got != at0 {
			t.Errorf("%s: mapping's bytes at 0 on disk %q, want %q", when, got, at0)
		}
		if got := string(b[100 : 100+len(at100)]); got != at100 {
			t.Errorf("%s: mapping's bytes at 100 on disk %q, want %q", when, got, at100)
		}
	}
	steps("before", [][2]string{{"w A", "ok"}, {"o", "ok"}})

	if _, err := d.c.PatchPolicy(ctx, "p", api.PolicyPatch{Mode: "read-only"}); err != nil {
		t.Fatal(err)
	}
	steps("narrowed", [][2]string{{"w B", "ok"}, {"m 0 M1", "ok"}, {"t", "EROFS"}, {"a", "EROFS"}, {"o", "EROFS"}})
	onDisk("narrowed", "AB", "M1", "")

	d.kill()
	d.waitExit(t)
	// No server, the connection kept: the old descriptor's write is sent
	// now and answered once the next daemon serves the connection (it may
	// wait for one: the kernel asks the server before a passthrough write
	// in some cases).
	fmt.Fprintln(in, "w C")
	startDaemon(t, dir) // stopped in its cleanup
	if line, err := out.ReadString('\n'); line != "ok\n" {
		t.Errorf("write sent while no daemon ran: answered %q (%v), want ok", line, err)
	}
	steps("restarted", [][2]string{{"m 100 M2", "ok"}, {"o", "EROFS"}, {"t", "EROFS"}, {"a", "EROFS"}, {"w D", "ok"}})
	onDisk("restarted", "ABCD", "M1", "M2")
}
