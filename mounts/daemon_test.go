package mounts_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/client"
	"github.com/wsfs/wsfs/transport"
)

// wsfsBin is the wsfs binary TestMain builds; the tests run it as the daemon
// and as the CLI, in child processes.
var wsfsBin string

// skipReason is why the daemon tests cannot run here ("" when they can).
var skipReason string

// helperEnv names the helper action a child copy of the test binary runs
// instead of the tests (see runHelper).
const helperEnv = "WSFS_MOUNTS_TEST_HELPER"

func TestMain(m *testing.M) {
	if action := os.Getenv(helperEnv); action != "" {
		os.Exit(runHelper(action, os.Args[len(os.Args)-1]))
	}
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root (mount(2) for FUSE)"
	default:
		if _, err := os.Stat("/dev/fuse"); err != nil {
			skipReason = "needs /dev/fuse: " + err.Error()
		}
	}
	flag.Parse()
	var dir string
	if skipReason == "" && !fuzzing() {
		var err error
		dir, err = os.MkdirTemp("", "wsfs-mounts-test-")
		if err == nil {
			// Readable by the unprivileged uid of the peer-credential test.
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mounts test: temp dir:", err)
			os.Exit(2)
		}
		wsfsBin = filepath.Join(dir, "wsfs")
		out, err := exec.Command("go", "build", "-o", wsfsBin, "github.com/wsfs/wsfs/cmd/wsfs").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "mounts test: go build ./cmd/wsfs: %v\n%s", err, out)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// fuzzing reports whether this process fuzzes (go test -fuzz, a
// coordinator or a worker): the fuzz targets need no wsfs binary, and each
// worker would build it again.
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

// runHelper runs a helper action in a child process (the confined process of
// the --confine test): "write" writes "x\n" to path and prints "ok" or the
// errno's name; "hold" prints "ready" and waits for stdin to close.
func runHelper(action, path string) int {
	switch action {
	case "write":
		printResult(os.WriteFile(path, []byte("x\n"), 0o644))
		return 0
	}
	if action == "connect" || action == "signal" || action == "fd3" {
		// Report, as an errno name or "ok", whether a confined process can
		// reach the daemon's socket, signal another process, or write to
		// a descriptor its launcher opened.
		var err error
		switch action {
		case "connect":
			var c net.Conn
			if c, err = net.Dial("unix", path); err == nil {
				c.Close()
			}
		case "signal":
			var pid int
			if pid, err = strconv.Atoi(path); err == nil {
				err = syscall.Kill(pid, 0)
			}
		case "fd3":
			_, err = syscall.Write(3, []byte("leak\n"))
		}
		printResult(err)
		return 0
	}
	if action == "jail" {
		return jailHelper(path)
	}
	if action == "probe" {
		return probeHelper(path)
	}
	if action == "cwdprobe" {
		return cwdProbe()
	}
	if action == "jailreq" {
		// Send POST /v1/sessions/s1/jails to the socket at path and exit
		// without waiting for the answer.
		c, err := net.Dial("unix", path)
		if err == nil {
			_, err = io.WriteString(c, "POST /v1/sessions/s1/jails HTTP/1.0\r\nHost: wsfs\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
		}
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("sent")
		return 0
	}
	if action == "createhold" {
		// Create path through the mount, write "z" and hold it open
		// until stdin closes.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err == nil {
			if _, err = f.WriteString("z"); err == nil {
				err = f.Sync()
			}
		}
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	if action == "lockhold" || action == "locktry" {
		return lockHelper(action, path)
	}
	if action == "hold" {
		// Hold the working directory until stdin closes.
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper action", action)
	return 2
}

// printResult prints "ok", the errno's name, or the error: a helper's answer.
func printResult(err error) {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println("ok")
	case errors.As(err, &errno):
		fmt.Println(errnoName(errno))
	default:
		fmt.Println(err)
	}
}

// errnoName names the errnos the tests expect.
func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EROFS:
		return "EROFS"
	case syscall.EPERM:
		return "EPERM"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EBADF:
		return "EBADF"
	case syscall.ESRCH:
		return "ESRCH"
	}
	return e.Error()
}

