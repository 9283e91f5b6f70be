package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/confine"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
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
		Policy: api.Policy{Primary: proj, Temp: []string{}, Additional: []api.Root{
			{Path: mainGit, Access: api.AccessReadWrite},
			{Path: filepath.Join(base, "secret"), Access: api.AccessNone},
		}}}
	others := []api.Session{s,
		{ID: "s2", Root: filepath.Join(base, "other"), Mountpoint: filepath.Join(base, "mnt/s2"), TmpDir: filepath.Join(base, "state/tmp/s2")},
		{ID: "s3", Root: filepath.Join(proj, "inner"), Mountpoint: filepath.Join(base, "mnt/s3"), TmpDir: filepath.Join(base, "state/tmp/s3")},
	}
	h := api.Health{StateDir: filepath.Join(base, "state"), MountBase: filepath.Join(base, "mnt")}
	spec := jailSpec(s, api.WorkDir{}, others, h, filepath.Join(base, "run"), []string{filepath.Join(base, "cache")})
	assert.Equal(t, []confine.View{{Path: proj, Source: s.Mountpoint}}, spec.Views)
	assert.Equal(t, []string{s.TmpDir, filepath.Join(base, "cache"), mainGit}, spec.Writable)
	assert.Equal(t, []string{proj, mainGit}, spec.Backing)
	for _, p := range []string{filepath.Join(mainGit, "hooks"), filepath.Join(mainGit, "config")} {
		assert.True(t, slices.Contains(spec.ReadOnly, p), "ReadOnly %v lacks %s", spec.ReadOnly, p)
	}
	for _, p := range spec.ReadOnly {
		assert.True(t, identity.Within(p, mainGit), "ReadOnly %s outside the directly bound root %s", p, mainGit)
	}
	assert.ElementsMatch(t, []string{filepath.Join(base, "secret"), h.StateDir, h.MountBase, filepath.Join(base, "run"),
		filepath.Join(base, "other"), filepath.Join(base, "mnt/s2"), filepath.Join(base, "state/tmp/s2"),
		filepath.Join(base, "mnt/s3"), filepath.Join(base, "state/tmp/s3")}, spec.Hidden,
		"s3's root lies in this session's view: its policy decides there")
}
