package fusefs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"

	"github.com/wsfs/wsfs/transport"
)

// childHolderEnv names the holder socket a re-executed server keeps its
// connection in (childServe).
const childHolderEnv = "WSFS_TEST_CHILD_HOLDER"

// childTransportEnv gives the child server's Config.Transport ("" for
// the default).
const childTransportEnv = "WSFS_TEST_CHILD_TRANSPORT"

// childDieEnv names "op:name", the request after which the child server
// kills itself before answering (fusefs.SetCarriedOut).
const childDieEnv = "WSFS_TEST_CHILD_DIE"

// childFailQueueEnv makes the child server's rings taken over fail the
// registration of that queue (transport.FailAdoptedQueueForTest); a child
// whose Mount fails then also prints what connDescriptors finds.
const childFailQueueEnv = "WSFS_TEST_CHILD_FAIL_QUEUE"

// connDescriptors lists, sorted, what this process's descriptors of a FUSE
// connection and of ring memory link to (/dev/fuse, /memfd:wsfs-ring).
func connDescriptors() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var kept []string
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (l == "/dev/fuse" || strings.HasPrefix(l, "/memfd:wsfs-ring")) {
			kept = append(kept, l)
		}
	}
	sort.Strings(kept)
	return strings.Join(kept, ",")
}

// ringHolderT skips the test unless it can keep a server's connection on
// FUSE over io_uring (root, for open_by_handle_at(2); the fuse module's
// enable_uring on), and returns an empty backing directory, mountpoint
// and control directory under a new temporary directory, and the socket
// of a holder listening in the control directory (holderT).
func ringHolderT(t *testing.T) (backing, mnt, ctl, sock string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2) needs CAP_DAC_READ_SEARCH")
	}
	if _, on := transport.KernelURing(); !on {
		t.Skip("FUSE over io_uring is off (" + transport.URingParameter + "; .ci/run's io-uring pass turns it on)")
	}
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl = filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl} {
		mkdirT(t, d, 0o755)
	}
	return backing, mnt, ctl, holderT(t, filepath.Join(ctl, "h.sock"), mnt)
}

// holderT runs a holder at sock in this process and returns sock. Cleanup
// tells it to exit (the connections it alone keeps end) and detaches mnt
// if a mount is still there.
func holderT(t *testing.T, sock, mnt string) string {
	t.Helper()
	listening, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- transport.RunHolder(sock, func() { close(listening) }) }()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("holder: %v", err)
	}
	t.Cleanup(func() {
		h := &transport.Holder{Socket: sock}
		h.Exit()
		h.Close()
		<-done
		if isMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return sock
}

// keptServer runs the test binary as a server of backing at mnt whose
// connection is kept in the holder at sock (adopting the one kept there,
// if any), and returns once it serves; given childTransportEnv in env, it
// fails the test unless the server is on that transport (a ring that could
// not register leaves a new mount on /dev/fuse, and a test of the ring
// would pass on /dev/fuse).
func keptServer(t *testing.T, backing, mnt, sock string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(append(os.Environ(), childServeEnv+"="+backing, "WSFS_TEST_CHILD_MNT="+mnt, childHolderEnv+"="+sock), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	want := "ready "
	for _, e := range env {
		switch e {
		case childTransportEnv + "=" + string(transport.IOURing):
			want += transport.NameURing + "\n"
		case childTransportEnv + "=" + string(transport.Dev):
			want += transport.NameDev + "\n"
		}
	}
	if !strings.HasPrefix(line, want) {
		t.Fatalf("child server: %q, want %q", line, want)
	}
	return cmd
}

// TestKeptConnectionSurvivesKill9: with its connection kept in a holder, a
// server killed with SIGKILL is replaced by a successor that serves the
// same connection, and processes in the mount never see an error: a shell
// whose cwd is three levels deep and which holds a file open for append
// goes on (append, read back, mkdir/rmdir, rename, readdir, stat, pwd -P)
// after the successor serves, and a write loop that runs through the kill
// loses no write and gets no error (requests read by the dead server are
// sent again: FUSE_NOTIFY_RESEND on /dev/fuse; over io_uring its ring
// entries are taken over). The same for a handover (SIGTERM: the server
// stops at a request boundary and exits), on /dev/fuse and over FUSE over
// io_uring. Without the holder the same kill leaves ENOTCONN
// (TestDeadMountDetected).
func TestKeptConnectionSurvivesKill9(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2) needs CAP_DAC_READ_SEARCH")
	}
	for _, tr := range []string{"dev", "io-uring"} {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			t.Run(tr+"/"+strings.ToLower(sig.String()), func(t *testing.T) {
				if _, on := transport.KernelURing(); tr == "io-uring" && !on {
					t.Skip("FUSE over io_uring is off (" + transport.URingParameter + "; .ci/run's io-uring pass turns it on)")
				}
				keptSurvives(t, sig, childTransportEnv+"="+tr)
			})
		}
	}
}

