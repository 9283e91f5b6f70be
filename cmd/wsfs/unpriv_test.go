package main

// Issue 8: wsfs run by an ordinary user, through fusermount3. The test
// binary stands in for the wsfs binary (TestMain), copied where that user
// can execute it and started with its credentials.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/confine"
)

// cliEnv makes the test binary run the wsfs CLI on its arguments instead of
// the tests.
const cliEnv = "WSFS_TEST_AS_CLI"

func TestMain(m *testing.M) {
	confine.Init() // the helper stage of the jails TestJailSpecHostView starts
	if os.Getenv(cliEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// nobody is the ordinary user the unprivileged tests run as.
const nobody = 65534

// unprivSetup returns a directory everyone can enter, owned by nobody, and
// a copy of the test binary nobody can execute; it skips when this host
// cannot run an unprivileged FUSE server (hack/ci-setup.sh prepares one).
func unprivSetup(t *testing.T) (dir, bin string) {
	t.Helper()
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start children as uid 65534")
	}
	if fi, err := os.Stat("/dev/fuse"); err != nil || fi.Mode().Perm()&0o006 != 0o006 {
		t.Skip("/dev/fuse is not open to every user (run hack/ci-setup.sh)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("fusermount3 not installed (run hack/ci-setup.sh)")
	}
	dir, err := os.MkdirTemp("", "wsfs-unpriv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir, err = filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	for d := dir; d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		if fi.Mode().Perm()&0o011 != 0o011 {
			require.NoError(t, os.Chmod(d, fi.Mode().Perm()|0o011))
		}
	}
	require.NoError(t, os.Chown(dir, nobody, nobody))
	self, err := os.Executable()
	require.NoError(t, err)
	bin = filepath.Join(dir, "wsfs")
	src, err := os.Open(self)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return dir, bin
}

// asNobody returns a command running the wsfs CLI (bin) as uid:gid 65534
// with a plain environment.
func asNobody(ctx context.Context, bin, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{cliEnv + "=1", "HOME=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	return cmd
}

// nobodyRun runs the wsfs CLI as nobody and returns its output and exit code.
func nobodyRun(t *testing.T, bin, dir string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := asNobody(ctx, bin, dir, args...).CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "wsfs %v as nobody: %v", args, err)
		code = ee.ExitCode()
	}
	return string(out), code
}

// nobodySh runs a bash script as nobody (outside any wsfs process).
func nobodySh(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "as nobody: %s\n%s", script, out)
	return string(out)
}

// bgProc is a wsfs verb running in the background.
type bgProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
}

// exitCode waits up to waitLimit for the process to exit and returns its exit
// code (-1 when it is still running).
func (p *bgProc) exitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(waitLimit):
		return -1
	}
}

// background starts a long-running wsfs verb as nobody and returns once it
// printed a line containing ready (on stdout or stderr). Cleanup stops it
// with SIGTERM, waits, and detaches whatever it left mounted under dir.
func background(t *testing.T, bin, dir, ready string, args ...string) *bgProc {
	t.Helper()
	return backgroundCmd(t, asNobody(context.Background(), bin, dir, args...), dir, ready)
}

// backgroundCmd starts cmd (a wsfs verb, in its own process group) and
// returns once it printed a line containing ready, as background does; its
// cleanup is background's.
func backgroundCmd(t *testing.T, cmd *exec.Cmd, dir, ready string) *bgProc {
	t.Helper()
	args := cmd.Args[1:]
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	p := &bgProc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); pw.Close(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(waitLimit):
			t.Errorf("wsfs %v did not stop on SIGTERM", args)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		for _, mp := range fuseMountsUnder(t, dir) {
			t.Errorf("left mounted: %s", mp)
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	lines := make(chan string)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(waitLimit)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("wsfs %v exited before %q:\n%s", args, ready, log.String())
			}
			log.WriteString(l + "\n")
			if strings.Contains(l, ready) {
				go func() { // keep draining
					for range lines {
					}
				}()
				return p
			}
		case <-deadline:
			t.Fatalf("wsfs %v: no %q in %s:\n%s", args, ready, waitLimit, log.String())
		}
	}
}

// fuseMountsUnder lists the FUSE mounts at or below dir.
func fuseMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(f[2], "fuse") && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			out = append(out, f[1])
		}
	}
	return out
}

