package resolver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree builds the fixture under a fresh t.TempDir() and returns its
// canonical root (t.TempDir may live under a symlinked /tmp).
//
//	w/            the workspace: f, sub/f, back\slash
//	w/lnk   -> ../real        symlinked directory
//	w/lf    -> f              file alias
//	w/dang  -> gone/new       dangling, relative
//	w/dangabs -> {root}/gone2/n dangling, absolute
//	w/loop  -> loop, w/la -> lb -> la
//	real/x
//	lw      -> w              symlinked cwd
func tree(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, d := range []string{"w/sub", "real"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	for _, f := range []string{"w/f", "w/sub/f", `w/back\slash`, "real/x"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), nil, 0o644))
	}
	for name, target := range map[string]string{
		"w/lnk": "../real", "w/lf": "f", "w/dang": "gone/new", "w/dangabs": root + "/gone2/n",
		"w/loop": "loop", "w/la": "lb", "w/lb": "la", "lw": "w",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(root, name)))
	}
	return root
}

func TestResolve(t *testing.T) {
	root := tree(t)
	tests := []struct {
		name         string
		def, cwd     string // relative to root; "" is empty, "!" + p is p as is
		path         string // "{root}" is replaced
		display, key string // relative to root; display "=" means the key
		errno        syscall.Errno
		errText      string // a one-line usage error starting with this
	}{
		{name: "relative against default", def: "w", path: "f", display: "w/f", key: "w/f"},
		{name: "cwd overrides default", def: "w", cwd: "real", path: "x", display: "real/x", key: "real/x"},
		{name: "cwd without default", cwd: "w", path: "sub/f", display: "w/sub/f", key: "w/sub/f"},
		{name: "absolute ignores cwd and default", def: "w", cwd: "real", path: "{root}/w/sub/f", display: "w/sub/f", key: "w/sub/f"},
		{name: "absolute without any base", path: "{root}/real/x", display: "real/x", key: "real/x"},
		{name: "absolute with link/..", cwd: "real", path: "{root}/w/lnk/../w/f", display: "=", key: "w/f"},
		{name: "dot", cwd: "w", path: ".", display: "w", key: "w"},
		{name: "dot slash", cwd: "w", path: "./sub/./f", display: "w/sub/f", key: "w/sub/f"},
		{name: "trailing slash on dir", cwd: "w", path: "sub/", display: "w/sub", key: "w/sub"},
		{name: "missing leaf", cwd: "w", path: "new", display: "w/new", key: "w/new"},
		{name: "missing intermediates", cwd: "w", path: "a/b/c", display: "w/a/b/c", key: "w/a/b/c"},
		{name: "missing leaf with trailing slash", cwd: "w", path: "new/", display: "w/new", key: "w/new"},
		{name: "symlinked file alias", cwd: "w", path: "lf", display: "w/lf", key: "w/f"},
		{name: "missing under symlinked dir", cwd: "w", path: "lnk/new", display: "w/lnk/new", key: "real/new"},
		{name: "symlinked cwd", cwd: "lw", path: "sub/f", display: "lw/sub/f", key: "w/sub/f"},
		{name: "symlinked cwd with ..", cwd: "lw", path: "../real/x", display: "=", key: "real/x"},
		{name: "cwd is a dir link, path climbs", cwd: "w/lnk", path: "../f", display: "=", key: "f"},
		{name: "link/.. inside the path", cwd: "w", path: "lnk/../w/f", display: "=", key: "w/f"},
		{name: "link/.. then missing", cwd: "w", path: "lnk/../f", display: "=", key: "f"},
		{name: "plain .. inside the path", cwd: "w", path: "sub/../f", display: "=", key: "w/f"},
		{name: "cwd spelled link/..", cwd: "w/lnk/..", path: "w/f", display: "=", key: "w/f"},
		{name: "cwd spelled link/.., dot", cwd: "w/lnk/..", path: ".", display: "=", key: "."},
		{name: "missing then .. back into the tree", cwd: "w", path: "new/../lnk/x", display: "=", key: "real/x"},
		{name: "dangling link relative", cwd: "w", path: "dang", display: "w/dang", key: "w/gone/new"},
		{name: "dangling link absolute", cwd: "w", path: "dangabs", display: "w/dangabs", key: "gone2/n"},
		{name: "dangling link, path below it", cwd: "w", path: "dang/more", display: "w/dang/more", key: "w/gone/new/more"},
		{name: "backslash is a filename byte", cwd: "w", path: `back\slash`, display: `w/back\slash`, key: `w/back\slash`},
		{name: "backslash missing", cwd: "w", path: `a\b`, display: `w/a\b`, key: `w/a\b`},
		{name: `backslash ..\x`, cwd: "w", path: `..\x`, display: "=", key: `w/..\x`},
		{name: `backslash sub\..\f`, cwd: "w", path: `sub\..\f`, display: "=", key: `w/sub\..\f`},
		{name: "backslash .. in cwd", cwd: `!{root}/w/x\..`, path: "f", display: "=", key: `w/x\../f`},
		{name: "look-alike ...", cwd: "w/lnk", path: "...", display: "w/lnk/...", key: "real/..."},
		{name: "look-alike ..foo", cwd: "w/lnk", path: "..foo/x..", display: "w/lnk/..foo/x..", key: "real/..foo/x.."},
		{name: `look-alike ...\..x`, cwd: "w/lnk", path: `...\..x`, display: `w/lnk/...\..x`, key: `real/...\..x`},
		{name: "look-alike in cwd", cwd: "!{root}/w/...", path: "f", display: "w/.../f", key: "w/.../f"},

		{name: "file used as directory", cwd: "w", path: "f/x", errno: syscall.ENOTDIR},
		{name: "trailing slash on file", cwd: "w", path: "f/", errno: syscall.ENOTDIR},
		{name: "file alias used as directory", cwd: "w", path: "lf/new", errno: syscall.ENOTDIR},
		{name: "file in cwd", cwd: "w/f", path: "x", errno: syscall.ENOTDIR},
		{name: "loop as leaf", cwd: "w", path: "loop", errno: syscall.ELOOP},
		{name: "loop as ancestor", cwd: "w", path: "loop/x/y", errno: syscall.ELOOP},
		{name: "two-link loop as ancestor", cwd: "w", path: "la/new", errno: syscall.ELOOP},
		{name: "loop in cwd", cwd: "w/la", path: "x", errno: syscall.ELOOP},

		{name: "empty path", cwd: "w", path: "", errText: `resolve "": path is blank`},
		{name: "spaces path", cwd: "w", path: "   ", errText: `resolve "   ": path is blank`},
		{name: "no base", path: "f", errText: `resolve "f": no base directory`},
		{name: "relative base", cwd: "!w", path: "f", errText: `resolve "f": base directory "w" is not absolute`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := func(s string) string {
				if s == "" {
					return ""
				}
				if raw, ok := strings.CutPrefix(s, "!"); ok {
					return strings.ReplaceAll(raw, "{root}", root)
				}
				return root + "/" + s
			}
			r := &Resolver{Default: base(tc.def)}
			path := strings.ReplaceAll(tc.path, "{root}", root)
			got, err := r.Resolve(context.Background(), path, Options{Cwd: base(tc.cwd)})
			switch {
			case tc.errText != "":
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), tc.errText), err.Error())
				assert.NotContains(t, err.Error(), "\n")
				var pe *fs.PathError
				assert.False(t, errors.As(err, &pe), "a usage error, not a walk error")
				assert.Equal(t, Target{}, got)
			case tc.errno != 0:
				var pe *fs.PathError
				require.True(t, errors.As(err, &pe), "want *fs.PathError wrapping %v, got %v", tc.errno, err)
				assert.Equal(t, "resolve", pe.Op)
				assert.Contains(t, pe.Path, path)
				assert.ErrorIs(t, err, tc.errno)
				assert.Equal(t, tc.errno, pe.Err)
				assert.Equal(t, Target{}, got)
			default:
				require.NoError(t, err)
				key := filepath.Join(root, tc.key)
				display := key
				if tc.display != "=" {
					display = filepath.Join(root, tc.display)
				}
				assert.Equal(t, Target{Display: display, Key: key}, got)
			}
		})
	}
}

