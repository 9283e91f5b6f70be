package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestGitTops: the descriptor walk down from / finds the same repository
// tops as an lstat(2) of A/.git per ancestor A: .git directories, files and
// symlinks count, other types do not, a symlinked component is followed as
// a path walk follows it, a missing component ends the walk, and a .git
// whose path is PATH_MAX bytes or more counts as absent (lstat refuses it).
func TestGitTops(t *testing.T) {
	root := tree(t, "a/.git/", "a/b/.git", "x/y/", "a/b/c -> {root}/x", "x/.git -> nowhere")
	require.NoError(t, unix.Mkfifo(root+"/x/y/.git", 0o644))
	dirs := func(ts []gitTop) []string {
		var out []string
		for _, g := range ts {
			if strings.HasPrefix(g.dir, root) {
				out = append(out, strings.TrimPrefix(g.dir, root))
			}
		}
		return out
	}
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{"/a/b/c/y", []string{"/a/b/c", "/a/b", "/a"}},
		{"/a/b", []string{"/a/b", "/a"}},
		{"/a/missing/z", []string{"/a"}},
		{"/x/y", []string{"/x"}},
		{"", nil},
	} {
		got := gitTops(root + c.dir)
		require.Equal(t, c.want, dirs(got), "gitTops(%s)", c.dir)
		require.Equal(t, gitTopsByPath(root+c.dir), got, "gitTops(%s) against one lstat per ancestor", c.dir)
	}

	// Not canonical: by path, as before.
	for _, d := range []string{"/a/./b", "/a//b", "/a/b/c/../y"} {
		require.Equal(t, gitTopsByPath(root+d), gitTops(root+d), "gitTops(%s)", d)
	}

	// A chain of 250-byte names 20 deep, made by descriptor, with a .git
	// directory at levels 5 and 18 (the second beyond PATH_MAX); the
	// test's cleanup (os.RemoveAll) removes it by descriptor too.
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	deep := root
	for i := 1; i <= 20; i++ {
		name := strings.Repeat("d", 248) + string(rune('a'+i/10)) + string(rune('a'+i%10))
		require.NoError(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = next
		deep += "/" + name
		if i == 5 || i == 18 {
			require.NoError(t, unix.Mkdirat(fd, ".git", 0o755))
		}
	}
	unix.Close(fd)
	level5 := deep[:len(root)+5*251]
	got := gitTops(deep)
	require.Equal(t, []string{strings.TrimPrefix(level5, root)}, dirs(got))
	require.Equal(t, gitTopsByPath(deep), got)
}