// mountOptions returns the options column of mountpoint's /proc/mounts line.
func mountOptions(t *testing.T, mountpoint string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[1] == mountpoint {
			return f[3]
		}
	}
	return ""
}

// TestUnprivilegedMount: `wsfs mount` run by uid 65534 mounts through
// fusermount3; that user writes and reads through it, another user (root,
// thanks to --allow-other) reads it, objects stay the server user's, and
// `wsfs unmount` by that user unmounts it; the server then exits 0.
func TestUnprivilegedMount(t *testing.T) {
	dir, bin := unprivSetup(t)
	root, mnt := filepath.Join(dir, "root"), filepath.Join(dir, "mnt")
	nobodySh(t, fmt.Sprintf("mkdir %s %s && echo host > %s/a", root, mnt, root))

	srv := background(t, bin, dir, "mounted", "mount", "--root", root, "--mountpoint", mnt, "--allow-other")
	opts := mountOptions(t, mnt)
	assert.Contains(t, opts, "user_id=65534", "mounted by fusermount3 for uid 65534")
	assert.Contains(t, opts, "allow_other")

	out := nobodySh(t, fmt.Sprintf("umask 022 && cd %s && cat a && echo written > b && cat b && stat -c '%%u:%%g %%a' b", mnt))
	assert.Equal(t, "host\nwritten\n65534:65534 644\n", out)
	b, err := os.ReadFile(filepath.Join(root, "b"))
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(b), "the write reached the backing store")
	// root reads through the mount (allow_other); its file is the server
	// user's (an unprivileged server cannot give it away).
	b, err = os.ReadFile(filepath.Join(mnt, "a"))
	require.NoError(t, err)
	assert.Equal(t, "host\n", string(b))

	out, code := nobodyRun(t, bin, dir, "unmount", mnt)
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "unmounted "+mnt+"\n", out)
	assert.Equal(t, 0, srv.exitCode(), "wsfs mount's exit code after an outside unmount (-1: still running)")
	assert.Empty(t, fuseMountsUnder(t, dir))
}

// TestUnprivilegedDaemon: `wsfs serve` run by uid 65534 hosts three
// sessions; the same user creates them, writes and reads in each, removes
// one, and the daemon unmounts the rest on SIGTERM.
func TestUnprivilegedDaemon(t *testing.T) {
	dir, bin := unprivSetup(t)
	sock, state, base := filepath.Join(dir, "run", "wsfs.sock"), filepath.Join(dir, "state"), filepath.Join(dir, "run", "mnt")
	nobodySh(t, fmt.Sprintf("mkdir -p %s/run %s/p1 %s/p2 %s/p3", dir, dir, dir, dir))

	srv := background(t, bin, dir, "msg=serving", "serve", "--socket", sock, "--state-dir", state, "--mount-base", base)
	ids := []string{"s1", "s2", "s3"}
	for i, id := range ids {
		out, code := nobodyRun(t, bin, dir, "session", "create", id, "--root", filepath.Join(dir, fmt.Sprintf("p%d", i+1)), "--socket", sock)
		require.Equal(t, 0, code, "session create %s: %s", id, out)
	}
	for i, id := range ids {
		mp := filepath.Join(base, id)
		assert.Contains(t, mountOptions(t, mp), "user_id=65534", "session %s mounted through fusermount3", id)
		out := nobodySh(t, fmt.Sprintf("cd %s && echo %s > f && cat f", mp, id))
		assert.Equal(t, id+"\n", out)
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("p%d", i+1), "f"))
		require.NoError(t, err)
		assert.Equal(t, id+"\n", string(b))
	}
	out, code := nobodyRun(t, bin, dir, "session", "rm", "s2", "--socket", sock)
	require.Equal(t, 0, code, "session rm s2: %s", out)
	// Each session and its host view (<mount-base>/@host/<id>).
	assert.Equal(t, []string{filepath.Join(base, "@host/s1"), filepath.Join(base, "s1"), filepath.Join(base, "@host/s3"), filepath.Join(base, "s3")}, fuseMountsUnder(t, dir))

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, srv.exitCode(), "wsfs serve's exit code on SIGTERM (-1: still running)")
	assert.Empty(t, fuseMountsUnder(t, dir), "SIGTERM unmounts every session")
}
