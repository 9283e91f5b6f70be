package fusefs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/transport"
)

// TestRingServesSession: with WSFS_TEST_FUSE_TRANSPORT=io-uring (the CI
// step that runs this suite over FUSE over io_uring), a session mount's
// requests from another process arrive through the ring: Server.Transport
// says so and RingRequests grows with a workload whose results are those
// of the file system (a create, a write, a listing, a read back). Skipped
// otherwise (the mount is then on /dev/fuse and RingRequests is 0).
func TestRingServesSession(t *testing.T) {
	backing, mnt, srv := mountT(t)
	if os.Getenv(transport.TestModeEnv) != string(transport.IOURing) {
		if srv.Transport() == transport.NameDev && srv.RingRequests() != 0 {
			t.Fatalf("RingRequests on /dev/fuse: %d, want 0", srv.RingRequests())
		}
		t.Skipf("over %s: %s=io-uring runs it over the ring", srv.Transport(), transport.TestModeEnv)
	}
	if srv.Transport() != transport.NameURing {
		t.Fatalf("Transport: %q, want %q", srv.Transport(), transport.NameURing)
	}
	before := srv.RingRequests()
	got := shOK(t, mnt, "mkdir d && printf 'over the ring' > d/f && ls d && cat d/f")
	if got != "f\nover the ring" {
		t.Fatalf("through the mount: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "d", "f")); err != nil || string(b) != "over the ring" {
		t.Fatalf("backing d/f: %q, %v", b, err)
	}
	if after := srv.RingRequests(); after <= before {
		t.Fatalf("RingRequests: %d before the workload, %d after: nothing came through the ring", before, after)
	}
}

// TestBlockedLockInterrupted: a process blocked in flock(2) on a lock
// another process holds through the mount, sent SIGTERM, exits by that
// signal once the holder lets go, the same over either transport: the
// kernel waits for the answer to a lock request the server has (fs/fuse
// file.c, request_wait_answer), and the server answers when the backing
// file's lock is granted. Over io_uring the holder's unlock must be served
// while the waiter's SETLKW is in the server: both run on CPU 0, so on one
// queue, which the waiter must not hold up.
func TestBlockedLockInterrupted(t *testing.T) {
	backing, mnt, _ := mountT(t)
	f := filepath.Join(mnt, "f")
	writeFileT(t, filepath.Join(backing, "f"), "", 0o644)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(backing, "f"), &st); err != nil {
		t.Fatal(err)
	}

	// Both on CPU 0: over io_uring, on the same queue.
	holder := exec.Command("taskset", "-c", "0", "flock", "-x", f, "sh", "-c", "echo held; exec cat")
	in, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("holder: %q", line)
	}

	waiter := exec.Command("taskset", "-c", "0", "flock", "-x", f, "true")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Process.Kill(); waiter.Wait() })
	// The waiter's SETLKW is in the server once the backing file has a
	// blocked flock waiter (proc(5), /proc/locks: "->").
	waiting := fmt.Sprintf(":%d ", st.Ino)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "-> FLOCK") && strings.Contains(l, waiting) {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no blocked flock on the backing file in /proc/locks:\n%s", b)
		}
	}
	if err := waiter.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	in.Close() // the holder lets go
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	err = waiter.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("waiter: %v, want death by SIGTERM", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("waiter: %v, want death by SIGTERM", err)
	}
}
