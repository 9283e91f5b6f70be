package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
)

// mountConfigOf parses the `wsfs mount` flags args and returns the config the
// verb would mount, without mounting.
func mountConfigOf(t *testing.T, args ...string) (fusefs.Config, error) {
	t.Helper()
	f := new(mountFlags)
	cmd := newMountCmdWith(f)
	require.NoError(t, cmd.ParseFlags(args))
	return mountConfig(cmd, f)
}

func TestMountConfig(t *testing.T) {
	root := tree(t, "proj/", "alias -> proj", "extra/", "ro/", "mnt/")
	t.Chdir(root)

	t.Run("defaults", func(t *testing.T) {
		cfg, err := mountConfigOf(t, "--root", "alias", "--mountpoint", "mnt")
		require.NoError(t, err)
		assert.Equal(t, root+"/proj", cfg.Root)
		assert.Equal(t, root+"/mnt", cfg.Mountpoint)
		assert.Equal(t, fusefs.SymlinksContain, cfg.Symlinks)
		assert.Equal(t, time.Duration(0), cfg.EntryTimeout)
		spec := cfg.Policy.Spec()
		assert.Equal(t, policy.ModeWorkspaceWrite, spec.Mode)
		assert.Equal(t, root+"/proj", spec.Primary)
		assert.Empty(t, spec.Additional)
		assert.Equal(t, policy.DefaultProtected, spec.Protected)
	})

	t.Run("flags", func(t *testing.T) {
		cfg, err := mountConfigOf(t, "--root", root+"/proj", "--mountpoint", root+"/mnt", "--session", "s-1.a_b",
			"--mode", "read-only", "--add-root", "extra=rw", "--add-root", root+"/ro=ro", "--protect", "secrets",
			"--symlinks", "follow", "--allow-other", "--nonempty", "--debug", "--entry-timeout", "5s", "--attr-timeout", "2s")
		require.NoError(t, err)
		assert.Equal(t, "s-1.a_b", cfg.Session)
		assert.Equal(t, fusefs.SymlinksFollow, cfg.Symlinks)
		assert.True(t, cfg.AllowOther)
		assert.True(t, cfg.NonEmpty)
		assert.True(t, cfg.Debug)
		assert.Equal(t, 5*time.Second, cfg.EntryTimeout)
		assert.Equal(t, 2*time.Second, cfg.AttrTimeout)
		spec := cfg.Policy.Spec()
		assert.Equal(t, policy.ModeReadOnly, spec.Mode)
		assert.Equal(t, []policy.Root{
			{Path: root + "/extra", Access: policy.AccessReadWrite},
			{Path: root + "/ro", Access: policy.AccessReadOnly},
		}, spec.Additional)
		assert.Equal(t, append(append([]string(nil), policy.DefaultProtected...), "secrets"), spec.Protected)
	})

	t.Run("flags override the policy file", func(t *testing.T) {
		file := filepath.Join(root, "p.yaml")
		require.NoError(t, os.WriteFile(file, []byte("mode: full-access\nprimary: "+root+"/alias\nadditional:\n  - path: "+root+"/extra\n    access: none\nprotected: [only]\n"), 0o644))
		cfg, err := mountConfigOf(t, "--policy", file, "--mountpoint", "mnt", "--add-root", "extra=read-write")
		require.NoError(t, err)
		assert.Equal(t, root+"/proj", cfg.Root, "the file's primary is the root")
		spec := cfg.Policy.Spec()
		assert.Equal(t, policy.ModeFullAccess, spec.Mode)
		assert.Equal(t, []policy.Root{{Path: root + "/extra", Access: policy.AccessReadWrite}}, spec.Additional)
		assert.Equal(t, []string{"only"}, spec.Protected)

		cfg, err = mountConfigOf(t, "--policy", file, "--root", "extra", "--mountpoint", "mnt", "--mode", "workspace-write")
		// extra is now both the primary and a none root: overlapping roots.
		require.Error(t, err)
		assert.True(t, isUsage(err))
	})
}

