package identity

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// entry is one object of a test tree: a directory (trailing "/" in name), a
// file, or a symlink (link != "") whose target may use {root}.
type entry struct{ name, link string }

// buildTree makes the entries under a fresh t.TempDir() and returns the
// tree's canonical root (t.TempDir may live under a symlinked /tmp).
func buildTree(t *testing.T, entries []entry) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, e := range entries {
		p := filepath.Join(root, e.name)
		switch {
		case e.link != "":
			require.NoError(t, os.Symlink(strings.ReplaceAll(e.link, "{root}", root), p))
		case strings.HasSuffix(e.name, "/"):
			require.NoError(t, os.MkdirAll(p, 0o755))
		default:
			require.NoError(t, os.WriteFile(p, []byte(e.name), 0o644))
		}
	}
	return root
}

// fixture is the tree shared by the table tests.
func fixture(t *testing.T) string {
	es := []entry{
		{name: "d/"}, {name: "d/sub/"}, {name: "d/f"}, {name: "f"},
		{name: `back\slash`},
		{name: "lf", link: "d/f"},                // relative link to a file
		{name: "ld", link: "d"},                  // relative link to a dir
		{name: "lsub", link: "d/sub"},            // link two levels down
		{name: "labs", link: "{root}/d"},         // absolute link
		{name: "d/sub/up", link: "../.."},        // link climbing to root
		{name: "dang", link: "nothere/x"},        // dangling, relative
		{name: "dangabs", link: "{root}/gone/y"}, // dangling, absolute
		{name: "dangup", link: "../" + "zz-missing-sibling"},
		{name: "dangf", link: "f/x"},    // dangling through a file
		{name: "lslash", link: "f/"},    // target needs a directory
		{name: "loop", link: "loop"},    // self loop
		{name: "la", link: "lb"},        // two-link loop
		{name: "lb", link: "la"},        //
		{name: "lchain", link: "ld/.."}, // link whose target has ".."
	}
	// c0 -> c1 -> … -> c39 -> d: 40 links, the most the kernel follows.
	for i := 0; i < MaxSymlinks-1; i++ {
		es = append(es, entry{name: fmt.Sprintf("c%d", i), link: fmt.Sprintf("c%d", i+1)})
	}
	es = append(es,
		entry{name: fmt.Sprintf("c%d", MaxSymlinks-1), link: "d"},
		entry{name: "cover", link: "c0"}, // 41 links
	)
	return buildTree(t, es)
}

func TestCanonical(t *testing.T) {
	root := fixture(t)
	up := filepath.Dir(root)
	tests := []struct {
		path  string // relative to root unless absolute
		want  string // relative to root, "^" for root's parent
		errno syscall.Errno
	}{
		{path: ".", want: "."},
		{path: "d", want: "d"},
		{path: "d/", want: "d"},
		{path: "d//sub///", want: "d/sub"},
		{path: "d/.", want: "d"},
		{path: "./d/./sub/.", want: "d/sub"},
		{path: "d/f", want: "d/f"},
		{path: "d/sub/..", want: "d"},
		{path: "..", want: "^"},
		{path: `back\slash`, want: `back\slash`},
		{path: "lf", want: "d/f"},
		{path: "ld", want: "d"},
		{path: "ld/", want: "d"},
		{path: "ld/f", want: "d/f"},
		{path: "ld/..", want: "."},       // parent of the target, not of the link
		{path: "lsub/..", want: "d"},     // not root
		{path: "lsub/../f", want: "d/f"}, // lexically this would be root/f
		{path: "labs/sub/../f", want: "d/f"},
		{path: "d/sub/up", want: "."},
		{path: "d/sub/up/d/sub/up/f", want: "f"},
		{path: "lchain", want: "."},
		{path: "lchain/lchain/d", want: "d"},
		{path: "c0", want: "d"},        // exactly MaxSymlinks links
		{path: "c1/sub/up", want: "."}, // 39 + 1 links, counted across the walk
		{path: "../../../../../../../../../../../../../.." + root + "/f", want: "f"},

		{path: "", errno: syscall.ENOENT},
		{path: "missing", errno: syscall.ENOENT},
		{path: "missing/..", errno: syscall.ENOENT},
		{path: "d/missing/x", errno: syscall.ENOENT},
		{path: "dang", errno: syscall.ENOENT},
		{path: "dangabs", errno: syscall.ENOENT},
		{path: "f/", errno: syscall.ENOTDIR},
		{path: "f/.", errno: syscall.ENOTDIR},
		{path: "f/..", errno: syscall.ENOTDIR},
		{path: "d/f/x", errno: syscall.ENOTDIR},
		{path: "lf/", errno: syscall.ENOTDIR},
		{path: "lf/x", errno: syscall.ENOTDIR},
		{path: "lslash", errno: syscall.ENOTDIR},
		{path: "dangf", errno: syscall.ENOTDIR},
		{path: "loop", errno: syscall.ELOOP},
		{path: "loop/x", errno: syscall.ELOOP},
		{path: "la", errno: syscall.ELOOP},
		{path: "d/../lb/x", errno: syscall.ELOOP},
		{path: "cover", errno: syscall.ELOOP},     // MaxSymlinks+1 links
		{path: "c0/sub/up", errno: syscall.ELOOP}, // 40 + 1
	}
	// Each case runs with an absolute spelling and, from root as the process
	// cwd, with the relative one.
	t.Chdir(root)
	for _, tc := range tests {
		spellings := []string{tc.path}
		if tc.path != "" && !filepath.IsAbs(tc.path) {
			spellings = append(spellings, root+"/"+tc.path)
		}
		for _, p := range spellings {
			t.Run(p, func(t *testing.T) {
				got, err := Canonical(p)
				kgot, kerr := kernelCanonical(p)
				assert.Equal(t, kerr, tc.errno, "the kernel disagrees with the table")
				assert.Equal(t, kgot, got, "the kernel disagrees with Canonical")
				if tc.errno != 0 {
					requireErrno(t, err, "canonical", p, tc.errno)
					assert.Empty(t, got)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, expect(root, up, tc.want), got)
			})
		}
	}
}

