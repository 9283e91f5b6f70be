package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/confine"
	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// TestJailSpec: the jail of a session without a host view: its mount at
// the physical root, a none root and the daemon's places and other
// sessions hidden (but one inside this session's root, which its policy
// decides), a read-write root (main's .git, of which the session root is a
// linked worktree) bound directly with what the policy protects in it (the
// hooks and config reached through the gitdir pointer) read-only, TMPDIR
// and --allow-write writable.
func TestJailSpec(t *testing.T) {
	// proj is a linked worktree of main: its .git names main's gitdir.
	base := tree(t, "proj/inner/", "main/.git/hooks/", "main/.git/config", "main/.git/worktrees/p/", "secret/", "other/", "state/tmp/s1/", "mnt/s1/", "cache/")
	proj, mainGit := filepath.Join(base, "proj"), filepath.Join(base, "main/.git")
	require.NoError(t, os.WriteFile(filepath.Join(proj, ".git"), []byte("gitdir: "+mainGit+"/worktrees/p\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mainGit, "worktrees/p/commondir"), []byte("../..\n"), 0o644))
	s := api.Session{ID: "s1", Root: proj, Mountpoint: filepath.Join(base, "mnt/s1"), TmpDir: filepath.Join(base, "state/tmp/s1"),
		Policy: api.Policy{Primary: proj, Temp: []string{filepath.Join(base, "state/tmp/s1")}, Additional: []api.Root{
			{Path: mainGit, Access: api.AccessReadWrite},
			{Path: filepath.Join(base, "secret"), Access: api.AccessNone},
		}}}
	others := []api.Session{s,
		{ID: "s2", Root: filepath.Join(base, "other"), Mountpoint: filepath.Join(base, "mnt/s2"), TmpDir: filepath.Join(base, "state/tmp/s2")},
		{ID: "s3", Root: filepath.Join(proj, "inner"), Mountpoint: filepath.Join(base, "mnt/s3"), TmpDir: filepath.Join(base, "state/tmp/s3")},
	}
	h := api.Health{StateDir: filepath.Join(base, "state"), MountBase: filepath.Join(base, "mnt")}
	// Without its host view a root with access is refused, never bound
	// directly from the backing store (no policy there).
	_, err := jailSpec(s, api.WorkDir{}, others, h, filepath.Join(base, "run"), nil)
	assert.EqualError(t, err, "additional root "+mainGit+": the session's host view "+filepath.Join(base, "mnt/@host/s1")+" is not mounted; the jail shows a root only through its view")
	s.Policy.Additional = s.Policy.Additional[1:]
	spec, err := jailSpec(s, api.WorkDir{}, others, h, filepath.Join(base, "run"), []string{filepath.Join(base, "cache")})
	require.NoError(t, err)
	assert.Equal(t, []confine.View{{Path: proj, Source: s.Mountpoint}}, spec.Views)
	assert.Equal(t, []string{s.TmpDir, filepath.Join(base, "cache")}, spec.Writable)
	assert.Equal(t, []string{proj}, spec.Backing)
	assert.Empty(t, spec.ReadOnly)
	// A read-only session's temp directory is bound read-only, as its
	// policy says (temp:read-only).
	ro := s
	ro.Policy.Mode = api.ModeReadOnly
	rospec, err := jailSpec(ro, api.WorkDir{}, others, h, filepath.Join(base, "run"), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{s.TmpDir}, rospec.ReadOnly)
	assert.ElementsMatch(t, []string{filepath.Join(base, "secret"), h.StateDir, h.MountBase, filepath.Join(base, "run"),
		filepath.Join(base, "other"), filepath.Join(base, "mnt/s2"), filepath.Join(base, "state/tmp/s2"),
		filepath.Join(base, "mnt/s3"), filepath.Join(base, "state/tmp/s3")}, spec.Hidden,
		"s3's root lies in this session's view: its policy decides there")
}

// TestJailSpecHostView: with a host view mounted at <mount-base>/@host/<id>
// the jail keeps it visible at its own path (escaping links point there)
// and shows every additional root with access through it, at the root's
// own path; none roots stay hidden.
func TestJailSpecHostView(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a host view: run as root")
	}
	base := tree(t, "proj/", "ro/", "rw/", "secret/", "out/", "state/tmp/s1/", "mnt/s1/", "mnt/@host/s1/")
	proj := filepath.Join(base, "proj")
	spec := api.Policy{Primary: proj, Temp: []string{filepath.Join(base, "state/tmp/s1")}, Additional: []api.Root{
		{Path: filepath.Join(base, "ro"), Access: api.AccessReadOnly},
		{Path: filepath.Join(base, "rw"), Access: api.AccessReadWrite},
		{Path: filepath.Join(base, "secret"), Access: api.AccessNone},
	}}
	pol, err := policy.Compile(mounts.PolicySpec(&spec))
	require.NoError(t, err)
	hv := filepath.Join(base, "mnt/@host/s1")
	srv, err := fusefs.MountHostView(fusefs.HostViewConfig{Mountpoint: hv, Policy: pol, Session: "s1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := srv.Unmount(false); err != nil {
			t.Errorf("unmount %s: %v", hv, err)
			srv.Unmount(true)
		}
	})
	require.NoError(t, srv.DisablePoll()) // this test process opens files through it
	s := api.Session{ID: "s1", Root: proj, Mountpoint: filepath.Join(base, "mnt/s1"), TmpDir: filepath.Join(base, "state/tmp/s1"), Policy: spec}
	h := api.Health{StateDir: filepath.Join(base, "state"), MountBase: filepath.Join(base, "mnt")}
	js, _ := jailSpec(s, api.WorkDir{}, []api.Session{s}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, []confine.View{
		{Path: proj, Source: s.Mountpoint},
		{Path: hv, Source: hv},
		{Path: filepath.Join(base, "ro"), Source: hv + filepath.Join(base, "ro")},
		{Path: filepath.Join(base, "rw"), Source: hv + filepath.Join(base, "rw")},
	}, js.Views)
	assert.Equal(t, []string{s.TmpDir}, js.Writable, "no root is bound directly with a host view")
	assert.Empty(t, js.ReadOnly)
	assert.Contains(t, js.Hidden, filepath.Join(base, "secret"))
	// A working directory outside every root is shown at its own path
	// through the host view (the jail starts on FUSE); one inside a view
	// adds nothing.
	outDir := filepath.Join(base, "out")
	wjs, _ := jailSpec(s, api.WorkDir{Physical: outDir}, []api.Session{s}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, append(slices.Clone(js.Views), confine.View{Path: outDir, Source: hv + outDir}), wjs.Views)
	wjs, _ = jailSpec(s, api.WorkDir{Physical: filepath.Join(base, "rw")}, []api.Session{s}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, js.Views, wjs.Views)
	// Around the none root: the host view hides it there, the jail does not
	// cover it inside a view.
	wjs, _ = jailSpec(s, api.WorkDir{Physical: base}, []api.Session{s}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, append(slices.Clone(js.Views), confine.View{Path: base, Source: hv + base}), wjs.Views)
	assert.NotContains(t, wjs.Hidden, filepath.Join(base, "secret"))
	// Inside (or around) the temp directory, which the policy lets the
	// session write: reached through the view, not bound directly.
	ts := s
	ts.Policy.Temp = []string{s.TmpDir}
	wjs, _ = jailSpec(ts, api.WorkDir{Physical: s.TmpDir}, []api.Session{ts}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, append(slices.Clone(js.Views), confine.View{Path: s.TmpDir, Source: hv + s.TmpDir}), wjs.Views)
	assert.Empty(t, wjs.Writable)
	wjs, _ = jailSpec(ts, api.WorkDir{Physical: filepath.Join(base, "state")}, []api.Session{ts}, h, filepath.Join(base, "run"), nil)
	assert.Equal(t, append(slices.Clone(js.Views), confine.View{Path: filepath.Join(base, "state"), Source: hv + filepath.Join(base, "state")}), wjs.Views)
	assert.Empty(t, wjs.Writable)

	// The jail itself: the session mounted with this host view, then
	// writes through each view decided by the policy at the physical path.
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap (bubblewrap) is not installed")
	}
	ssrv, err := fusefs.Mount(fusefs.Config{Root: proj, Mountpoint: s.Mountpoint, Policy: pol, Session: "s1", HostView: hv,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := ssrv.Unmount(false); err != nil {
			t.Errorf("unmount %s: %v", s.Mountpoint, err)
			ssrv.Unmount(true)
		}
	})
	require.NoError(t, ssrv.DisablePoll())
	js.Cwd = proj
	js.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	js.Args = []string{"bash", "-c", `pwd -P; echo w > "$1/rw/f" && echo rw-ok; echo w > "$1/ro/f" || echo ro-refused; ls "$1/secret" | wc -l; echo p > p && echo proj-ok`, "jail", base}
	cmd, err := js.Command()
	require.NoError(t, err)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, stderr)
	assert.Equal(t, proj+"\nrw-ok\nro-refused\n0\nproj-ok\n", string(out))
	b, err := os.ReadFile(filepath.Join(base, "rw/f"))
	assert.Equal(t, "w\n", string(b), err)
	_, err = os.Stat(filepath.Join(base, "ro/f"))
	assert.True(t, os.IsNotExist(err), "ro/f written: %v", err)
}

