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

	"github.com/wsfs/wsfs/fusefs"
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

// TestRingCreatesWithUmaskOnQueueThread: objects created through the mount
// with the caller's umask get exactly the mode ext4 gives them over either
// transport; over io_uring the server sets the umask on the queue thread
// that serves the create (transport.OnQueueThread), handing no create to
// a pool thread, where /dev/fuse's requests are handed to one each.
func TestRingCreatesWithUmaskOnQueueThread(t *testing.T) {
	backing, mnt, srv := mountT(t)
	before := fusefs.MaskHandoffs()
	got := shOK(t, mnt, "umask 027 && touch f && mkdir d && mkfifo p && stat -c '%n %04a' f d p")
	if want := "f 0640\nd 0750\np 0640\n"; got != want {
		t.Fatalf("modes through the mount: %q, want %q", got, want)
	}
	for name, want := range map[string]uint32{"f": 0o640, "d": 0o750, "p": 0o640} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(backing, name), &st); err != nil || st.Mode&0o7777 != want {
			t.Fatalf("backing %s: mode %04o (%v), want %04o", name, st.Mode&0o7777, err, want)
		}
	}
	handed := fusefs.MaskHandoffs() - before
	switch srv.Transport() {
	case transport.NameURing:
		if handed != 0 {
			t.Fatalf("over io_uring: %d creates handed to a pool thread, want 0", handed)
		}
	default:
		if handed != 3 {
			t.Fatalf("over %s: %d creates handed to a pool thread, want 3", srv.Transport(), handed)
		}
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