// TestResolveKeyStable: the key of a missing path does not change once the
// path is created, and aliases agree on it.
func TestResolveKeyStable(t *testing.T) {
	root := tree(t)
	r := &Resolver{Default: root + "/w"}
	ctx := context.Background()
	for _, p := range []string{"a/b/c", "lnk/n/m", "sub/new/"} {
		before, err := r.Resolve(ctx, p, Options{})
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "w", p), 0o755))
		after, err := r.Resolve(ctx, p, Options{})
		require.NoError(t, err)
		assert.Equal(t, before, after, p)
	}
	viaLink, err := r.Resolve(ctx, "lf", Options{})
	require.NoError(t, err)
	direct, err := r.Resolve(ctx, "f", Options{Cwd: root + "/lw"})
	require.NoError(t, err)
	assert.Equal(t, viaLink.Key, direct.Key)
	assert.NotEqual(t, viaLink.Display, direct.Display)
}

// cancelAfter is a context that reports Canceled after n calls to Err, to
// cancel a resolution in the middle of its walk deterministically.
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

func TestResolveContext(t *testing.T) {
	root := tree(t)
	r := &Resolver{Default: root + "/w"}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := r.Resolve(ctx, "f", Options{})
	assert.Same(t, context.Canceled, err)
	assert.Equal(t, Target{}, got)

	dctx, dcancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer dcancel()
	_, err = r.Resolve(dctx, "f", Options{})
	assert.Equal(t, context.DeadlineExceeded, err)

	// Cancelled in the middle of the walk (Resolve's own check, the
	// walk's entry check, then a few components): ctx.Err(), not a
	// partial key.
	for n := 1; n < 6; n++ {
		_, err = r.Resolve(&cancelAfter{Context: context.Background(), n: n}, "sub/new", Options{})
		assert.Same(t, context.Canceled, err, "n=%d", n)
	}
	// A budget large enough for every check: the walk finishes.
	n := strings.Count(root, "/") + 10
	got, err = r.Resolve(&cancelAfter{Context: context.Background(), n: n}, "sub/new", Options{})
	require.NoError(t, err)
	assert.Equal(t, root+"/w/sub/new", got.Key)
}

