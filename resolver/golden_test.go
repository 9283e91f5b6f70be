package resolver

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestGolden builds the tree recipe of testdata/resolve.golden and checks
// every case's display path and key (or errno) exactly.
func TestGolden(t *testing.T) {
	f, err := os.Open("../testdata/resolve.golden")
	require.NoError(t, err)
	defer f.Close()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	expand := func(s string) string { return strings.ReplaceAll(s, "ROOT", root) }
	sc := bufio.NewScanner(f)
	cases := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		switch fields[0] {
		case "dir":
			require.NoError(t, os.MkdirAll(filepath.Join(root, fields[1]), 0o755))
			continue
		case "file":
			require.NoError(t, os.WriteFile(filepath.Join(root, fields[1]), nil, 0o644))
			continue
		case "link":
			require.Len(t, fields, 4, "line %d", line)
			require.NoError(t, os.Symlink(expand(fields[3]), filepath.Join(root, fields[1])))
			continue
		}
		parts := strings.Split(text, "|")
		require.Len(t, parts, 4, "line %d: want cwd | path | display | key", line)
		for i := range parts {
			parts[i] = expand(strings.TrimSpace(parts[i]))
		}
		cwd, path, display, key := parts[0], parts[1], parts[2], parts[3]
		cases++
		var r Resolver
		got, err := r.Resolve(context.Background(), path, Options{Cwd: cwd})
		if strings.HasPrefix(key, "!") {
			var errno syscall.Errno
			require.True(t, errors.As(err, &errno), "line %d: %s in %s: want %s, got %v", line, path, cwd, key, err)
			require.Equal(t, key[1:], unix.ErrnoName(errno), "line %d", line)
			continue
		}
		require.NoError(t, err, "line %d", line)
		require.Equal(t, Target{Display: display, Key: key}, got, "line %d: %s in %s", line, path, cwd)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, cases, 10)
}
