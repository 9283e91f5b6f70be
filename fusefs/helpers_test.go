package fusefs_test

// Shared helpers for the fusefs acceptance tests (issue 3).
//
// Rules these tests follow:
//   - Every mount is made by mountT and unmounted by its t.Cleanup; TestMain
//     fails the run when any mount is left under the test's temp base.
//   - umask is 0 for the whole test binary (the server applies none of its
//     own; the tests want exact modes).
//   - Anything heavy or blocking (git, go build, shells, mmap, lock waiters,
//     races) runs in a child process, started outside the mount (it cd's
//     into the mount itself, after exec): a Go process doing blocking I/O on its
//     own FUSE mount can deadlock (GC stop-the-world vs. a thread stuck in a
//     page fault served by this same process). Simple single-syscall checks
//     run in-process, as go-fuse's posixtest does.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// testBase is the directory every t.TempDir of this binary lives under
// (TestMain points TMPDIR at it).
var testBase string

func TestMain(m *testing.M) {
	if root := os.Getenv(childServeEnv); root != "" {
		childServe(root)
	}
	syscall.Umask(0)
	// Not under /tmp: the host view hides /tmp (but the session's temp
	// area), and the tests' outside directories must be visible there.
	base, err := os.MkdirTemp("/var/tmp", "wsfs-fusefs-test-")
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "TestMain: temp base: %v\n", err)
		os.Exit(2)
	}
	testBase = base
	// t.TempDir uses os.TempDir, which reads $TMPDIR: every test dir (and
	// every child's temp file) lands under base, so the leftover check
	// below sees all of them.
	os.Setenv("TMPDIR", base)

	code := m.Run()

	if left := mountsUnder(base); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "\n!!! FAIL: %d mount(s) left behind under %s (a leftover mount is a bug):\n", len(left), base)
		for _, mp := range left {
			fmt.Fprintf(os.Stderr, "!!!   %s\n", mp)
		}
		// Detach them (deepest first) so the host is usable again, then fail.
		sort.Sort(sort.Reverse(sort.StringSlice(left)))
		detached := true
		for _, mp := range left {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
				fmt.Fprintf(os.Stderr, "!!!   umount -l %s: %v\n", mp, err)
				detached = false
			}
		}
		if detached {
			os.RemoveAll(base)
		}
		code = 1
	} else {
		os.RemoveAll(base)
	}
	os.Exit(code)
}

// mountsUnder returns the mountpoints in /proc/mounts that are dir or below it.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return []string{"(cannot read /proc/mounts: " + err.Error() + ")"}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		mp := unescapeMount(f[1])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isMounted reports whether path is a mountpoint in /proc/mounts.
func isMounted(path string) bool {
	for _, mp := range mountsUnder(path) {
		if mp == path {
			return true
		}
	}
	return false
}

// mountSetup collects what mountT's options change.
type mountSetup struct {
	spec     policy.Spec
	cfg      fusefs.Config
	populate []func(t *testing.T, backing string)
	noHost   bool     // no host view (escaping links show their key)
	hidden   []string // HostViewConfig.Hidden
}

// withHostHidden adds places the host view hides.
func withHostHidden(paths ...string) mountOpt {
	return func(s *mountSetup) { s.hidden = append(s.hidden, paths...) }
}

// withoutHostView mounts the session without a host view.
func withoutHostView() mountOpt { return func(s *mountSetup) { s.noHost = true } }

// hostViewOf returns the host view path mountT uses for a mountpoint.
func hostViewOf(mnt string) string { return mnt + "@host" }

type mountOpt func(*mountSetup)

// withMode sets the policy mode.
func withMode(m policy.Mode) mountOpt { return func(s *mountSetup) { s.spec.Mode = m } }

// withRoot adds an additional root (path must be canonical).
func withRoot(path string, a policy.Access) mountOpt {
	return func(s *mountSetup) {
		s.spec.Additional = append(s.spec.Additional, policy.Root{Path: path, Access: a})
	}
}

// withSymlinks sets the symlink mode.
func withSymlinks(m fusefs.SymlinkMode) mountOpt { return func(s *mountSetup) { s.cfg.Symlinks = m } }

// withPopulate runs f on the backing directory before the mount.
func withPopulate(f func(t *testing.T, backing string)) mountOpt {
	return func(s *mountSetup) { s.populate = append(s.populate, f) }
}

// canonT returns the canonical path of p (the tests' own computation, not
// identity's, so a bug there does not hide here).
func canonT(t testing.TB, p string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("EvalSymlinks(%s): %v", p, err)
	}
	return c
}

