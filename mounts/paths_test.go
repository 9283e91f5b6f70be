package mounts

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMkdirAllModeExact: the directories mkdirAll makes have the mode asked
// for whatever the umask (serve no longer sets one before New), and an
// existing directory keeps its own. Not parallel: the umask is per process.
func TestMkdirAllModeExact(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o711))
	base := filepath.Join(dir, "a", "b", "mnt")
	made, err := mkdirAll(base, 0o755)
	require.NoError(t, err)
	assert.Equal(t, []string{base, filepath.Join(dir, "a", "b"), filepath.Join(dir, "a")}, made, "made, innermost first")
	for _, p := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), base} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), p)
	}
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o711), fi.Mode().Perm(), "an existing directory keeps its mode")
	made, err = mkdirAll(base, 0o700)
	require.NoError(t, err, "an existing path is fine")
	assert.Empty(t, made)
	fi, err = os.Stat(base)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}