// Unconfined exec refuses a working directory not on FUSE (a session
// mountpoint whose mount went away shows the bare directory on disk).
func TestExecRefusesCwdNotOnFUSE(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	err := onFUSE("p2", dir)
	want := fmt.Sprintf("exec: session p2: working directory %s is not on FUSE (statfs type %#x): the session's mount is gone", dir, sfs.Type)
	if err == nil || err.Error() != want {
		t.Fatalf("onFUSE: %v, want %q", err, want)
	}
}

// TestExecRefusesJailOwnEnv: exec --confine --env naming a variable the jail
// sets itself (confine.JailSetEnv) is a usage error (exit code 2) naming the
// variable, before any daemon is asked.
func TestExecRefusesJailOwnEnv(t *testing.T) {
	for _, env := range []string{"TMPDIR=/x", "WSFS_SESSION=other", "WSFS_ROOT", "PWD=/"} {
		name, _, _ := strings.Cut(env, "=")
		out, errOut, code := cli(t, "exec", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--session", "s1", "--confine", "--env", env, "--", "true")
		assert.Equal(t, 2, code, "--env %s", env)
		assert.Equal(t, "", out)
		assert.Equal(t, fmt.Sprintf("wsfs: exec: --env %q: the jail sets %s itself; WSFS_SESSION, WSFS_ROOT, PWD, TMPDIR cannot be given\n", env, name), errOut)
	}
}

// TestNotServed: exec --user's refusal lists the session's users as
// --users takes them, and leaves the list out when there is none.
func TestNotServed(t *testing.T) {
	assert.Equal(t, "exec: --user 7: session s does not serve uid 7 (session create --users)", notServed("s", 7, nil).Error())
	assert.Equal(t, "exec: --user 7: session s does not serve uid 7 (its users: 65534,65533; session create --users)", notServed("s", 7, []uint32{65534, 65533}).Error())
	assert.Equal(t, exitUsage, exitCode(notServed("s", 7, nil)))
}
