package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
)

// cli runs the wsfs command line args and returns its stdout, stderr and
// exit code.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runWith(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// tree makes a directory tree in a fresh temp dir and returns its canonical
// path. Entries: "d/" a directory, "f" an empty file, "l -> target" a symlink.
func tree(t *testing.T, entries ...string) string {
	t.Helper()
	root, err := identity.Canonical(t.TempDir())
	require.NoError(t, err)
	for _, e := range entries {
		switch {
		case strings.Contains(e, " -> "):
			name, target, _ := strings.Cut(e, " -> ")
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
			require.NoError(t, os.Symlink(target, filepath.Join(root, name)))
		case strings.HasSuffix(e, "/"):
			require.NoError(t, os.MkdirAll(filepath.Join(root, e), 0o755))
		default:
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, e)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, e), nil, 0o644))
		}
	}
	return root
}

// jsonLines decodes each line of s as a JSON object.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "line %q", line)
		out = append(out, m)
	}
	return out
}

// TestVersionOf: an unstamped build reports what the go command recorded.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	for _, tc := range []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"v0.2.0", vcs, "v0.2.0"},
		{"v0.2.1-0.20261130220000-0123456789ab+dirty", nil, "v0.2.1-0.20261130220000-0123456789ab+dirty"},
		{"(devel)", vcs, "dev+0123456789ab"},
		{"", append(vcs, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "dev+0123456789ab-dirty"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "dev+abc"},
		{"(devel)", nil, "dev"},
		{"", nil, "dev"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/wsfs/wsfs", Version: tc.main}, Settings: tc.settings}
		assert.Equal(t, tc.want, versionOf(bi), "%+v", tc)
	}
}

