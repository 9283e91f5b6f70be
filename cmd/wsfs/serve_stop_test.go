package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/transport"
)

// asRoot returns a command running the wsfs CLI (this test binary, TestMain)
// with args, in its own process group.
func asRoot(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// TestServeStopRemovesMountBase: the full stop of `wsfs serve` (SIGINT;
// SIGTERM when connections are not kept) unmounts its session and removes
// the default mount base (<socket's directory>/mnt), and the holder ends;
// the state directory and the session's record stay.
func TestServeStopRemovesMountBase(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon keeps its connections in a holder")
	}
	for _, tc := range []struct {
		name  string
		sig   syscall.Signal
		extra []string
	}{
		{"SIGINT, connections kept", syscall.SIGINT, nil},
		{"SIGTERM, connections not kept", syscall.SIGTERM, []string{"--keep-connections=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tree(t, "proj/a")
			sock, state, base := filepath.Join(dir, "run", "wsfs.sock"), filepath.Join(dir, "state"), filepath.Join(dir, "run", "mnt")
			srv := backgroundCmd(t, asRoot(t, append([]string{"serve", "--socket", sock, "--state-dir", state}, tc.extra...)...), dir, "msg=serving")
			holder := &transport.Holder{Socket: filepath.Join(state, "holder.sock")}
			if pid, err := holder.Ping(); err == nil {
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // (already gone when the test passes)
			}
			out, errOut, code := cli(t, "session", "create", "s1", "--root", filepath.Join(dir, "proj"), "--socket", sock)
			require.Equal(t, 0, code, "session create: %s%s", out, errOut)
			assert.Equal(t, []string{filepath.Join(base, "@host/s1"), filepath.Join(base, "s1")}, fuseMountsUnder(t, dir))

			require.NoError(t, srv.cmd.Process.Signal(tc.sig))
			assert.Equal(t, 0, srv.exitCode(), "wsfs serve's exit code (-1: still running)")
			assert.Empty(t, fuseMountsUnder(t, dir), "left mounted")
			_, err := os.Lstat(base)
			assert.True(t, os.IsNotExist(err), "mount base %s after the stop: %v", base, err)
			_, err = os.Lstat(sock)
			assert.True(t, os.IsNotExist(err), "socket %s after the stop: %v", sock, err)
			_, err = os.Stat(filepath.Join(state, "sessions", "s1.json"))
			assert.NoError(t, err, "the session's record stays")
			// The holder is told to end at the full stop and exits on its
			// own after the daemon: wait for that, bounded.
			deadline := time.Now().Add(10 * time.Second)
			for _, err = holder.Ping(); err == nil && time.Now().Before(deadline); _, err = holder.Ping() {
				time.Sleep(10 * time.Millisecond)
			}
			assert.Error(t, err, "the holder still answers 10 s after the full stop")
		})
	}
}

// TestServeRefusesRelativePaths: `wsfs serve` refuses a relative --socket,
// --state-dir or --mount-base (or a relative $WSFS_SOCKET as --socket's
// default) with exit code 2 and one line naming the flag and the rule,
// before it makes anything in the current directory.
func TestServeRefusesRelativePaths(t *testing.T) {
	abs := t.TempDir()
	for _, tc := range []struct {
		name, env, want string
		args            []string
	}{
		{"socket", "", `wsfs: --socket: "x.sock" is relative; give an absolute path`,
			[]string{"--socket", "x.sock", "--state-dir", filepath.Join(abs, "st")}},
		{"state-dir", "", `wsfs: --state-dir: "st" is relative; give an absolute path`,
			[]string{"--socket", filepath.Join(abs, "s.sock"), "--state-dir", "st"}},
		{"mount-base", "", `wsfs: --mount-base: "mnt" is relative; give an absolute path`,
			[]string{"--socket", filepath.Join(abs, "s.sock"), "--state-dir", filepath.Join(abs, "st"), "--mount-base", "mnt"}},
		{"$WSFS_SOCKET", "run/wsfs.sock", `wsfs: --socket: its default $WSFS_SOCKET "run/wsfs.sock" is relative; give an absolute path`,
			[]string{"--state-dir", filepath.Join(abs, "st")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cwd := t.TempDir()
			t.Chdir(cwd)
			if tc.env != "" {
				t.Setenv("WSFS_SOCKET", tc.env)
			}
			out, errOut, code := cli(t, append([]string{"serve", "--keep-connections=false"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Equal(t, "", out)
			assert.Equal(t, tc.want+"\n", errOut)
			ents, err := os.ReadDir(cwd)
			require.NoError(t, err)
			assert.Empty(t, ents, "made in the current directory")
			ents, err = os.ReadDir(abs)
			require.NoError(t, err)
			assert.Empty(t, ents, "made beside the absolute flags")
		})
	}
}

// TestHolderArgv: the holder `wsfs serve` starts runs this very binary
// (/proc/self/exe) but shows in ps as its real path: argv is
// [os.Executable(), "holder", "--socket", <state>/holder.sock].
func TestHolderArgv(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon keeps its connections in a holder")
	}
	dir := tree(t)
	sock, state := filepath.Join(dir, "run", "wsfs.sock"), filepath.Join(dir, "state")
	srv := backgroundCmd(t, asRoot(t, "serve", "--socket", sock, "--state-dir", state), dir, "msg=serving")
	holder := &transport.Holder{Socket: filepath.Join(state, "holder.sock")}
	pid, err := holder.Ping()
	require.NoError(t, err, "the holder answers")
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // (gone after the SIGINT below)

	self, err := os.Executable()
	require.NoError(t, err)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	assert.Equal(t, []string{self, "holder", "--socket", holder.Socket}, strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"))
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	require.NoError(t, err)
	assert.Equal(t, self, exe, "the holder runs this binary")

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 0, srv.exitCode())
	_, err = holder.Ping()
	assert.Error(t, err, "the holder still answers after the full stop")
}