// daemon is a `wsfs serve` child process.
type daemon struct {
	t         testing.TB
	dir       string // holds the socket, state and mount base
	socket    string
	stateDir  string
	mountBase string
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited
	c         *client.Client

	mu  sync.Mutex
	log bytes.Buffer
	// grew is closed and replaced whenever a line is added to log
	// (waitLog).
	grew chan struct{}
}

// newDaemonDir returns a fresh directory for a daemon's socket, state and
// mounts.
func newDaemonDir(t testing.TB) string {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	return t.TempDir()
}

// startDaemon starts `wsfs serve` on dir and returns once it logs that it
// serves. Cleanup stops it with SIGTERM (which unmounts every session) and
// clears any mount left under dir.
func startDaemon(t testing.TB, dir string) *daemon {
	t.Helper()
	return startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"))
}

// startDaemonAt is startDaemon with the state directory and mount base
// given (both under dir), and extra flags for wsfs serve.
func startDaemonAt(t testing.TB, dir, stateDir, mountBase string, extra ...string) *daemon {
	t.Helper()
	return startDaemonCmd(t, dir, stateDir, mountBase, nil, extra...)
}

// startDaemonWith is startDaemon run through the command prefix wrap (such
// as prlimit and its options, which execs wsfs serve as itself).
func startDaemonWith(t testing.TB, dir string, wrap []string, extra ...string) *daemon {
	t.Helper()
	return startDaemonCmd(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"), wrap, extra...)
}

func startDaemonCmd(t testing.TB, dir, stateDir, mountBase string, wrap []string, extra ...string) *daemon {
	t.Helper()
	return startDaemonBin(t, wsfsBin, dir, stateDir, mountBase, wrap, extra...)
}

// startDaemonBin is startDaemonCmd with the wsfs binary bin (another build).
func startDaemonBin(t testing.TB, bin, dir, stateDir, mountBase string, wrap []string, extra ...string) *daemon {
	t.Helper()
	d := &daemon{
		t: t, dir: dir,
		socket:    filepath.Join(dir, "wsfs.sock"),
		stateDir:  stateDir,
		mountBase: mountBase,
		done:      make(chan struct{}),
	}
	argv := append(append(append(wrap[:len(wrap):len(wrap)], bin), "serve", "--socket", d.socket, "--state-dir", d.stateDir, "--mount-base", d.mountBase), extra...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			if d.grew != nil {
				close(d.grew)
			}
			d.grew = make(chan struct{})
			d.mu.Unlock()
			if !signalled && strings.Contains(line, "msg=serving") {
				signalled = true
				ready <- true
			}
		}
		if !signalled {
			ready <- false
		}
		d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.stop(); endHolder(d.stateDir); clearMounts(t, dir) })
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("wsfs serve exited before serving:\n%s", d.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("wsfs serve: not serving after 60s:\n%s", d.logText())
	}
	d.c = client.New(d.socket)
	t.Cleanup(d.c.Close)
	return d
}

// waitLog waits until the daemon's stderr holds substr n times (its lines
// reach the test through a pipe, after the daemon acts on them), at most a
// minute, and reports whether it does.
func (d *daemon) waitLog(substr string, n int) bool {
	deadline := time.After(time.Minute)
	for {
		d.mu.Lock()
		got := strings.Count(d.log.String(), substr)
		if d.grew == nil {
			d.grew = make(chan struct{})
		}
		grew := d.grew
		d.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-grew:
		case <-d.done:
			return strings.Count(d.logText(), substr) >= n
		case <-deadline:
			return false
		}
	}
}

// logText returns the daemon's stderr so far.
func (d *daemon) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// stop sends SIGINT, the full stop (every session unmounted, the holder
// ended), and waits for the exit (a no-op when it has exited).
func (d *daemon) stop() { d.signal(syscall.SIGINT) }

