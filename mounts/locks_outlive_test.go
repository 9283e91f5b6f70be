package mounts_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// lockHelper is the child side of TestLocksOutliveDaemon. lockhold takes
// a flock(2) exclusive lock on path and a POSIX write lock (fcntl(2)
// F_SETLK) on its bytes 0-9 through two descriptors, prints "ready" and
// holds them until stdin closes. locktry tries both without waiting on
// fresh descriptors and prints "flock=<errno|ok> posix=<errno|ok>".
func lockHelper(action, path string) int {
	res := func(err error) string {
		if err == nil {
			return "ok"
		}
		if e, ok := err.(unix.Errno); ok {
			return unix.ErrnoName(e)
		}
		return err.Error()
	}
	var out []string
	for _, kind := range []string{"flock", "posix"} {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println("open:", res(err))
			return 1
		}
		if kind == "flock" {
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		} else {
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10})
		}
		out = append(out, kind+"="+res(err))
		if action == "locktry" {
			unix.Close(fd) // releases what it got
		}
	}
	if action == "locktry" {
		fmt.Println(strings.Join(out, " "))
		return 0
	}
	if strings.Join(out, " ") != "flock=ok posix=ok" {
		fmt.Println(strings.Join(out, " "))
		return 1
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// TestLocksOutliveDaemon: locks taken through the mount (flock and POSIX
// byte-range locks) are held across a kill -9 and restart and across a
// takeover: another process, through the mount or on the host's file,
// still cannot take them (EAGAIN), and once their holder exits it can.
// (They used to belong to the dead daemon's descriptors and be free at
// once.)
func TestLocksOutliveDaemon(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	try := func(path string) string {
		t.Helper()
		cmd := exec.Command(self, path)
		cmd.Env = append(os.Environ(), helperEnv+"=locktry")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("locktry %s: %v\n%s", path, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	f := filepath.Join(s.Mountpoint, "f")
	release := startHolding(t, "lockhold", f)
	const held = "flock=EAGAIN posix=EAGAIN"
	if got := try(f); got != held {
		t.Fatalf("locks through the mount while held: %q, want %q", got, held)
	}
	for _, restart := range []struct {
		name string
		stop func(*daemon)
	}{
		{"kill -9", func(d *daemon) { d.kill(); d.waitExit(t) }},
		{"takeover", func(*daemon) {}},
	} {
		restart.stop(d)
		d = startDaemonAt(t, dir, d.stateDir, d.mountBase)
		for _, p := range []string{f, filepath.Join(root, "f")} {
			if got := try(p); got != held {
				t.Errorf("after %s: locks on %s: %q, want %q", restart.name, p, got, held)
			}
		}
		if strings.Contains(d.logText(), "kept lock not set again") {
			t.Errorf("after %s: a lock was not set again:\n%s", restart.name, d.logText())
		}
	}
	if err := release(); err != nil {
		t.Fatalf("lock holder: %v", err)
	}
	if got := try(f); got != "flock=ok posix=ok" {
		t.Errorf("locks after their holder exited: %q, want flock=ok posix=ok", got)
	}
}

// TestCreatedFileHeldAcrossRestart: a file created through the mount and
// held open across a kill -9 and restart, and across a takeover, opens and
// reads for every other process after it (issue 18 attack B1: EIO, since
// its passthrough backing ID, registered by the CREATE before the node was
// recorded, was lost, and the kernel refuses a second backing file for an
// inode open with one).
func TestCreatedFileHeldAcrossRestart(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, restart := range []struct {
		name string
		stop func(*daemon)
	}{
		{"kill -9", func(d *daemon) { d.kill(); d.waitExit(t) }},
		{"takeover", func(*daemon) {}},
	} {
		f := filepath.Join(s.Mountpoint, "new-"+strings.ReplaceAll(restart.name, " ", ""))
		release := startHolding(t, "createhold", f)
		restart.stop(d)
		d = startDaemonAt(t, dir, d.stateDir, d.mountBase)
		if r := run(t, commandf("cat %s", f)); r.code != 0 || r.stdout != "z" {
			t.Errorf("after %s: cat of a file created and held open before it: %+v, want z", restart.name, r)
		}
		if err := release(); err != nil {
			t.Errorf("%s: holder: %v", restart.name, err)
		}
	}
}

// TestJailRequestOfExitedCaller: a jail registration that waited in the
// kept socket's backlog while no daemon ran, from a caller that exited
// meanwhile, never registers the process that reuses the caller's pid
// (issue 18 attack B2: it was recorded as a jail and SIGKILLed with the
// session's jails later): the daemon takes the caller by its SO_PEERPIDFD
// pidfd, which names the exited process.
func TestJailRequestOfExitedCaller(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	d.waitExit(t)
	req := exec.Command(self, d.socket)
	req.Env = append(os.Environ(), helperEnv+"=jailreq")
	if out, err := req.CombinedOutput(); err != nil || string(out) != "sent\n" {
		t.Fatalf("jail request while no daemon runs: %v %q", err, out)
	}
	caller := req.Process.Pid
	// Another process under the caller's pid (ns_last_pid(5) makes the
	// next fork take it; another fork on the machine may come first).
	var other *exec.Cmd
	for try := 0; try < 50 && other == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(caller-1)), 0); err != nil {
			t.Skipf("ns_last_pid: %v", err)
		}
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == caller {
			other = c
		} else {
			c.Process.Kill()
			c.Wait()
		}
	}
	if other == nil {
		t.Skipf("no process got pid %d again in 50 tries (the machine forks too much)", caller)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	d = startDaemonAt(t, dir, d.stateDir, d.mountBase)
	// Answered (the queued request first, then this one).
	if _, err := d.c.List(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.logText(), fmt.Sprintf(`msg="jail started" session=s1 pid=%d`, caller)) {
		t.Errorf("process %d (not the caller, which exited) registered as a jail:\n%s", caller, d.logText())
	}
	if got := entries(t, filepath.Join(d.stateDir, "jails")); len(got) != 0 {
		t.Errorf("jail records: %v, want none", got)
	}
	d.stop()
	if err := other.Process.Signal(unix.Signal(0)); err != nil {
		t.Errorf("process %d after a full stop: %v, want it running", caller, err)
	}
}

// startHolding runs the test binary's helper action (lockhold,
// createhold) on path, waits for its "ready" and returns the call that
// lets it go (closes its stdin) and waits for its exit.
func startHolding(t *testing.T, action, path string) (release func() error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(self, path)
	holder.Env = append(os.Environ(), helperEnv+"="+action)
	in, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); holder.Process.Kill(); holder.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("%s %s: %q %v", action, path, line, err)
	}
	return func() error {
		in.Close()
		return holder.Wait()
	}
}