// tempAreaT is a dedicated, empty "platform temp area" for the policy, so the
// real temp dir (which holds every test dir, outside dirs included) is not
// writable by default: Spec.Temp nil would mean DefaultTemp().
func tempAreaT(t testing.TB) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "temp-area")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// specFor returns the default test spec for a primary root: workspace-write,
// a private temp area, default protected subpaths.
func specFor(t testing.TB, primary string) policy.Spec {
	return policy.Spec{
		Mode:    policy.ModeWorkspaceWrite,
		Primary: primary,
		Temp:    []string{tempAreaT(t)},
	}
}

// compileT compiles spec or fails the test.
func compileT(t testing.TB, spec policy.Spec) *policy.Policy {
	t.Helper()
	p, err := policy.Compile(spec)
	if err != nil {
		t.Fatalf("policy.Compile(%+v): %v", spec, err)
	}
	return p
}

// mountT makes <tmp>/backing and <tmp>/mnt under a fresh t.TempDir, runs the
// populate options on backing, mounts backing at mnt with a workspace-write
// policy (unless options say otherwise) and registers the unmount.
func mountT(t *testing.T, opts ...mountOpt) (backing, mnt string, srv *fusefs.Server) {
	t.Helper()
	dir := canonT(t, t.TempDir())
	backing = filepath.Join(dir, "backing")
	mnt = filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &mountSetup{spec: specFor(t, backing)}
	s.cfg = fusefs.Config{Root: backing, Mountpoint: mnt, Session: t.Name(), Logger: testLogger(),
		NoWatch: os.Getenv("WSFS_TEST_NOWATCH") != ""} // diagnostic knob: rule the watcher in or out
	for _, o := range opts {
		o(s)
	}
	for _, f := range s.populate {
		f(t, backing)
	}
	s.cfg.Policy = compileT(t, s.spec)
	if !s.noHost {
		hv := hostViewOf(mnt)
		s.cfg.HostView = hv
		mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: s.cfg.Policy, Session: t.Name(),
			// No watcher: inotify instances are a per-user limit (128)
			// shared by every test binary on the machine, and the tests
			// change nothing outside the session behind the view's back
			// that they then read through it within its 1 s timeouts.
			Logger: s.cfg.Logger, NoWatch: true, Links: map[string]string{backing: mnt, mnt: mnt}, Hidden: s.hidden})
	}
	return backing, mnt, mountCfgT(t, s.cfg)
}

