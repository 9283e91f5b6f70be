package identity

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapper maps the (non-existent, so never looked into) mountpoints mp ->
// phys, and refuses paths under refused with EACCES.
func mapper(t *testing.T, maps map[string]string, refused string) func(string) (string, bool, error) {
	return func(p string) (string, bool, error) {
		if refused != "" && (p == refused || strings.HasPrefix(p, refused+"/")) {
			return "", false, syscall.EACCES
		}
		if phys, ok := maps[p]; ok {
			return phys, true, nil
		}
		for mp := range maps {
			if strings.HasPrefix(p, mp+"/") {
				t.Errorf("walk looked up %s inside the mapped mount %s", p, mp)
			}
		}
		return "", false, nil
	}
}

// TestWalkerMounts: a walk through a mapped mountpoint continues in the
// physical directory it shows, never looks into the mountpoint, leaves it
// upwards by ".." as the kernel does, and keeps one link budget.
func TestWalkerMounts(t *testing.T) {
	base, err := Canonical(t.TempDir())
	require.NoError(t, err)
	root := filepath.Join(base, "root")
	mp := filepath.Join(base, "m1") // a sibling of root; never created
	hv := filepath.Join(base, "mnt", "@host", "s1")
	other := filepath.Join(base, "mnt", "s2")
	for _, d := range []string{root + "/sub/deep", base + "/mnt/@host", base + "/out"} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(root+"/f", nil, 0o644))
	links := map[string]string{
		root + "/tomp":   mp + "/sub",        // absolute text naming the mountpoint
		root + "/tohv":   hv + base + "/out", // a host-view text
		root + "/rec":    "../m1/rec",        // mutual recursion through the mountpoint
		root + "/up":     "../m1/sub/deep",   // out of the root and back in
		root + "/other":  other + "/x",
		root + "/sub/fl": "../f",
	}
	for l, text := range links {
		require.NoError(t, os.Symlink(text, l))
	}
	w := Walker{Mount: mapper(t, map[string]string{mp: root, hv: "/"}, other)}
	ctx := context.Background()
	for _, c := range []struct {
		cwd, path, want string
		errno           syscall.Errno
	}{
		{"", mp, root, 0},
		{"", mp + "/sub/..", root, 0},
		{"", mp + "/..", base, 0},                  // ".." crosses the mount upwards
		{"", mp + "/sub/../..", base, 0},           //
		{"", hv + base + "/out", base + "/out", 0}, // H + P is P
		{"", hv + "/..", base + "/mnt/@host", 0},
		{"", mp + "/tomp", root + "/sub", 0},
		{"", mp + "/tohv", base + "/out", 0},
		{"", mp + "/up", root + "/sub/deep", 0},
		{"", mp + "/rec", "", syscall.ELOOP},
		{"", root + "/rec", "", syscall.ELOOP},
		{"", mp + "/other", "", syscall.EACCES},
		{"", mp + "/f/", "", syscall.ENOTDIR}, // a trailing slash asks for a directory
		{"", mp + "/sub/fl/", "", syscall.ENOTDIR},
		{mp + "/sub", "..", root, 0},
		{mp + "/sub", "../..", base, 0},
		{mp, "new/x", root + "/new/x", 0},
		{mp, "sub/fl", root + "/f", 0},
	} {
		w.Cwd = c.cwd
		got, err := w.TargetKey(ctx, c.path)
		if c.errno != 0 {
			assert.ErrorIs(t, err, c.errno, "cwd %q path %q", c.cwd, c.path)
			continue
		}
		if assert.NoError(t, err, "cwd %q path %q", c.cwd, c.path) {
			assert.Equal(t, c.want, got, "cwd %q path %q", c.cwd, c.path)
		}
	}
}

// TestWalkerBudget: the 40-link budget is one per walk, whether links are
// met inside a mapped mount or outside it.
func TestWalkerBudget(t *testing.T) {
	base, err := Canonical(t.TempDir())
	require.NoError(t, err)
	root, mp := base+"/root", base+"/mp"
	require.NoError(t, os.MkdirAll(root, 0o755))
	// l0 -> l1 -> ... alternately spelt through the mountpoint and not.
	for i := 0; i < 45; i++ {
		text := "l" + strconv.Itoa(i+1)
		if i%2 == 0 {
			text = mp + "/" + text
		}
		require.NoError(t, os.Symlink(text, root+"/l"+strconv.Itoa(i)))
	}
	require.NoError(t, os.WriteFile(root+"/l45", nil, 0o644))
	w := Walker{Mount: mapper(t, map[string]string{mp: root}, "")}
	ctx := context.Background()
	got, err := w.Canonical(ctx, mp+"/l6")
	require.NoError(t, err)
	assert.Equal(t, root+"/l45", got) // 39 links
	_, err = w.Canonical(ctx, mp+"/l4")
	assert.ErrorIs(t, err, syscall.ELOOP) // 41 links
}

// TestWalkerLinkHook: a link is followed as the hook presents it.
func TestWalkerLinkHook(t *testing.T) {
	base, err := Canonical(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(base+"/a", 0o755))
	require.NoError(t, os.MkdirAll(base+"/b", 0o755))
	require.NoError(t, os.Symlink("a", base+"/l"))
	w := Walker{Link: func(link, text string) (string, error) {
		assert.Equal(t, base+"/l", link)
		return "b", nil
	}}
	got, err := w.Canonical(context.Background(), base+"/l")
	require.NoError(t, err)
	assert.Equal(t, base+"/b", got)
	w.Link = func(string, string) (string, error) { return "", syscall.EACCES }
	_, err = w.Canonical(context.Background(), base+"/l")
	assert.ErrorIs(t, err, syscall.EACCES)
}