// detach sends SIGTERM (the daemon stops, its connections kept for the
// next one) and waits for the exit.
func (d *daemon) detach() { d.signal(syscall.SIGTERM) }

func (d *daemon) signal(sig syscall.Signal) {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("wsfs serve: still running 60s after %v; killed:\n%s", sig, d.logText())
	}
}

// endHolder tells the holder of stateDir, if one runs, to exit: the
// connections it alone kept (a daemon killed and not started again) end.
func endHolder(stateDir string) {
	h := &transport.Holder{Socket: filepath.Join(stateDir, "holder.sock")}
	h.Exit()
	h.Close()
}

// kill sends SIGKILL. It does not wait: a daemon killed while one of its
// threads waits on its own mount can only finish once the next daemon has
// aborted that mount's connection (see waitExit).
func (d *daemon) kill() {
	d.cmd.Process.Kill()
}

// waitExit waits for the process to exit, failing after 60s.
func (d *daemon) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("killed wsfs serve (pid %d) has not exited after 60s:\n%s", d.cmd.Process.Pid, d.logText())
	}
}

// fuseMountsUnder returns the FUSE and overlay (a layer's) mount points at
// or below dir.
func fuseMountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || !strings.HasPrefix(f[sep+1], "fuse") && f[sep+1] != "overlay" {
			continue
		}
		mp := strings.ReplaceAll(f[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// clearMounts lazily unmounts whatever a failed test left mounted under
// dir, and reports it: a test that leaves a mount is a bug.
func clearMounts(t testing.TB, dir string) {
	for _, mp := range fuseMountsUnder(t, dir) {
		t.Errorf("mount left behind at %s; detaching", mp)
		fusefs.Unmount(mp, true)
	}
}

// result is a finished child process.
type result struct {
	stdout, stderr string
	code           int
}

// run runs wsfs with args (and the daemon's --socket after the verb path
// when withSocket) and returns its output and exit code.
func run(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// wsfs runs the wsfs CLI against d's socket.
func (d *daemon) wsfs(t testing.TB, args ...string) result {
	t.Helper()
	cmd := exec.Command(wsfsBin, args...)
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	return run(t, cmd)
}

// exec runs `wsfs exec --session id [extra...] -- argv...`.
func (d *daemon) exec(t testing.TB, id string, extra []string, argv ...string) result {
	t.Helper()
	args := append([]string{"exec", "--session", id}, extra...)
	args = append(append(args, "--"), argv...)
	return d.wsfs(t, args...)
}

// rawRequest sends an HTTP request on d's socket and returns the status and
// body.
func (d *daemon) rawRequest(t *testing.T, method, path string, body io.Reader) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", d.socket)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://wsfs"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mkTree makes dir and files under base: names ending in "/" are
// directories, "a -> b" is a symlink a with target b, others files whose
// content is their own name.
func mkTree(t testing.TB, base string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		if name, target, ok := strings.Cut(e, " -> "); ok {
			p := filepath.Join(base, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(base, e)
		if strings.HasSuffix(e, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(e), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// canon returns identity.Canonical(p) or fails.
func canon(t *testing.T, p string) string {
	t.Helper()
	c, err := identity.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantCode asserts err is a *mounts.Error with code.
func wantCode(t *testing.T, what string, err error, code mounts.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want code %s", what, code)
	}
	var me *mounts.Error
	if !errors.As(err, &me) || me.Code != code {
		t.Fatalf("%s: error %v (code %q), want code %s", what, err, mounts.CodeOf(err), code)
	}
}

// readFile returns the content of p or fails.
func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// entries returns the sorted names in dir (none when dir is missing).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// commandf returns `bash -c SCRIPT`, the script formatted with a.
func commandf(format string, a ...any) *exec.Cmd {
	return exec.Command("bash", "-c", fmt.Sprintf(format, a...))
}
