package identity

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestWithin: the union of the edge cases of the three copies it replaced
// (fusefs, policy, mounts), which differed on "/".
func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/a", "/a", true},
		{"/a/b", "/a", true},
		{"/a/b/c", "/a", true},
		{"/ab", "/a", false}, // a "/" boundary, not a string prefix
		{"/a", "/a/b", false},
		{"/", "/a", false},
		{"/", "/", true},
		{"/a", "/", true},
		{"/a/b", "/", true},
		{"a", "/", false}, // a relative path is within nothing
		{"", "/", false},
		{"/a.b", "/a", false},
		{"/a/", "/a", true}, // not clean: still below on a "/" boundary
		{"/x/a", "/a", false},
	} {
		assert.Equal(t, tc.want, Within(tc.p, tc.dir), "Within(%q, %q)", tc.p, tc.dir)
	}
	var sink bool
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink = Within("/a/b/c", "/a/b") }), "Within allocates")
	assert.True(t, sink)
}

// TestHasDotDot: the union of the three copies it replaced (resolver and
// mounts split on "/" and "\", fusefs on "/" only): DESIGN.md's rule.
func TestHasDotDot(t *testing.T) {
	for p, want := range map[string]bool{
		"..": true, "a/..": true, "../a": true, `a\..\b`: true, `..\`: true, "/a/../": true,
		`..\x`: true, "a/../b": true, "/..": true, `\..`: true, "a//..//b": true,
		"": false, ".": false, "...": false, "..foo": false, "x..": false, "a/.../b": false,
		`a\...\b`: false, "a/..b/c": false, ". .": false, "/": false, `\`: false, "a/b.": false,
		".. ": false, " ..": false,
	} {
		assert.Equal(t, want, HasDotDot(p), "HasDotDot(%q)", p)
	}
}

// TestReadlinkAt: by path (AT_FDCWD) and by an O_PATH descriptor of the
// link, texts longer than the first buffer, and the errnos unwrapped.
func TestReadlinkAt(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x/", 300) + "end" // 603 bytes: two buffer doublings
	for name, text := range map[string]string{"short": "target", "exact": strings.Repeat("y", 256), "long": long, "abs": "/etc/passwd"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.Symlink(text, p))
		got, err := ReadlinkAt(unix.AT_FDCWD, p)
		require.NoError(t, err)
		assert.Equal(t, text, got, name)

		fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		got, err = ReadlinkAt(fd, "")
		unix.Close(fd)
		require.NoError(t, err)
		assert.Equal(t, text, got, name+" by descriptor")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	_, err := ReadlinkAt(unix.AT_FDCWD, filepath.Join(dir, "file"))
	assert.Equal(t, unix.EINVAL, err)
	_, err = ReadlinkAt(unix.AT_FDCWD, filepath.Join(dir, "missing"))
	assert.Equal(t, unix.ENOENT, err)
}

// TestErrnoText and TestErrnoName: the four helpers they replaced
// (mounts, doctor, fusefs's fallback, the CLI's error names).
func TestErrnoText(t *testing.T) {
	pe := &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}
	assert.Equal(t, "no such file or directory", ErrnoText(pe))
	assert.Equal(t, "too many levels of symbolic links", ErrnoText(fmt.Errorf("walk: %w", syscall.ELOOP)))
	assert.Equal(t, "permission denied", ErrnoText(syscall.EACCES))
	assert.Equal(t, "plain text", ErrnoText(fmt.Errorf("plain text")))
}

func TestErrnoName(t *testing.T) {
	assert.Equal(t, "ELOOP", ErrnoName(&fs.PathError{Op: "stat", Path: "/x", Err: syscall.ELOOP}))
	assert.Equal(t, "EROFS", ErrnoName(syscall.EROFS))
	assert.Equal(t, "ENOTCONN", ErrnoName(fmt.Errorf("stat: %w", syscall.ENOTCONN)))
	assert.Equal(t, "errno 4000", ErrnoName(syscall.Errno(4000)))
	assert.Equal(t, "", ErrnoName(fmt.Errorf("no errno")))
	assert.Equal(t, "", ErrnoName(nil))
}
