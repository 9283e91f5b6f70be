package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A second wsfs mount over a live one is refused naming the mount (not "not
// empty"); wsfs unmount takes a path relative to the current directory.
func TestMountOverLiveMountAndRelativeUnmount(t *testing.T) {
	requireFUSE(t)
	root, proj, mnt, _ := mountFixture(t)
	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt)
	require.Contains(t, m.stdout.String(), "mounted ")

	_, errOut, code := cli(t, "mount", "--root", proj, "--mountpoint", mnt)
	assert.Equal(t, 2, code)
	assert.Equal(t, `wsfs: mountpoint "`+mnt+`" is a live wsfs mount; unmount it first (wsfs unmount `+mnt+`) or pick another directory`+"\n", errOut)
	// --nonempty does not make it right either.
	_, errOut, code = cli(t, "mount", "--nonempty", "--root", proj, "--mountpoint", mnt)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "is a live wsfs mount")

	t.Chdir(root)
	out, errOut, code := cli(t, "unmount", "mnt")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "unmounted "+mnt+"\n", out)
	assert.False(t, mounted(t, mnt), "still mounted after wsfs unmount mnt")
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
}

// Help texts name the real defaults.
func TestHelpNamesDefaults(t *testing.T) {
	for _, verb := range [][]string{{"mount"}, {"session", "create"}} {
		out, _, code := cli(t, append(verb, "--help")...)
		require.Equal(t, 0, code)
		assert.Contains(t, out, "git's config, config.worktree, commondir, hooks in every git directory are always protected", verb)
	}
	out, _, _ := cli(t, "mount", "--help")
	assert.Contains(t, out, "(0: 1m0s while host changes are watched, else 1s)")
}