// mountHostViewT makes and mounts a host view and registers its unmount
// and removal.
func mountHostViewT(t *testing.T, cfg fusefs.HostViewConfig) *fusefs.Server {
	t.Helper()
	if err := os.Mkdir(cfg.Mountpoint, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := fusefs.MountHostView(cfg)
	if err != nil {
		t.Fatalf("fusefs.MountHostView(%s): %v", cfg.Mountpoint, err)
	}
	t.Cleanup(func() { unmountT(t, srv, cfg.Mountpoint) })
	checkTransportT(t, srv)
	disablePollT(t, srv)
	return srv
}

// testLogger discards the server's denial log unless WSFS_TEST_LOG is set
// (every denial is logged; the policy tests make hundreds on purpose).
func testLogger() *slog.Logger {
	if os.Getenv("WSFS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// mountCfgT mounts cfg and registers the unmount (force when busy, which is
// then reported as a test failure: something the test started still holds it).
func mountCfgT(t *testing.T, cfg fusefs.Config) *fusefs.Server {
	t.Helper()
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		t.Fatalf("fusefs.Mount(root=%s, mnt=%s): %v", cfg.Root, cfg.Mountpoint, err)
	}
	if !isMounted(cfg.Mountpoint) {
		t.Errorf("Mount returned nil error but %s is not in /proc/mounts", cfg.Mountpoint)
	}
	t.Cleanup(func() { unmountT(t, srv, cfg.Mountpoint) })
	checkTransportT(t, srv)
	disablePollT(t, srv)
	return srv
}

// checkTransportT fails a test whose mount is not on the transport
// transport.TestModeEnv asks for (io-uring: the suite runs over the ring;
// dev: over /dev/fuse), so a suite run meant for one transport cannot
// pass on the other.
func checkTransportT(t *testing.T, srv *fusefs.Server) {
	t.Helper()
	want := map[string]string{string(transport.IOURing): transport.NameURing, string(transport.Dev): transport.NameDev}[os.Getenv(transport.TestModeEnv)]
	if want != "" && srv.Transport() != want {
		t.Fatalf("mount %s is served over %s, %s=%s asks for %s", srv.Mountpoint(), srv.Transport(), transport.TestModeEnv, os.Getenv(transport.TestModeEnv), want)
	}
}

// disablePollT readies srv for the test's own opens through it (the test
// process is also the server: see Server.DisablePoll).
func disablePollT(t *testing.T, srv *fusefs.Server) {
	t.Helper()
	if err := srv.DisablePoll(); err != nil {
		t.Fatalf("DisablePoll: %v", err)
	}
}

func unmountT(t *testing.T, srv *fusefs.Server, mnt string) {
	var err error
	// A child that just exited may still hold it for a moment (a process
	// it left behind, the kernel's deferred release of its files): polled,
	// with a bound generous enough for a loaded CI machine.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if err = srv.Unmount(false); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("Unmount(%s, force=false): %v — forcing", mnt, err)
		if err := srv.Unmount(true); err != nil {
			t.Errorf("Unmount(%s, force=true): %v", mnt, err)
		}
	}
	if isMounted(mnt) {
		t.Errorf("after Unmount, %s is still in /proc/mounts; detaching", mnt)
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
}

// childTimeout bounds every child process.
const childTimeout = 150 * time.Second

// sh runs `bash -c script` in dir as a child process (its own process group,
// killed on timeout) and returns its stdout and exit code. stderr is logged
// when the exit code is not 0.
func sh(t testing.TB, dir, script string) (stdout string, exit int) {
	t.Helper()
	out, errOut, code := shEnv(t, dir, nil, script)
	if code != 0 && errOut != "" {
		t.Logf("sh (exit %d) in %s: %s\nstderr: %s", code, dir, abbrev(script, 300), abbrev(errOut, 2000))
	}
	return out, code
}

// shOK is sh that fails the test on a non-zero exit.
func shOK(t testing.TB, dir, script string) string {
	t.Helper()
	out, errOut, code := shEnv(t, dir, nil, script)
	if code != 0 {
		t.Fatalf("sh in %s exited %d\nscript: %s\nstdout: %s\nstderr: %s", dir, code, abbrev(script, 2000), abbrev(out, 2000), abbrev(errOut, 4000))
	}
	return out
}

// shEnv is sh with extra environment and stderr returned.
func shEnv(t testing.TB, dir string, env []string, script string) (stdout, stderr string, exit int) {
	t.Helper()
	return shAs(t, nil, dir, env, script)
}

// shAs is shEnv run with the credentials cred (nil: this process's).
func shAs(t testing.TB, cred *syscall.Credential, dir string, env []string, script string) (stdout, stderr string, exit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	// Never cmd.Dir = dir: the child would chdir into the mount between
	// fork and exec, while this (serving) process's forking thread sits in
	// vfork outside the scheduler's view; a GC stop-the-world then waits for
	// it forever and the FUSE request is never answered (seen: ACCESS from
	// chdir hanging the whole binary). bash does the cd after exec instead.
	cmd := exec.CommandContext(ctx, "bash", "-c", "cd "+shq(dir)+" || exit 97\n"+script)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ctx.Err() != nil {
				t.Errorf("child timed out after %v in %s: %s", childTimeout, dir, abbrev(script, 300))
			}
		} else {
			t.Fatalf("starting bash in %s: %v", dir, err)
		}
	}
	return o.String(), e.String(), code
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d more bytes)", len(s)-n)
}

// shq quotes s for bash.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// errnoOf returns the syscall.Errno inside err (0 for nil, -1 if none).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.Errno(^uintptr(0))
}

// errName prints an errno the way the tests report it: "EROFS (read-only file system)".
func errName(e syscall.Errno) string {
	if e == 0 {
		return "success (errno 0)"
	}
	if e == syscall.Errno(^uintptr(0)) {
		return "non-errno error"
	}
	for _, c := range errnoNames {
		if c.e == e {
			return c.n + " (" + e.Error() + ")"
		}
	}
	return fmt.Sprintf("errno %d (%s)", int(e), e.Error())
}