// TestPathMax: like the kernel, a path of PATH_MAX bytes or more (the
// terminating NUL counts) is ENAMETOOLONG before any walking.
func TestPathMax(t *testing.T) {
	root := fixture(t)
	t.Chdir(root)
	long := strings.Repeat("./", unix.PathMax/2) // 4096 bytes
	_, kerr := kernelCanonical(long)
	require.Equal(t, syscall.ENAMETOOLONG, kerr)
	_, err := Canonical(long)
	requireErrno(t, err, "canonical", long, syscall.ENAMETOOLONG)
	_, err = TargetKey(long)
	requireErrno(t, err, "targetkey", long, syscall.ENAMETOOLONG)

	fits := strings.Repeat("./", unix.PathMax/2-1) + "d" // 4095 bytes, the most that fits
	want, kerr := kernelCanonical(fits)
	require.Zero(t, kerr)
	got, err := Canonical(fits)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, root+"/d", got)
}

func TestTargetKey(t *testing.T) {
	root := fixture(t)
	up := filepath.Dir(root)
	tests := []struct {
		path  string
		want  string
		errno syscall.Errno
	}{
		// Existing: the canonical path.
		{path: "d/f", want: "d/f"},
		{path: "lf", want: "d/f"},
		{path: "lsub/..", want: "d"},
		{path: "ld/", want: "d"},
		// Missing leaf and intermediates.
		{path: "new", want: "new"},
		{path: "new/", want: "new"},
		{path: "new/.", want: "new"},
		{path: "d/new/deeper/leaf", want: "d/new/deeper/leaf"},
		{path: "ld/new", want: "d/new"},
		{path: "lsub/../new", want: "d/new"},
		{path: `d/..\new`, want: `d/..\new`},
		// ".." inside the missing part pops missing components ...
		{path: "new/a/../b", want: "new/b"},
		{path: "new/a/../../f", want: "f"},
		// ... and reaching the existing part pops the physical directory,
		// then the physical walk resumes (links followed, files checked).
		{path: "lsub/new/../../x", want: "d/x"},
		{path: "new/../ld/sub/n", want: "d/sub/n"},
		{path: "new/../../x", want: "^/x"},
		// Dangling links: the target's key.
		{path: "dang", want: "nothere/x"},
		{path: "dang/more", want: "nothere/x/more"},
		{path: "dangabs", want: "gone/y"},
		{path: "dangup", want: "^/zz-missing-sibling"},
		// Errors.
		{path: "", errno: syscall.ENOENT},
		{path: "f/new", errno: syscall.ENOTDIR},
		{path: "f/", errno: syscall.ENOTDIR},
		{path: "d/f/x/y", errno: syscall.ENOTDIR},
		{path: "lf/new", errno: syscall.ENOTDIR},
		{path: "new/../d/f/x", errno: syscall.ENOTDIR},
		{path: "dangf", errno: syscall.ENOTDIR},
		{path: "lslash", errno: syscall.ENOTDIR},
		{path: "loop", errno: syscall.ELOOP},
		{path: "loop/new", errno: syscall.ELOOP},
		{path: "la/new/x", errno: syscall.ELOOP},
		{path: "new/../lb", errno: syscall.ELOOP},
		{path: "cover/new", errno: syscall.ELOOP},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			p := root + "/" + tc.path
			if tc.path == "" {
				p = ""
			}
			got, err := TargetKey(p)
			if tc.errno != 0 {
				requireErrno(t, err, "targetkey", p, tc.errno)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, expect(root, up, tc.want), got)
		})
	}
}