func TestSessionCwd(t *testing.T) {
	root := tree(t)
	w := root + "/w"
	tests := []struct{ cwd, requested, want string }{
		{cwd: w, requested: "", want: w},
		{cwd: root + "/lw", requested: "", want: root + "/lw"}, // unchanged, even a link
		{cwd: w, requested: "/abs/x/../y/", want: "/abs/y"},    // absolute, missing: lexical
		{cwd: w, requested: w + "/lnk/..", want: root},         // absolute: physical over a link
		{cwd: w, requested: "sub", want: w + "/sub"},
		{cwd: w, requested: "sub/./", want: w + "/sub"},
		{cwd: root + "/lw", requested: "sub", want: root + "/lw/sub"}, // no "..": spelling kept
		{cwd: w, requested: "lnk", want: w + "/lnk"},
		{cwd: w, requested: "lnk/..", want: root},                // physical parent of real
		{cwd: w, requested: "lnk/../real", want: root + "/real"}, // physical
		{cwd: w + "/lnk/..", requested: "w", want: w},            // ".." in cwd
		{cwd: root + "/lw", requested: "..", want: root},         // via the key
		{cwd: w, requested: "new/../sub", want: w + "/sub"},      // missing part
		{cwd: w, requested: "lnk/new/..", want: root + "/real"},  // missing under link
		{cwd: w, requested: "f/..", want: w},                     // ENOTDIR: lexical fallback
		{cwd: w, requested: "loop/..", want: w},                  // ELOOP: lexical fallback
		{cwd: w, requested: "...", want: w + "/..."},             // look-alike
		{cwd: w, requested: `..\x`, want: w + `/..\x`},           // backslash: literal name
		{cwd: "rel", requested: "a/..", want: "rel"},             // relative cwd: lexical
		{cwd: "", requested: "a/../b", want: "b"},                //
	}
	for _, tc := range tests {
		t.Run(tc.cwd+"+"+tc.requested, func(t *testing.T) {
			assert.Equal(t, tc.want, SessionCwd(tc.cwd, tc.requested))
		})
	}
}

// TestDisplay: the display-path rule on its own (Resolve and the daemon's
// session Resolve both use it): lexical unless base or path has a ".."
// segment, then the key the caller passes.
func TestDisplay(t *testing.T) {
	const key = "/phys/key"
	for _, tc := range []struct{ base, path, want string }{
		{"/w", "f", "/w/f"},
		{"/w", "a/./b/", "/w/a/b"},
		{"/w", "/abs//x/", "/abs/x"},  // absolute: base ignored
		{"/w/..", "/abs/x", "/abs/x"}, // absolute: base's ".." ignored too
		{"/w", "/abs/../x", key},      // ".." in an absolute path
		{"/w", "link/../f", key},      // ".." in the path
		{"/w/link/..", "f", key},      // ".." in the base
		{"/w", `a\..\f`, key},         // "\" separated
		{"/w", "...", "/w/..."},       // look-alikes
		{"/w", "..foo/x..", "/w/..foo/x.."},
		{"/", "f", "/f"},
	} {
		assert.Equal(t, tc.want, Display(tc.base, tc.path, key), "Display(%q, %q)", tc.base, tc.path)
	}
}