var errnoNames = []struct {
	e syscall.Errno
	n string
}{
	{syscall.EROFS, "EROFS"}, {syscall.EACCES, "EACCES"}, {syscall.EPERM, "EPERM"},
	{syscall.EXDEV, "EXDEV"}, {syscall.ENOENT, "ENOENT"}, {syscall.EEXIST, "EEXIST"},
	{syscall.EINVAL, "EINVAL"}, {syscall.ENOTDIR, "ENOTDIR"}, {syscall.EISDIR, "EISDIR"},
	{syscall.EOPNOTSUPP, "EOPNOTSUPP"}, {syscall.ENOSYS, "ENOSYS"}, {syscall.ELOOP, "ELOOP"},
	{syscall.ENAMETOOLONG, "ENAMETOOLONG"}, {syscall.EBADF, "EBADF"}, {syscall.EIO, "EIO"},
	{syscall.ENODATA, "ENODATA"}, {syscall.EAGAIN, "EAGAIN"}, {syscall.ENOTEMPTY, "ENOTEMPTY"},
	{syscall.EBUSY, "EBUSY"}, {syscall.ENOTCONN, "ENOTCONN"}, {syscall.ESTALE, "ESTALE"},
}

// wantErrno checks that err carries exactly want.
func wantErrno(t testing.TB, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: want %s, got %s (err=%v)", what, errName(want), errName(errnoOf(err)), err)
	}
}

// wantOK checks that err is nil.
func wantOK(t testing.TB, what string, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: want success, got %s (err=%v)", what, errName(errnoOf(err)), err)
		return false
	}
	return true
}

// writeFileT writes a file (on the backing tree or a native dir) or fails.
func writeFileT(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mkdirT(t testing.TB, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, mode); err != nil {
		t.Fatal(err)
	}
}

func symlinkT(t testing.TB, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// lstatT returns the raw lstat of path or fails.
func lstatT(t testing.TB, path string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatalf("lstat %s: %v", path, err)
	}
	return st
}

// treeSnapshot records names, types, modes, sizes, link targets and file
// contents under dir (dir itself included as "."), for "unchanged" checks.
func treeSnapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%#o nlink=%d size=%d", st.Mode, st.Nlink, st.Size)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" content=%q", abbrev(string(b), 200))
		case syscall.S_IFLNK:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		}
		snap[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return snap
}

// diffSnapshots reports every difference between two snapshots.
func diffSnapshots(before, after map[string]string) []string {
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: removed (was %s)", k, v))
		} else if w != v {
			diffs = append(diffs, fmt.Sprintf("%s: changed %s => %s", k, v, w))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: appeared (%s)", k, v))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// wantUnchanged fails with every difference between before and dir now.
func wantUnchanged(t testing.TB, what, dir string, before map[string]string) {
	t.Helper()
	if d := diffSnapshots(before, treeSnapshot(t, dir)); len(d) > 0 {
		n := len(d)
		if n > 30 {
			d = append(d[:30], fmt.Sprintf("… and %d more", n-30))
		}
		t.Errorf("%s: %s changed (%d differences):\n  %s", what, dir, n, strings.Join(d, "\n  "))
	}
}

// names returns the sorted entry names of dir (fails on error).
func names(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer f.Close()
	n, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	sort.Strings(n)
	return n
}

// namesErr is names that returns the error as a one-element list.
func namesErr(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return []string{"<" + errName(errnoOf(err)) + ">"}
	}
	defer f.Close()
	n, err := f.Readdirnames(-1)
	if err != nil {
		return []string{"<readdir: " + errName(errnoOf(err)) + ">"}
	}
	sort.Strings(n)
	return n
}

// need skips the test when a host tool is missing.
func need(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed on this host: %v", tool, err)
		}
	}
}

// lines splits trimmed output into lines ("" gives none).
func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// shellProc is a bash child that runs commands one at a time, so a test can
// change things on the host between two steps of one running process.
type shellProc struct {
	t     *testing.T
	stdin io.WriteCloser
	lines chan string
}

// startShell starts bash in / (never chdir into a mount between fork and
// exec in the process that serves it) and stops it in Cleanup.
func startShell(t *testing.T) *shellProc {
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &shellProc{t: t, stdin: stdin, lines: make(chan string)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rd := bufio.NewReader(stdout)
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				close(s.lines)
				cmd.Wait()
				return
			}
			s.lines <- l
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(time.Minute):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return s
}

// run sends one command line and returns what it printed on stdout.
func (s *shellProc) run(c string) string {
	s.t.Helper()
	const end = "__wsfs_end__"
	fmt.Fprintf(s.stdin, "%s\necho %s\n", c, end)
	var out strings.Builder
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("bash exited while running %q", c)
			}
			if l == end+"\n" {
				return out.String()
			}
			out.WriteString(l)
		case <-time.After(time.Minute):
			s.t.Fatalf("bash did not answer %q", c)
		}
	}
}
