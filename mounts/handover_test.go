package mounts_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestTakeoverFailedOldResumes: a successor that fails after it asked the
// running daemon to stop but before it serves (here its metrics address is
// taken) leaves the running daemon serving: it stopped at a request
// boundary and waited, suspended, for the successor to commit; at the
// successor's exit it takes its lock back and serves on. A process
// appending through the mount all along loses no write and sees no error,
// the API answers (a request sent meanwhile waits in the socket's
// backlog), and a later successor that does not fail takes over.
func TestTakeoverFailedOldResumes(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctl := t.TempDir()
	app := exec.Command("sh", "-c", appendLoop)
	app.Env = append(os.Environ(), "MNT="+s.Mountpoint, "CTL="+ctl)
	var appOut strings.Builder
	app.Stdout, app.Stderr = &appOut, &appOut
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Process.Kill(); app.Wait() })

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for i := range 2 {
		out, err := exec.Command(wsfsBin, "serve", "--socket", d.socket, "--state-dir", d.stateDir, "--mount-base", d.mountBase,
			"--metrics-address", addr).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), fmt.Sprintf("--metrics-address %q", addr)) {
			t.Fatalf("successor %d with its metrics address taken: %v, want exit 2 naming --metrics-address %q:\n%s", i, err, addr, out)
		}
		if !strings.Contains(string(out), "taking over from the running daemon") {
			t.Fatalf("successor %d failed before it took over; the test needs it to fail after:\n%s", i, out)
		}
		// Answered once the daemon serves again.
		if ss, err := d.c.List(ctx); err != nil || len(ss) != 1 || ss[0].ID != "s1" {
			t.Fatalf("list after failed successor %d: %v %v, want s1", i, ss, err)
		}
		if !d.waitLog(`msg="the successor exited before it served: serving on"`, i+1) {
			t.Fatalf("the daemon did not resume %d times after %d failed successors:\n%s", i+1, i+1, d.logText())
		}
	}
	select {
	case <-d.done:
		t.Fatalf("the daemon exited after a failed takeover:\n%s", d.logText())
	default:
	}
	if got := readFile(t, filepath.Join(s.Mountpoint, "f")); got != "f" {
		t.Errorf("f through the mount after the failed takeovers: %q, want f", got)
	}

	// A successor that does not fail takes over: the old one exits 0.
	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	d.waitExit(t)
	if err := d.cmd.Wait(); err != nil && !strings.Contains(err.Error(), "already") {
		t.Errorf("the daemon taken over from: %v, want exit 0", err)
	}
	if d.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("the daemon taken over from exited %d, want 0:\n%s", d.cmd.ProcessState.ExitCode(), d.logText())
	}
	if !strings.Contains(d2.logText(), `msg="takeover committed: the previous daemon has exited"`) {
		t.Errorf("the successor did not commit:\n%s", d2.logText())
	}
	if err := os.WriteFile(filepath.Join(ctl, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := app.Wait(); err != nil {
		t.Fatalf("appender: %v\n%s", err, appOut.String())
	}
	k, _ := strconv.Atoi(strings.TrimSpace(appOut.String()))
	if data, err := os.ReadFile(filepath.Join(root, "appended")); err != nil || !slices.Equal(strings.Fields(string(data)), counting(k)) {
		t.Fatalf("appended: %d writes acknowledged, the file on disk differs (%v)", k, err)
	}
	if k == 0 {
		t.Errorf("appended: no write acknowledged")
	}
}

// TestSuccessorBeatsNamedOne: of two successors started at once, the one
// the running daemon names (the last to write the handover file) may lose
// the lock to the other, which finds it free because the daemon let go of
// it when it suspended itself. That other one commits to the suspended
// daemon as the named one would have: the daemon exits 0 and the session
// is served by the one that holds the lock. Here the named successor is a
// process that never takes the lock (sleep), so the race is decided.
// Before, the unnamed one served as after a crash and the suspended daemon
// waited on for good, both alive.
func TestSuccessorBeatsNamedOne(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	named := exec.Command("sleep", "600")
	if err := named.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { named.Process.Kill(); named.Wait() })
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", named.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	js := fmt.Sprintf(`{"successor":%d,"start":%s}`, named.Process.Pid, fields[19])
	if err := os.WriteFile(filepath.Join(d.stateDir, "takeover.json"), []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	// SIGTERM (not d.detach, which waits for the exit): the daemon
	// suspends itself for the named successor.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !d.waitLog(`msg="handing over: serving stopped, waiting for the successor to serve"`, 1) {
		t.Fatalf("the daemon did not suspend itself for the named successor:\n%s", d.logText())
	}
	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	d.waitExit(t)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the suspended daemon exited %d, want 0:\n%s\nthe successor:\n%s", code, d.logText(), d2.logText())
	}
	if !d.waitLog(`msg="the successor serves: detaching"`, 1) {
		t.Errorf("the suspended daemon did not take the commit:\n%s", d.logText())
	}
	if !strings.Contains(d2.logText(), `msg="takeover committed: the previous daemon has exited"`) {
		t.Errorf("the successor did not commit:\n%s", d2.logText())
	}
	if got := readFile(t, filepath.Join(s.Mountpoint, "f")); got != "f" {
		t.Errorf("f through the mount after the takeover: %q, want f", got)
	}
}

// TestStaleSuspendedIgnored: a takeover.suspended left by a daemon killed
// while it waited for a commit names a pid that another process may have
// taken since; a daemon started later, finding the lock free and that pid
// recorded in it, does not take that process for a suspended daemon (its
// start time differs from the one recorded): it serves, and the process is
// not signalled (SIGUSR1 would end it).
func TestStaleSuspendedIgnored(t *testing.T) {
	dir := newDaemonDir(t)
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(other.Process.Pid)
	if err := os.WriteFile(filepath.Join(state, "lock"), []byte(pid+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The start time of the process that died, not of this one.
	if err := os.WriteFile(filepath.Join(state, "takeover.suspended"), []byte(pid+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir)
	if _, err := d.c.List(context.Background()); err != nil {
		t.Fatalf("list: %v\n%s", err, d.logText())
	}
	if strings.Contains(d.logText(), "takeover committed") {
		t.Errorf("the daemon committed to an unrelated process:\n%s", d.logText())
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unrelated process named in the stale file: %v, want alive", err)
	}
}