// keptSurvives is TestKeptConnectionSurvivesKill9 with the first server
// ended by sig, each server started with env.
func keptSurvives(t *testing.T, sig syscall.Signal, env ...string) {
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl, filepath.Join(backing, "a/b/c")} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(backing, "a/b/c/f"), "one\n", 0o644)
	// A short path: the subtests' directories are too long for a socket's
	// name (108 bytes).
	short, err := os.MkdirTemp("", "h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	sock := holderT(t, filepath.Join(short, "holder.sock"), mnt)

	first := keptServer(t, backing, mnt, sock, env...)

	// The shell: cwd three levels deep, fd 3 open for append on f,
	// waits at fifo "go" (outside the mount) until the successor serves.
	goFifo, readyFifo, loopStop := filepath.Join(ctl, "go"), filepath.Join(ctl, "ready"), filepath.Join(ctl, "stop")
	loopFifo := filepath.Join(ctl, "looping")
	for _, f := range []string{goFifo, readyFifo, loopFifo} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -e
cd "$MNT/a/b/c"
exec 3>>f
echo held > "$CTL/ready"
read line < "$CTL/go"
echo two >&3
cat f
mkdir d && rmdir d
mv f g && mv g f
ls
stat -c %s f
pwd -P
`
	sh := exec.Command("sh", "-c", script)
	sh.Env = append(os.Environ(), "MNT="+mnt, "CTL="+ctl)
	var shOut strings.Builder
	sh.Stdout, sh.Stderr = &shOut, &shOut
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })

	// The loop: appends its counter to w through the mount until stop
	// exists, exit status 9 on the first failed write; it says so at fifo
	// "looping" after its first write.
	loop := exec.Command("sh", "-c", `exec 4>>"$MNT/w"; echo 0 >&4 || exit 9; echo on > "$CTL/looping"; i=1; while [ ! -e "$CTL/stop" ]; do echo $i >&4 || exit 9; i=$((i+1)); done; echo $i`)
	loop.Env = sh.Env
	var loopOut strings.Builder
	loop.Stdout, loop.Stderr = &loopOut, &loopOut
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loop.Process.Kill(); loop.Wait() })

	// Blocks until the shell has its cwd and fd 3 in the mount, and the
	// loop writes.
	if got, err := os.ReadFile(readyFifo); err != nil || string(got) != "held\n" {
		t.Fatalf("the shell's ready line: %q, %v\n%s", got, err, shOut.String())
	}
	if got, err := os.ReadFile(loopFifo); err != nil || string(got) != "on\n" {
		t.Fatalf("the loop's first line: %q, %v\n%s", got, err, loopOut.String())
	}
	if err := first.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	keptServer(t, backing, mnt, sock, env...)

	if err := os.WriteFile(goFifo, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := sh.Wait(); err != nil {
		t.Fatalf("the shell in the mount failed after the takeover: %v\n%s", err, shOut.String())
	}
	want := fmt.Sprintf("one\ntwo\nf\n8\n%s\n", filepath.Join(backing, "a/b/c"))
	// pwd -P in the mount is the mount's path (the mount shows the root).
	want = strings.Replace(want, backing, mnt, 1)
	if got := shOut.String(); got != want {
		t.Errorf("the shell's output after the takeover:\n%s\nwant:\n%s", got, want)
	}
	writeFileT(t, loopStop, "", 0o644)
	if err := loop.Wait(); err != nil {
		t.Fatalf("the write loop failed across the kill: %v\n%s", err, loopOut.String())
	}
	n, err := strconv.Atoi(strings.TrimSpace(loopOut.String()))
	if err != nil {
		t.Fatalf("loop output %q", loopOut.String())
	}
	data, err := os.ReadFile(filepath.Join(backing, "w"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("w on disk has %d lines, the loop acknowledged %d writes", len(lines), n)
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("w line %d is %q, want %d (writes lost or out of order)", i, l, i)
		}
	}
	if got, err := os.ReadFile(filepath.Join(backing, "a/b/c/f")); err != nil || string(got) != "one\ntwo\n" {
		t.Errorf("f on disk: %q, %v; want %q", got, err, "one\ntwo\n")
	}
}

// TestRingQueuedWhileDownServed: over FUSE over io_uring, a request made
// while no server runs waits on its CPU's ring queue (the dead server's
// entries are gone, the successor's not yet registered), and the kernel
// hands such a request out only at the next commit on that queue: the
// successor kicks every queue (transport/kick.go: a child process stats
// the mount's root from each CPU), so a stat(1) pinned to each CPU,
// started while no server ran and with nothing else happening on the
// mount (a shell holds a file open, idle), is answered. Without the kick
// each waits for good.
func TestRingQueuedWhileDownServed(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset(1) missing")
	}
	backing, mnt, ctl, sock := ringHolderT(t)
	writeFileT(t, filepath.Join(backing, "held"), "held\n", 0o644)
	env := childTransportEnv + "=io-uring"
	first := keptServer(t, backing, mnt, sock, env)

	ready := filepath.Join(ctl, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	hold := exec.Command("sh", "-c", `exec 3<"$MNT/held"; echo held > "$CTL/ready"; exec sleep 600`)
	hold.Env = append(os.Environ(), "MNT="+mnt, "CTL="+ctl)
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed while a server runs (end of the test): its close of held
	// is a request. On a failure, reaped once the holder's cleanup has
	// ended the connection.
	t.Cleanup(func() { hold.Process.Kill(); go hold.Wait() })
	if got, err := os.ReadFile(ready); err != nil || string(got) != "held\n" {
		t.Fatalf("the holding shell: %q, %v", got, err)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()

	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	type result struct {
		cpu int
		out string
		err error
	}
	done := make(chan result)
	n := 0
	var stats []int
	for cpu := 0; cpu < 1024 && n < set.Count(); cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		n++
		writeFileT(t, filepath.Join(backing, fmt.Sprintf("new%d", cpu)), "", 0o644)
		cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), "stat", "-c", "%n", filepath.Join(mnt, fmt.Sprintf("new%d", cpu)))
		t.Cleanup(func() {
			if cmd.Process != nil {
				cmd.Process.Kill()
			}
		})
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stats = append(stats, cmd.Process.Pid)
		go func(cpu int) {
			err := cmd.Wait()
			done <- result{cpu, out.String(), err}
		}(cpu)
	}
	// The stats wait on their queues (no server: each in
	// request_wait_answer), then the successor starts.
	waitInFuse(t, stats)
	keptServer(t, backing, mnt, sock, env)
	timeout := time.After(time.Minute)
	for range n {
		select {
		case r := <-done:
			want := filepath.Join(mnt, fmt.Sprintf("new%d", r.cpu)) + "\n"
			if r.err != nil || r.out != want {
				t.Errorf("stat on CPU %d made while no server ran: %q, %v; want %q", r.cpu, r.out, r.err, want)
			}
		case <-timeout:
			t.Fatal("a stat made while no server ran still waits a minute after the successor serves (no kick)")
		}
	}
	hold.Process.Kill()
	hold.Wait()
}

// waitInFuse returns once every process of pids waits in a FUSE request
// (its wchan request_wait_answer), failing the test after a minute.
func waitInFuse(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range pids {
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
			if err == nil && string(b) == "request_wait_answer" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d is not waiting in a FUSE request (wchan %q, %v)", pid, b, err)
			}
			runtime.Gosched()
		}
	}
}

// TestResentRequestCarriedOutOnce: a server killed after it carried out a
// request but before it answered leaves the request to its successor
// (FUSE_NOTIFY_RESEND); the successor finds in the state that the
// predecessor had begun it, so the caller gets the success it would have
// got, not the EEXIST or ENOENT of doing it twice: mkdir, create O_EXCL,
// unlink and rename, each killed once; and mkdir, unlink, rename and link
// killed after their system call but before its success was recorded,
// where what the successor finds tells (found by hack/measure-outlive.sh:
// "mkdir: File exists" after a kill -9 under load).
func TestResentRequestCarriedOutOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2) needs CAP_DAC_READ_SEARCH")
	}
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(backing, "gone"), "x", 0o644)
	writeFileT(t, filepath.Join(backing, "from"), "y", 0o644)
	writeFileT(t, filepath.Join(backing, "gone2"), "x", 0o644)
	writeFileT(t, filepath.Join(backing, "from2"), "y", 0o644)
	sock := holderT(t, filepath.Join(ctl, "holder.sock"), mnt)
	var next *exec.Cmd // the successor serving the mount: killed before the next round's server starts
	for _, c := range []struct{ die, cmd string }{
		{"mkdir:made", "mkdir made"},
		{"create:excl", "set -C; : > excl"}, // noclobber: O_CREAT|O_EXCL
		{"unlink:gone", "rm gone"},
		{"rename:from", "mv from to"},
		// Killed after the system call, before its success was
		// recorded: what the successor finds tells, but for an O_EXCL
		// create (it keeps its EEXIST: exclusivity is not provable).
		{"undone-mkdir:made2", "mkdir made2"},
		{"undone-unlink:gone2", "rm gone2"},
		{"undone-rename:from2", "mv from2 to2"},
		{"undone-link:linked", "ln to2 linked"},
	} {
		if next != nil {
			next.Process.Kill()
			next.Wait()
		}
		srv := keptServer(t, backing, mnt, sock, childDieEnv+"="+c.die)
		sh := exec.Command("sh", "-c", c.cmd+"; echo status $?")
		sh.Dir = mnt
		var out strings.Builder
		sh.Stdout, sh.Stderr = &out, &out
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		// The server kills itself with the request carried out.
		if err := srv.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("%s: the server did not die at %s: %v", c.cmd, c.die, err)
		}
		next = keptServer(t, backing, mnt, sock)
		if err := sh.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", c.cmd, err, out.String())
		}
		if got := out.String(); got != "status 0\n" {
			t.Errorf("%s across the kill: %q, want status 0", c.cmd, got)
		}
	}
	for name, want := range map[string]bool{"made": true, "excl": true, "gone": false, "from": false, "to": true,
		"made2": true, "gone2": false, "from2": false, "to2": true, "linked": true} {
		if _, err := os.Lstat(filepath.Join(backing, name)); (err == nil) != want {
			t.Errorf("%s on disk: %v, want present %v", name, err, want)
		}
	}
}

// TestHostChangesWhileDownSeenAtOnce: what the host changed while no server
// ran (a file made where the kernel had cached its absence, a file replaced
// by a rename, a file removed) is seen through the mount as soon as the
// successor serves, not when the predecessor's cached entries time out.
func TestHostChangesWhileDownSeenAtOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2) needs CAP_DAC_READ_SEARCH")
	}
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(backing, "conf"), "v1\n", 0o644)
	writeFileT(t, filepath.Join(backing, "other"), "keep\n", 0o644)
	sock := holderT(t, filepath.Join(ctl, "holder.sock"), mnt)
	srv := keptServer(t, backing, mnt, sock)
	// Warm the kernel's caches: two files read, one name absent.
	for _, f := range []string{"conf", "other"} {
		if _, err := os.ReadFile(filepath.Join(mnt, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(filepath.Join(mnt, "born")); !os.IsNotExist(err) {
		t.Fatalf("born before: %v", err)
	}
	srv.Process.Kill()
	srv.Wait()
	writeFileT(t, filepath.Join(backing, "born"), "born\n", 0o644)
	writeFileT(t, filepath.Join(backing, "conf.tmp"), "v2\n", 0o644)
	if err := os.Rename(filepath.Join(backing, "conf.tmp"), filepath.Join(backing, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(backing, "other")); err != nil {
		t.Fatal(err)
	}
	keptServer(t, backing, mnt, sock)
	if got, err := os.ReadFile(filepath.Join(mnt, "born")); err != nil || string(got) != "born\n" {
		t.Errorf("a file made on the host while no server ran: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "conf")); err != nil || string(got) != "v2\n" {
		t.Errorf("a file replaced on the host while no server ran: %q, %v", got, err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "other")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a file removed on the host while no server ran: %v, want ENOENT", err)
	}
}

// TestForgetRecordedAtForget: a node the kernel forgets is recorded as
// forgotten at the FORGET (go-fuse's NodeOnForgetter, with
// NodeOnKernelRefer for a node a LOOKUP takes back), not when its
// descriptor is released two seconds later, so a server killed in between
// leaves a successor that does not restore, hence hold, the node.
func TestForgetRecordedAtForget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2), drop_caches")
	}
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl, filepath.Join(backing, "keep")} {
		mkdirT(t, d, 0o755)
	}
	x := filepath.Join(backing, "keep/x")
	writeFileT(t, x, "x\n", 0o644)
	sock := holderT(t, filepath.Join(ctl, "holder.sock"), mnt)
	first := keptServer(t, backing, mnt, sock)
	if got := shOK(t, "/", "cat "+shq(mnt+"/keep/x")); got != "x\n" {
		t.Fatalf("cat keep/x: %q", got)
	}
	// The kernel evicts every unused inode, keep/x among them: FORGET.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	// The kernel sends queued FORGETs before other requests: once these
	// are answered, the server has read them.
	for i := 0; i < 3; i++ {
		shOK(t, "/", "stat -c %i "+shq(mnt)+" >/dev/null")
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	next := keptServer(t, backing, mnt, sock)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", next.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if p, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", next.Process.Pid, e.Name())); p == x {
			t.Errorf("the successor holds %s (fd %s): a node forgotten before the kill was restored", x, e.Name())
		}
	}
	// The mount works on, keep/x looked up afresh.
	if got := shOK(t, "/", "cat "+shq(mnt+"/keep/x")); got != "x\n" {
		t.Errorf("cat keep/x after the takeover: %q", got)
	}
}

// childForgetLateEnv names "ctl:ino" for a child server (forgetLate).
const childForgetLateEnv = "WSFS_TEST_CHILD_FORGET_LATE"

// forgetLate makes the child server hold back the record of the first
// FORGET of node ino: it writes "blocked" to fifo ctl/blocked, waits for a
// line at ctl/release, records, and writes "recorded" to ctl/recorded.
func forgetLate(spec string) {
	ctl, inoText, _ := strings.Cut(spec, ":")
	ino, _ := strconv.ParseUint(inoText, 10, 64)
	var once bool
	fusefs.SetCountRecord(func(i uint64, delta int64, record func()) {
		if once || i != ino || delta >= 0 {
			record()
			return
		}
		once = true
		os.WriteFile(filepath.Join(ctl, "blocked"), []byte("blocked\n"), 0)
		os.ReadFile(filepath.Join(ctl, "release"))
		record()
		os.WriteFile(filepath.Join(ctl, "recorded"), []byte("recorded\n"), 0)
	})
}

// readFifoT reads the fifo p whole; a writer that never comes fails the
// test after limit (a missing FORGET or server, not a slow one).
func readFifoT(t *testing.T, p string, limit time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(p)
		got <- string(b)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(limit):
		// Unblock the reader so that it does not outlive the test.
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatalf("nothing written to %s in %s", p, limit)
		return ""
	}
}

// TestLateForgetKeepsNewNode: go-fuse drops a forgotten node from its
// table before the FORGET's handler returns, so a LOOKUP of the same name
// meanwhile makes a new node for the same inode number, which the kernel
// then holds; the FORGET may be recorded after the new node. The state
// must still hold the new node: the successor of a kill -9 would not know
// the directory a shell has as its cwd (every request on it ESTALE,
// "unknown node"), and the kernel's lookup count for it would exceed the
// successor's (go-fuse's "lookupCount underflow" panic, with the node's
// lock held: every later lookup under it hangs). Found by a restart storm
// (kill -9, restart, takeover while a loop writes); the forget was then
// recorded at OnForget, after go-fuse had dropped the node.
func TestLateForgetKeepsNewNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: open_by_handle_at(2), drop_caches")
	}
	dir := canonT(t, t.TempDir())
	backing, mnt, ctl := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(dir, "ctl")
	for _, d := range []string{backing, mnt, ctl, filepath.Join(backing, "d")} {
		mkdirT(t, d, 0o755)
	}
	for _, f := range []string{"blocked", "release", "recorded", "ready", "go"} {
		if err := syscall.Mkfifo(filepath.Join(ctl, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var dst syscall.Stat_t
	if err := syscall.Stat(filepath.Join(backing, "d"), &dst); err != nil {
		t.Fatal(err)
	}
	sock := holderT(t, filepath.Join(ctl, "holder.sock"), mnt)
	first := keptServer(t, backing, mnt, sock, fmt.Sprintf("%s=%s:%d", childForgetLateEnv, ctl, dst.Ino))

	if got := shOK(t, "/", "stat -c %F "+shq(mnt+"/d")); got != "directory\n" {
		t.Fatalf("stat d: %q", got)
	}
	// The kernel evicts d: FORGET, whose record the server holds back.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFifoT(t, filepath.Join(ctl, "blocked"), 30*time.Second); got != "blocked\n" {
		t.Fatalf("blocked fifo: %q", got)
	}
	// A shell takes d as its cwd: a new LOOKUP, a new node, recorded.
	sh := exec.Command("sh", "-c", `set -e
cd "$MNT/d"
echo held > "$CTL/ready"
read line < "$CTL/go"
echo x > new
cat new
pwd -P
`)
	sh.Env = append(os.Environ(), "MNT="+mnt, "CTL="+ctl)
	var shOut strings.Builder
	sh.Stdout, sh.Stderr = &shOut, &shOut
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	if got := readFifoT(t, filepath.Join(ctl, "ready"), 30*time.Second); got != "held\n" {
		t.Fatalf("the shell's ready line: %q\n%s", got, shOut.String())
	}
	// Only now the old node's forget is recorded.
	if err := os.WriteFile(filepath.Join(ctl, "release"), []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readFifoT(t, filepath.Join(ctl, "recorded"), 30*time.Second); got != "recorded\n" {
		t.Fatalf("recorded fifo: %q", got)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	keptServer(t, backing, mnt, sock)
	if err := os.WriteFile(filepath.Join(ctl, "go"), []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := sh.Wait(); err != nil {
		t.Fatalf("the shell with its cwd in d failed after the kill: %v\n%s", err, shOut.String())
	}
	if got, want := shOut.String(), "x\n"+mnt+"/d\n"; got != want {
		t.Errorf("the shell's output after the kill: %q, want %q", got, want)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "d/new")); err != nil || string(got) != "x\n" {
		t.Errorf("d/new on disk: %q, %v; want %q", got, err, "x\n")
	}
}

// TestTakeOverRingFailureKeepsNothing: a successor that takes over a
// connection on the ring and cannot register one of its queues (that
// CPU's requests would wait for good: such a connection has no way back
// to /dev/fuse) ends the connection and keeps nothing of it: its Mount
// fails naming the queue, the mount answers ENOTCONN, and no descriptor
// of /dev/fuse or of the ring memory stays open in the successor. go-fuse's
// descriptor of the connection stayed open before.
func TestTakeOverRingFailureKeepsNothing(t *testing.T) {
	backing, mnt, _, sock := ringHolderT(t)
	env := childTransportEnv + "=io-uring"
	first := keptServer(t, backing, mnt, sock, env)
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the first server's handover: %v", err)
	}

	next := exec.Command(os.Args[0], "-test.run=^$")
	next.Dir = "/"
	next.Env = append(os.Environ(), childServeEnv+"="+backing, "WSFS_TEST_CHILD_MNT="+mnt,
		childHolderEnv+"="+sock, env, childFailQueueEnv+"=0")
	next.Stderr = os.Stderr
	out, err := next.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the successor: %v (%q), want exit status 1", err, out)
	}
	want := fmt.Sprintf("error: take over %q: ring: queue 0: registration skipped (test)\nkept: \n", mnt)
	if string(out) != want {
		t.Fatalf("the successor said %q, want %q", out, want)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != unix.ENOTCONN {
		t.Fatalf("statfs of the mount after the failed takeover: %v, want ENOTCONN", err)
	}
}
