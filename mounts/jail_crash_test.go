package mounts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/transport"
)

// TestJailKeptAcrossRestarts: with the connections kept (the holder), a
// jail outlives the daemon as every other process in the mounts does: its
// views are kept with the session's, so after kill -9 and a restart, and
// after a takeover, the same jail (every one of its processes, by pidfd)
// reads and writes on, and the next daemon has it registered again: a
// policy change reaches it, a session created later is hidden from it,
// and a full stop ends it. Records of a recorded pid that now names
// another process (another start time), or from another boot, are removed
// and that process left running.
func TestJailKeptAcrossRestarts(t *testing.T) {
	needJail(t)
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	j := d.startJailShell(t, "s1")
	if got := j.ask(t, `sleep 600 >/dev/null 2>&1 & echo 1 > "$WSFS_ROOT/jailcount" && cat "$WSFS_ROOT/jailcount"`); got != "rc=0 1" {
		t.Fatalf("jail: write jailcount: %q, want rc=0 1", got)
	}
	if !strings.Contains(d.logText(), `msg="jail view mounted" session=s1`) {
		t.Fatalf("no jail view mounted for s1 (the test needs one):\n%s", d.logText())
	}
	tree := descendants(j.pid)
	if len(tree) < 4 { // bwrap, its child (PID 1 in the jail), bash, sleep
		t.Fatalf("the jail's processes: %v, want at least bwrap, the jail's PID 1, bash and sleep", tree)
	}
	fds := map[int]int{}
	for _, pid := range tree {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		fds[pid] = fd
		t.Cleanup(func() { unix.Close(fd) })
	}
	other, otherFd := staleJailRecords(t, d.stateDir, "s1")
	records := filepath.Join(d.stateDir, "jails")
	jailRecord := fmt.Sprintf("%d-%d.json", j.pid, statStart(t, j.pid))

	d.kill()
	d.waitExit(t)
	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	if got := j.ask(t, `echo 2 >> "$WSFS_ROOT/jailcount" && cat "$WSFS_ROOT/jailcount"`); got != "rc=0 1 2" {
		t.Errorf("jail after kill -9 and a restart: %q, want rc=0 1 2", got)
	}
	if !strings.Contains(d2.logText(), fmt.Sprintf(`msg="jail kept" session=s1 pid=%d`, j.pid)) {
		t.Errorf("the next daemon did not log jail %d kept:\n%s", j.pid, d2.logText())
	}
	if pidfdExited(otherFd, 0) {
		t.Errorf("process %d under a stale jail record was killed", other)
	}
	if got := entries(t, records); !slices.Equal(got, []string{jailRecord}) {
		t.Errorf("jail records after the restart: %v, want only the jail's %s", got, jailRecord)
	}

	// A takeover (SIGTERM to the running daemon, a new one on the same
	// state directory) keeps it the same way.
	d2.detach()
	d3 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	if got := j.ask(t, `echo 3 >> "$WSFS_ROOT/jailcount" && cat "$WSFS_ROOT/jailcount"`); got != "rc=0 1 2 3" {
		t.Errorf("jail after a takeover: %q, want rc=0 1 2 3", got)
	}
	for pid, fd := range fds {
		if pidfdExited(fd, 0) {
			t.Errorf("jail process %d ended across the restarts", pid)
		}
	}
	// Registered again: a session created now is covered in the jail
	// (hideInJails), and the session's new policy reaches its views.
	// Outside the daemon's directory, which every jail hides whole.
	root2 := filepath.Join(outsideDaemonDir(t), "proj2")
	mkTree(t, root2, "secret")
	if _, err := d3.c.Create(ctx, api.CreateRequest{ID: "s2", Root: root2}); err != nil {
		t.Fatal(err)
	}
	if got := j.ask(t, "ls -A "+canon(t, root2)); got != "rc=0 " {
		t.Errorf("jail: ls of a session created after the takeover: %q, want rc=0 and nothing listed", got)
	}
	if _, err := d3.c.SetPolicy(ctx, "s1", api.Policy{Mode: api.ModeReadOnly}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("rc=1 bash: %s/jailcount: Read-only file system", canon(t, root))
	if got := j.ask(t, `echo 4 >> "$WSFS_ROOT/jailcount"`); got != want {
		t.Errorf("jail after its session became read-only: %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(s.Mountpoint, "jailcount")); got != "1\n2\n3\n" {
		t.Errorf("jailcount through the mount: %q, want 1 2 3 on lines", got)
	}

	d3.stop()
	for _, pid := range tree {
		if !pidfdExited(fds[pid], 10*time.Second) {
			t.Errorf("jail process %d still runs after a full stop", pid)
		}
	}
	if got := entries(t, records); len(got) != 0 {
		t.Errorf("jail records after a full stop: %v, want none", got)
	}
}

// TestJailEndedAfterCrash: a daemon killed with kill -9 together with the
// holder of its connections leaves its jails running (bwrap is the
// caller's child, not the daemon's) with their jail views dead: every
// write of theirs gives ENOTCONN. The next daemon, which cannot serve
// those views on, ends the jails from the records in <state>/jails before
// it serves: every process of the jail (bwrap, the jail's PID 1, the shell
// and a background job) is gone, by pidfd, and the session serves on, a
// new jail included. A record whose pid now names another process
// (another start time), or that comes from another boot, is removed and
// that process left running.
func TestJailEndedAfterCrash(t *testing.T) {
	needJail(t)
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	j := d.startJailShell(t, "s1")
	if got := j.ask(t, `sleep 600 >/dev/null 2>&1 & echo 1 > "$WSFS_ROOT/jailcount" && cat "$WSFS_ROOT/jailcount"`); got != "rc=0 1" {
		t.Fatalf("jail: write jailcount: %q, want rc=0 1", got)
	}
	tree := descendants(j.pid)
	if len(tree) < 4 { // bwrap, its child (PID 1 in the jail), bash, sleep
		t.Fatalf("the jail's processes: %v, want at least bwrap, the jail's PID 1, bash and sleep", tree)
	}
	fds := map[int]int{}
	for _, pid := range tree {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		fds[pid] = fd
		t.Cleanup(func() { unix.Close(fd) })
	}
	other, otherFd := staleJailRecords(t, d.stateDir, "s1")
	records := filepath.Join(d.stateDir, "jails")
	if got, want := entries(t, records), fmt.Sprintf("%d-%d.json", j.pid, statStart(t, j.pid)); !slices.Contains(got, want) {
		t.Fatalf("jail records %v, want %s among them", got, want)
	}

	d.kill()
	d.waitExit(t)
	killHolder(t, d.stateDir)
	// The jail runs on, its view dead. The kernel answers a request it
	// aborted with the connection ECONNABORTED and one made after
	// ENOTCONN (fs/fuse/dev.c fuse_abort_conn, fuse_get_req); over FUSE
	// over io_uring the first call here is one it aborted.
	wantPrefix := fmt.Sprintf("rc=1 bash: %s/jailcount: ", canon(t, root))
	got := j.ask(t, `echo 2 > "$WSFS_ROOT/jailcount"`)
	if got != wantPrefix+"Transport endpoint is not connected" && got != wantPrefix+"Software caused connection abort" {
		t.Errorf("jail after kill -9: %q, want %q or %q", got, wantPrefix+"Transport endpoint is not connected", wantPrefix+"Software caused connection abort")
	}
	for pid, fd := range fds {
		if pidfdExited(fd, 0) {
			t.Errorf("jail process %d ended with the daemon; the test needs it running", pid)
		}
	}

	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	for _, pid := range tree {
		// bwrap and the jail's PID 1 have exited once the next daemon
		// serves; the rest die with the PID namespace.
		if !pidfdExited(fds[pid], 10*time.Second) {
			t.Errorf("jail process %d still runs after the next daemon started", pid)
		}
	}
	if !strings.Contains(d2.logText(), fmt.Sprintf(`msg="recover: ending a jail whose views cannot be served on" session=s1 pid=%d`, j.pid)) {
		t.Errorf("the next daemon did not log ending jail %d:\n%s", j.pid, d2.logText())
	}
	if pidfdExited(otherFd, 0) {
		t.Errorf("process %d under a stale jail record was killed", other)
	}
	if got := entries(t, records); len(got) != 0 {
		t.Errorf("jail records after the next start: %v, want none", got)
	}

	if got := readFile(t, filepath.Join(s.Mountpoint, "jailcount")); got != "1\n" {
		t.Errorf("jailcount through the mount after the next start: %q, want 1", got)
	}
	if got := d2.exec(t, "s1", []string{"--confine"}, "sh", "-c", `echo 3 > "$WSFS_ROOT/jailcount" && cat "$WSFS_ROOT/jailcount"`); got.code != 0 || got.stdout != "3\n" {
		t.Errorf("a new jail after the next start: %+v, want exit 0, 3", got)
	}
	// The new jail has exited: its record goes with it.
	if !waitDirEmpty(t, records, 10*time.Second) {
		t.Errorf("jail records 10s after the new jail exited: %v, want none", entries(t, records))
	}
	d2.stop()
	if got := entries(t, records); len(got) != 0 {
		t.Errorf("jail records after a stop: %v, want none", got)
	}
}

// staleJailRecords starts a process that is no jail and writes two jail
// records of session id under its pid in stateDir: one with another start
// time (its pid was a jail's, which exited), one with its own start time
// but from another boot. It returns the process's pid and a pidfd on it.
func staleJailRecords(t *testing.T, stateDir, id string) (int, int) {
	t.Helper()
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	otherFd, err := unix.PidfdOpen(other.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(otherFd) })
	start := statStart(t, other.Process.Pid)
	boot := strings.TrimSpace(readFile(t, "/proc/sys/kernel/random/boot_id"))
	for _, r := range []struct {
		start uint64
		boot  string
	}{{start + 1, boot}, {start, "another-boot"}} {
		data, err := json.Marshal(map[string]any{"session": id, "pid": other.Process.Pid, "start": r.start, "boot": r.boot})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stateDir, "jails", fmt.Sprintf("%d-%d.json", other.Process.Pid, r.start)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return other.Process.Pid, otherFd
}

// killHolder kills the holder of the connections of the daemon on
// stateDir with SIGKILL and waits for it to exit: every kept connection
// ends (ENOTCONN) once no daemon holds it either.
func killHolder(t *testing.T, stateDir string) {
	t.Helper()
	h := &transport.Holder{Socket: filepath.Join(stateDir, "holder.sock")}
	pid, err := h.Ping()
	h.Close()
	if err != nil {
		t.Fatalf("holder of %s: %v", stateDir, err)
	}
	killWait(t, "the holder", pid)
}

// TestJailEndedWithDaemon: when a daemon that keeps no connections
// (--keep-connections=false: its jails' views die with it) is killed with
// kill -9 and no next one starts, its jail reaper ends the jails at once (every process
// of both jails gone, by pidfd) and exits; a reaper killed before is
// replaced with the next jail and the new one ends the earlier jail too.
// The next daemon, started later, finds the jails' records of processes
// gone and removes them.
func TestJailEndedWithDaemon(t *testing.T) {
	needJail(t)
	dir := newDaemonDir(t)
	d := startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"), "--keep-connections=false")
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	if _, err := d.c.Create(context.Background(), api.CreateRequest{ID: "s1", Root: root}); err != nil {
		t.Fatal(err)
	}
	j := d.startJailShell(t, "s1")
	if got := j.ask(t, `sleep 600 >/dev/null 2>&1 & echo started`); got != "rc=0 started" {
		t.Fatalf("jail: background sleep: %q", got)
	}
	// A reaper that dies is replaced with the next jail, and the new one
	// is handed the jails that run already too.
	first := reaperPid(t, d)
	killReaper(t, d)
	j2 := d.startJailShell(t, "s1")
	reaper := reaperPid(t, d)
	if reaper == first {
		t.Fatalf("no new jail reaper after the first (%d) was killed:\n%s", first, d.logText())
	}
	procs := append(append(descendants(j.pid), descendants(j2.pid)...), reaper)
	fds := map[int]int{}
	for _, pid := range procs {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		fds[pid] = fd
		t.Cleanup(func() { unix.Close(fd) })
	}
	d.kill()
	d.waitExit(t)
	for _, pid := range procs {
		if !pidfdExited(fds[pid], 10*time.Second) {
			t.Errorf("process %d (jails %d and %d, reaper %d) still runs 10s after the daemon was killed", pid, j.pid, j2.pid, reaper)
		}
	}
	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase, "--keep-connections=false")
	for _, pid := range []int{j.pid, j2.pid} {
		if !strings.Contains(d2.logText(), fmt.Sprintf(`msg="recover: jail gone" session=s1 pid=%d`, pid)) {
			t.Errorf("the next daemon did not find jail %d gone:\n%s", pid, d2.logText())
		}
	}
	if got := entries(t, filepath.Join(d.stateDir, "jails")); len(got) != 0 {
		t.Errorf("jail records after the next start: %v, want none", got)
	}
}

// reaperPid returns the pid of d's jail reaper, from its last log line.
func reaperPid(t *testing.T, d *daemon) int {
	t.Helper()
	ms := regexp.MustCompile(`msg="jail reaper started: it ends the jails if the daemon dies" pid=([0-9]+)`).FindAllStringSubmatch(d.logText(), -1)
	if ms == nil {
		t.Fatalf("no jail reaper started:\n%s", d.logText())
	}
	pid, _ := strconv.Atoi(ms[len(ms)-1][1])
	return pid
}

// killReaper kills d's jail reaper and waits for it to exit.
func killReaper(t *testing.T, d *daemon) {
	t.Helper()
	killWait(t, "the jail reaper", reaperPid(t, d))
}

// killWait kills process pid (what names it) with SIGKILL through a pidfd
// and waits, up to 10 s, for it to exit.
func killWait(t *testing.T, what string, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("%s %d: %v", what, pid, err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatalf("kill %s %d: %v", what, pid, err)
	}
	if !pidfdExited(fd, 10*time.Second) {
		t.Fatalf("%s %d still runs 10s after SIGKILL", what, pid)
	}
}

// descendants returns pid and every process below it (/proc/PID/task/TID/
// children, proc(5)), parents first.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], task.Name()))
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// statStart returns process pid's start time (/proc/PID/stat field 22).
func statStart(t *testing.T, pid int) uint64 {
	t.Helper()
	s := readFile(t, fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, err)
	}
	return n
}

// pidfdExited reports whether the process of pidfd fd has exited, waiting
// up to wait for it.
func pidfdExited(fd int, wait time.Duration) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(wait)
	for {
		n, err := unix.Poll(p, int(time.Until(deadline).Milliseconds()))
		if n > 0 {
			return true
		}
		if err != unix.EINTR || !time.Now().Before(deadline) {
			return false
		}
	}
}

// waitDirEmpty waits, up to wait, until dir has no entries, woken by
// inotify at each removal; false when some are left.
func waitDirEmpty(t *testing.T, dir string, wait time.Duration) bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_DELETE|unix.IN_MOVED_FROM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	buf := make([]byte, 4096)
	for len(entries(t, dir)) != 0 {
		if !time.Now().Before(deadline) {
			return false
		}
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(p, int(time.Until(deadline).Milliseconds())+1)
		unix.Read(fd, buf) // drained: the next removal wakes the poll
	}
	return true
}