// TestTargetKeyStable: the key of a missing path is the canonical path of
// what `mkdir -p` creates there (os.MkdirAll where it can).
func TestTargetKeyStable(t *testing.T) {
	for _, rel := range []string{
		"new", "a/b/c", "ld/x/y", "lsub/../z/w", "new/a/../b", "ld/p/../q/", "new/../lsub/n",
	} {
		t.Run(rel, func(t *testing.T) {
			root := fixture(t)
			p := root + "/" + rel
			before, err := TargetKey(p)
			require.NoError(t, err)
			if strings.Contains(rel, "..") {
				// os.MkdirAll refuses "new/../lsub/n": its Lstat sees the
				// link lsub, not a directory. mkdir -p walks like the kernel.
				out, err := exec.Command("mkdir", "-p", "--", p).CombinedOutput()
				require.NoError(t, err, "%s", out)
			} else {
				require.NoError(t, os.MkdirAll(p, 0o755))
			}
			after, err := TargetKey(p)
			require.NoError(t, err)
			canon, err := Canonical(p)
			require.NoError(t, err)
			assert.Equal(t, before, after)
			assert.Equal(t, before, canon)
		})
	}
}

// TestTargetKeyStableThroughDanglingLink: the key of a dangling link is the
// file that open(O_CREAT) through the link creates.
func TestTargetKeyStableThroughDanglingLink(t *testing.T) {
	for _, tc := range []struct{ link, parent string }{
		{link: "dang", parent: "nothere"},
		{link: "dangabs", parent: "gone"},
	} {
		t.Run(tc.link, func(t *testing.T) {
			root := fixture(t)
			p := root + "/" + tc.link
			before, err := TargetKey(p)
			require.NoError(t, err)
			require.NoError(t, os.Mkdir(root+"/"+tc.parent, 0o755))
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o644)) // O_CREAT through the link
			after, err := TargetKey(p)
			require.NoError(t, err)
			assert.Equal(t, before, after)
			ok, err := SameFile(p, before)
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

func TestFileIDAndSameFile(t *testing.T) {
	root := fixture(t)
	tests := []struct {
		a, b  string
		same  bool
		errno syscall.Errno
	}{
		{a: "lf", b: "d/f", same: true},
		{a: "ld", b: "labs", same: true},
		{a: "lsub/..", b: "d", same: true},
		{a: "f", b: "d/f", same: false},
		{a: "d", b: "d/sub", same: false},
		{a: "f", b: "missing", errno: syscall.ENOENT},
		{a: "dang", b: "f", errno: syscall.ENOENT},
		{a: "loop", b: "f", errno: syscall.ELOOP},
		{a: "f", b: "f/x", errno: syscall.ENOTDIR},
	}
	for _, tc := range tests {
		t.Run(tc.a+"~"+tc.b, func(t *testing.T) {
			same, err := SameFile(root+"/"+tc.a, root+"/"+tc.b)
			if tc.errno != 0 {
				var pe *fs.PathError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "stat", pe.Op)
				assert.ErrorIs(t, err, tc.errno)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.same, same)
		})
	}
	ia, err := FileIDOf(root + "/lf")
	require.NoError(t, err)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(root+"/d/f", &st))
	assert.Equal(t, FileID{Dev: st.Dev, Ino: st.Ino}, ia)
}