func TestMountBadInput(t *testing.T) {
	root := tree(t, "proj/sub/", "mnt/", "full/x", "file", "outer/inner/")
	t.Chdir(root)
	base := []string{"mount", "--root", "proj", "--mountpoint", "mnt"}
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"missing root", []string{"mount", "--root", "nope", "--mountpoint", "mnt"}, `root "` + root + `/nope": does not exist`},
		{"root not a directory", []string{"mount", "--root", "file", "--mountpoint", "mnt"}, `root "` + root + `/file": not a directory`},
		{"missing mountpoint flag", []string{"mount", "--root", "proj"}, "--mountpoint: missing DIR"},
		{"missing mountpoint dir", []string{"mount", "--root", "proj", "--mountpoint", "nope"}, `mountpoint "` + root + `/nope": does not exist`},
		{"mountpoint inside root", []string{"mount", "--root", "proj", "--mountpoint", "proj/sub"}, `mountpoint "` + root + `/proj/sub" is inside the root "` + root + `/proj" it would serve (a loop)`},
		{"root inside mountpoint", []string{"mount", "--root", "outer/inner", "--mountpoint", "outer", "--nonempty"}, `root "` + root + `/outer/inner" is inside the mountpoint "` + root + `/outer"`},
		{"non-empty mountpoint", []string{"mount", "--root", "proj", "--mountpoint", "full"}, `mountpoint "` + root + `/full": not empty (wsfs mount --nonempty mounts over what is in it)`},
		{"unknown mode", append(base, "--mode", "sideways"), `--mode "sideways": unknown mode (want read-only, workspace-write or full-access)`},
		{"add-root without =", append(base, "--add-root", "/tmp"), `--add-root "/tmp": want PATH=ro|rw|none`},
		{"add-root unknown access", append(base, "--add-root", "/tmp=rwx"), `--add-root "/tmp=rwx": unknown access "rwx" (want ro, rw or none)`},
		{"add-root missing path", append(base, "--add-root", "=ro"), `--add-root "=ro": missing PATH`},
		{"add-root path missing", append(base, "--add-root", "nope=ro"), `--add-root nope: no such file or directory`},
		{"add-root twice", append(base, "--add-root", root+"/outer/inner/..=none", "--add-root", "outer=rw"), `--add-root "outer=rw": the same directory as --add-root "` + root + `/outer/inner/..=none" (` + root + `/outer): explicit roots must not overlap`},
		{"bad session", append(base, "--session", "a/b"), `--session: session id "a/b": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{"session dot-dot", append(base, "--session", ".."), `--session: session id "..": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{"bad symlinks", append(base, "--symlinks", "maybe"), `--symlinks: symlink mode "maybe": must be one of contain, follow`},
		{"absolute protect", append(base, "--protect", "/etc"), `--protect "/etc": must be a non-empty path relative to each root`},
		{"negative timeout", append(base, "--entry-timeout", "-1s"), `--entry-timeout -1s: must not be negative`},
		{"argument", append(base, "extra"), `mount: unexpected argument "extra"`},
		{"host view relative", append(base, "--host-view", "hv"), `--host-view "hv": must be absolute`},
		{"host view in the root", append(base, "--host-view", root+"/proj/hv"), `--host-view "` + root + `/proj/hv": must be outside the root "` + root + `/proj" and the mountpoint "` + root + `/mnt"`},
		{"host view not empty", append(base, "--host-view", root+"/full"), `host view mountpoint "` + root + `/full": not empty`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(t, c.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, "wsfs: "+c.msg+"\n", errOut)
		})
	}
	// Nothing left behind: no host view directory made, nothing mounted.
	for _, p := range []string{root + "/mnt@host", root + "/proj/hv", root + "/hv"} {
		_, err := os.Lstat(p)
		assert.True(t, os.IsNotExist(err), "%s left behind: %v", p, err)
	}
	assert.False(t, mounted(t, root+"/mnt"))
	assert.False(t, mounted(t, root+"/full"))
}
