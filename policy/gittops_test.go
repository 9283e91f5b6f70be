package policy

import (
	"fmt"
	"os"
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
	// directory at every level: found down to the last level whose .git
	// path is shorter than PATH_MAX. The test's cleanup (os.RemoveAll)
	// removes it by descriptor too.
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	deep := root
	var want []string
	for i := 1; i <= 20; i++ {
		name := strings.Repeat("d", 248) + string(rune('a'+i/10)) + string(rune('a'+i%10))
		require.NoError(t, unix.Mkdirat(fd, name, 0o755))
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = next
		deep += "/" + name
		require.NoError(t, unix.Mkdirat(fd, ".git", 0o755))
		if len(deep+"/.git") < unix.PathMax {
			want = append([]string{strings.TrimPrefix(deep, root)}, want...)
		}
	}
	unix.Close(fd)
	require.Less(t, len(want), 20, "some levels beyond PATH_MAX")
	got := gitTops(deep)
	require.Equal(t, want, dirs(got))
	require.Equal(t, gitTopsByPath(deep), got)
}

// TestGitTopsPathMax: a .git path of PATH_MAX-1 bytes is looked at, one of
// PATH_MAX bytes is not, as lstat(2) takes the one and refuses the other.
func TestGitTopsPathMax(t *testing.T) {
	root := tree(t)
	for _, c := range []struct {
		gitLen int
		found  bool
	}{{unix.PathMax - 1, true}, {unix.PathMax, false}} {
		top := fmt.Sprintf("%s/len%d", root, c.gitLen)
		require.NoError(t, os.Mkdir(top, 0o755))
		fd, err := unix.Open(top, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		dir := top
		for target := c.gitLen - len("/.git"); len(dir) < target; {
			r := target - len(dir) // bytes to add: "/" and a name
			n := min(250, r-1)
			if r-1-n == 1 {
				n-- // leave room for "/" and a name of one byte at least
			}
			name := strings.Repeat("d", n)
			require.NoError(t, unix.Mkdirat(fd, name, 0o755))
			next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			require.NoError(t, err)
			unix.Close(fd)
			fd, dir = next, dir+"/"+name
		}
		require.NoError(t, unix.Mkdirat(fd, ".git", 0o755))
		unix.Close(fd)
		require.Len(t, dir+"/.git", c.gitLen)
		got := gitTops(dir)
		require.Equal(t, c.found, len(got) > 0 && got[0].dir == dir, "gitTops finds the .git of %d bytes", c.gitLen)
		require.Equal(t, gitTopsByPath(dir), got, "against one lstat per ancestor (.git of %d bytes)", c.gitLen)
	}
}

// TestGitTopsDeep: below gitTopsPathLevels levels gitTops walks on by
// descriptor, and finds what one lstat(2) per ancestor finds: a .git at
// every level of a chain 12 levels longer than that, a .git symlink and a
// file (tops) and a fifo (not one) below the switch, a symlinked component
// below it (followed), and a missing component just above, at and below it
// (nothing below it).
func TestGitTopsDeep(t *testing.T) {
	root := tree(t, "elsewhere/.git/")
	base := strings.Count(root, "/") // the level of root
	dir := root
	var want []string
	for lvl := base + 1; lvl <= gitTopsPathLevels+12; lvl++ {
		dir += fmt.Sprintf("/d%02d", lvl)
		require.NoError(t, os.Mkdir(dir, 0o755))
		switch lvl {
		case gitTopsPathLevels + 2:
			require.NoError(t, os.Symlink("nowhere", dir+"/.git"))
		case gitTopsPathLevels + 3:
			require.NoError(t, os.WriteFile(dir+"/.git", []byte("gitdir: x\n"), 0o644))
		case gitTopsPathLevels + 4:
			require.NoError(t, unix.Mkfifo(dir+"/.git", 0o644))
			continue // not a top
		default:
			require.NoError(t, os.Mkdir(dir+"/.git", 0o755))
		}
		want = append([]string{strings.TrimPrefix(dir, root)}, want...)
	}
	require.Greater(t, strings.Count(dir, "/"), gitTopsPathLevels+4, "the chain reaches below the switch")
	dirs := func(ts []gitTop) []string {
		var out []string
		for _, g := range ts {
			if strings.HasPrefix(g.dir, root) {
				out = append(out, strings.TrimPrefix(g.dir, root))
			}
		}
		return out
	}
	got := gitTops(dir)
	require.Equal(t, want, dirs(got), "a top at every level but the fifo's")
	require.Equal(t, gitTopsByPath(dir), got)

	// A symlinked component below the switch: followed, as by path.
	link := dir[:strings.LastIndexByte(dir, '/')]
	require.NoError(t, os.Symlink(root+"/elsewhere", link+"/ln"))
	got = gitTops(link + "/ln")
	require.Equal(t, strings.TrimPrefix(link, root)+"/ln", dirs(got)[0], "ln/.git is the target's .git: ln is a top")
	require.Equal(t, gitTopsByPath(link+"/ln"), got)

	// A missing component just above, at and just below the switch.
	comps := strings.Split(dir, "/") // comps[i] ends level i
	for _, lvl := range []int{gitTopsPathLevels - 1, gitTopsPathLevels, gitTopsPathLevels + 1} {
		d := strings.Join(comps[:lvl], "/") + "/missing/below/it"
		got := gitTops(d)
		require.Equal(t, gitTopsByPath(d), got, "gitTops(%s)", d)
		require.Len(t, dirs(got), lvl-1-base, "the levels above the missing one, level %d", lvl)
	}
}