// cancelAfter is a context that reports Canceled after n calls to Err, to
// cancel a walk in the middle deterministically.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

func TestContextCancelled(t *testing.T) {
	root := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := CanonicalContext(ctx, root+"/d")
	assert.Same(t, context.Canceled, err)
	_, err = TargetKeyContext(ctx, root+"/new")
	assert.Same(t, context.Canceled, err)

	// Cancelled during the walk: three checks pass (entry and two
	// components), the fourth stops the walk.
	_, err = TargetKeyContext(&cancelAfter{Context: context.Background(), n: 3}, root+"/d/sub/x/y")
	assert.Same(t, context.Canceled, err)
	// Enough budget: the same walk finishes.
	n := strings.Count(root, "/") + 5
	got, err := TargetKeyContext(&cancelAfter{Context: context.Background(), n: n}, root+"/d/sub/x/y")
	require.NoError(t, err)
	assert.Equal(t, root+"/d/sub/x/y", got)
}

// TestWorkingDirectoryIsPhysical: a relative path starts at getcwd(2), not
// at $PWD, which may spell the cwd through a symlink.
func TestWorkingDirectoryIsPhysical(t *testing.T) {
	root := fixture(t)
	t.Chdir(root + "/lsub")
	t.Setenv("PWD", root+"/lsub")
	got, err := Canonical("..")
	require.NoError(t, err)
	assert.Equal(t, root+"/d", got)
	got, err = TargetKey("../new")
	require.NoError(t, err)
	assert.Equal(t, root+"/d/new", got)
}

func requireErrno(t *testing.T, err error, op, path string, errno syscall.Errno) {
	t.Helper()
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe, "want %v", errno)
	assert.Equal(t, op, pe.Op)
	assert.Equal(t, path, pe.Path)
	assert.ErrorIs(t, err, errno, "got %v", pe.Err)
	assert.Equal(t, errno, pe.Err) // the bare errno, not a wrapper
}

// expect maps a table's root-relative want to an absolute path; "^" is the
// root's parent.
func expect(root, up, want string) string {
	if rest, ok := strings.CutPrefix(want, "^"); ok {
		return filepath.Join(up, rest)
	}
	return filepath.Join(root, want)
}

// TestSearchPermission: a directory that cannot be searched stops the walk
// with EACCES, as in the kernel. Root bypasses the check, so as root the
// test drops its effective uid for the duration (all threads; no test here
// runs in parallel) and takes it back from the saved uid.
func TestSearchPermission(t *testing.T) {
	root := buildTree(t, []entry{{name: "open/"}, {name: "open/f"}, {name: "locked/"}, {name: "locked/f"}})
	require.NoError(t, os.Chmod(root+"/locked", 0o600)) // readable, not searchable
	if os.Geteuid() == 0 {
		// Only the two 0700 directories t.TempDir made (…/TestName123/001),
		// never their parents: those are the system's.
		for _, dir := range []string{root, filepath.Dir(root)} {
			require.NoError(t, os.Chmod(dir, 0o755))
		}
		require.NoError(t, unix.Setresuid(-1, 65534, -1))
		defer func() {
			require.NoError(t, unix.Setresuid(-1, 0, -1))
			require.Zero(t, os.Geteuid())
		}()
	}
	if _, err := Canonical(root + "/open/f"); err != nil {
		t.Skipf("the tree is not reachable without privileges here: %v", err)
	}
	for _, p := range []string{"locked", "locked/", "open/../locked"} {
		want, kerr := kernelCanonical(root + "/" + p)
		require.Zero(t, kerr, p)
		got, err := Canonical(root + "/" + p)
		require.NoError(t, err, p)
		assert.Equal(t, want, got)
	}
	for _, p := range []string{"locked/f", "locked/new", "locked/.", "locked/..", "locked/./", "open/../locked/x/y"} {
		_, kerr := kernelCanonical(root + "/" + p)
		assert.Equal(t, syscall.EACCES, kerr, p)
		_, err := Canonical(root + "/" + p)
		requireErrno(t, err, "canonical", root+"/"+p, syscall.EACCES)
		_, err = TargetKey(root + "/" + p)
		requireErrno(t, err, "targetkey", root+"/"+p, syscall.EACCES)
	}
}