func TestVersion(t *testing.T) {
	out, errOut, code := cli(t, "version")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.Equal(t, fmt.Sprintf("wsfs dev (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH), out)

	out, errOut, code = cli(t, "version", "--json")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.Equal(t, fmt.Sprintf(`{"version":"dev","go":%q,"os":%q,"arch":%q}`+"\n", runtime.Version(), runtime.GOOS, runtime.GOARCH), out)

	_, errOut, code = cli(t, "version", "extra")
	assert.Equal(t, 2, code)
	assert.Equal(t, "wsfs: version: unexpected argument \"extra\"\n", errOut)
}

func TestResolve(t *testing.T) {
	root := tree(t,
		"a/b/f",
		"a/c/",
		"lf -> a/b/f",
		"ld -> a/b",
		"dangling -> a/missing/new",
		"loop -> loop",
		"self/x -> ../self/x",
	)
	require.NoError(t, os.Symlink(filepath.Join(root, "a/c"), filepath.Join(root, "abs")))

	cases := []struct {
		name, path, display, key string
	}{
		{"relative file", "a/b/f", root + "/a/b/f", root + "/a/b/f"},
		{"absolute ignores cwd", "/", "/", "/"},
		{"symlinked file alias", "lf", root + "/lf", root + "/a/b/f"},
		{"link/.. is the target's parent", "ld/..", root + "/a", root + "/a"},
		{"absolute link", "abs/new", root + "/abs/new", root + "/a/c/new"},
		{"missing intermediates", "a/x/y/z", root + "/a/x/y/z", root + "/a/x/y/z"},
		{"dangling link keys its target", "dangling", root + "/dangling", root + "/a/missing/new"},
		{"dot", ".", root, root},
		{"trailing slash", "a/c/", root + "/a/c", root + "/a/c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(t, "resolve", "--cwd", root, c.path)
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut)
			assert.Equal(t, c.display+"\t"+c.key+"\n", out)

			out, errOut, code = cli(t, "--json", "resolve", "--cwd", root, c.path)
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut)
			want, _ := json.Marshal(map[string]string{"path": c.path, "cwd": root, "display": c.display, "key": c.key})
			assert.JSONEq(t, string(want), out)
		})
	}

	t.Run("several paths in order", func(t *testing.T) {
		out, _, code := cli(t, "resolve", "--cwd", root, "lf", "ld/..", "a/c")
		assert.Equal(t, 0, code)
		assert.Equal(t, root+"/lf\t"+root+"/a/b/f\n"+root+"/a\t"+root+"/a\n"+root+"/a/c\t"+root+"/a/c\n", out)
	})

	t.Run("default base is the working directory", func(t *testing.T) {
		// t.Chdir sets $PWD, which os.Getwd returns: the display keeps the
		// logical spelling, the key is physical; ".." is physical in both.
		t.Chdir(filepath.Join(root, "ld"))
		out, _, code := cli(t, "resolve", "f", "..")
		assert.Equal(t, 0, code)
		assert.Equal(t, root+"/ld/f\t"+root+"/a/b/f\n"+root+"/a\t"+root+"/a\n", out)
	})

	t.Run("relative --cwd with .. walks physically", func(t *testing.T) {
		t.Chdir(root)
		out, _, code := cli(t, "--json", "resolve", "--cwd", "ld/..", "c")
		assert.Equal(t, 0, code)
		assert.JSONEq(t, fmt.Sprintf(`{"path":"c","cwd":%q,"display":%q,"key":%q}`, root+"/ld/..", root+"/a/c", root+"/a/c"), out)
	})

	t.Run("ELOOP fails the path, the others print, exit 1", func(t *testing.T) {
		out, errOut, code := cli(t, "resolve", "--cwd", root, "lf", "loop/x", "a/c")
		assert.Equal(t, 1, code)
		assert.Equal(t, root+"/lf\t"+root+"/a/b/f\n"+root+"/a/c\t"+root+"/a/c\n", out)
		assert.Equal(t, "wsfs: resolve "+root+"/loop/x: too many levels of symbolic links\n", errOut)

		out, errOut, code = cli(t, "resolve", "--json", "--cwd", root, "self/x", "lf")
		assert.Equal(t, 1, code)
		assert.Empty(t, errOut)
		lines := jsonLines(t, out)
		require.Len(t, lines, 2)
		assert.Equal(t, map[string]any{
			"path": "self/x", "cwd": root,
			"error": map[string]any{"errno": "ELOOP", "message": "resolve " + root + "/self/x: too many levels of symbolic links"},
		}, lines[0])
		assert.Equal(t, map[string]any{"path": "lf", "cwd": root, "display": root + "/lf", "key": root + "/a/b/f"}, lines[1])
	})

	t.Run("file used as a directory is ENOTDIR", func(t *testing.T) {
		out, _, code := cli(t, "--json", "resolve", "--cwd", root, "a/b/f/x")
		assert.Equal(t, 1, code)
		assert.Equal(t, "ENOTDIR", jsonLines(t, out)[0]["error"].(map[string]any)["errno"])
	})
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no arguments", nil, ""},
		{"unknown command", []string{"bogus"}, `unknown command "bogus" for "wsfs"`},
		{"unknown flag", []string{"resolve", "--bogus", "x"}, "unknown flag: --bogus"},
		{"resolve without paths", []string{"resolve"}, "resolve: missing PATH argument"},
		{"resolve blank path", []string{"resolve", "a", ""}, "resolve: PATH argument 2 is blank"},
		{"policy without subcommand", []string{"policy"}, "policy: missing subcommand (check or show)"},
		{"policy check without --policy", []string{"policy", "check", "x"}, "--policy: missing FILE"},
		{"policy check without paths", []string{"policy", "check", "--policy", "p.yaml"}, "policy check: missing PATH argument"},
		{"policy show with an argument", []string{"policy", "show", "x"}, `policy show: unexpected argument "x"`},
		{"unmount without mountpoint", []string{"unmount"}, "unmount: missing MOUNTPOINT argument"},
		{"unmount with two mountpoints", []string{"unmount", "a", "b"}, `unmount: unexpected argument "b"`},
		{"mount without --root", []string{"mount", "--mountpoint", "/mnt"}, "--root: missing DIR"},
		{"mount bad duration", []string{"mount", "--attr-timeout", "soon"}, `invalid argument "soon" for "--attr-timeout" flag: time: invalid duration "soon"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(t, c.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			if c.msg == "" {
				assert.Contains(t, errOut, "Usage:")
				return
			}
			assert.Equal(t, "wsfs: "+c.msg+"\n", errOut)
		})
	}

	t.Run("--json also prints the error object on stdout", func(t *testing.T) {
		out, errOut, code := cli(t, "--json", "resolve", "--bogus")
		assert.Equal(t, 2, code)
		assert.Equal(t, "wsfs: unknown flag: --bogus\n", errOut)
		assert.Equal(t, `{"error":{"code":"invalid","message":"unknown flag: --bogus"}}`+"\n", out)

		out, errOut, code = cli(t, "resolve", "--json")
		assert.Equal(t, 2, code)
		assert.Equal(t, "wsfs: resolve: missing PATH argument\n", errOut)
		assert.Equal(t, `{"error":{"code":"invalid","message":"resolve: missing PATH argument"}}`+"\n", out)
	})

	t.Run("help is not an error", func(t *testing.T) {
		out, _, code := cli(t, "resolve", "--help")
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "wsfs resolve [--cwd DIR] PATH...")
	})
}

func TestErrorClasses(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code string
		exit int
	}{
		{"usage", errUsage("--x %q: bad", "y"), "invalid", 2},
		{"wrapped usage", fmt.Errorf("context: %w", errUsage("bad")), "invalid", 2},
		{"mounts invalid", &mounts.Error{Code: mounts.CodeInvalid, Message: "id: bad"}, "invalid", 2},
		{"mounts not found", &mounts.Error{Code: mounts.CodeNotFound, Message: "session x: not found"}, "not_found", 1},
		{"busy", fmt.Errorf("unmount: %w", &fusefs.BusyError{Mountpoint: "/m"}), "busy", 1},
		{"plain", errors.New("boom"), "internal", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.code, errorCode(c.err))
			assert.Equal(t, c.exit, exitCode(c.err))
		})
	}
	assert.Equal(t, "first line", firstLine("\n  first line\nsecond\n"))
}
