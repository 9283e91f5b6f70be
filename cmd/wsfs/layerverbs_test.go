package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/fusefs"
)

// TestLayerVerbs: `wsfs layer diff|commit|discard --layer DIR` on the layer
// of wsfs mount --layer DIR. While the mount runs they are refused (exit 1,
// the layer in use). Once it stopped: diff lists the mount's changes,
// discard undoes one in the layer (the project untouched), commit applies
// the rest through the policy of the last mount that served the layer (a
// second mount's --protect secret: the first mount's secret/x is refused,
// EACCES, left in the layer), and the project then holds exactly the
// committed change. The overlay is not left mounted.
func TestLayerVerbs(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("layers need root (overlayfs)")
	}
	root, proj, mnt, policyFile := mountFixture(t)
	layer := filepath.Join(root, "layer")
	merged := filepath.Join(layer, "merged")
	t.Cleanup(func() {
		if e, ok, _ := fusefs.MountAt(merged); ok && e.FSType == "overlay" {
			t.Errorf("the layer's overlay still mounted")
			_ = fusefs.Unmount(merged, true)
		}
	})
	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--layer", layer)
	require.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\n", m.stdout.String(), m.stderr.String())
	require.NoError(t, os.WriteFile(mnt+"/src/main.go", []byte("changed\n"), 0o644))
	require.NoError(t, os.WriteFile(mnt+"/src/new.txt", []byte("hi\n"), 0o644))
	require.NoError(t, os.Mkdir(mnt+"/secret", 0o755))
	require.NoError(t, os.WriteFile(mnt+"/secret/x", []byte("s\n"), 0o644))

	_, stderr, code := cli(t, "layer", "diff", "--layer", layer)
	assert.Equal(t, 1, code)
	assert.Equal(t, "wsfs: layer \""+layer+"\": in use by a running mount (wsfs mount --layer, or a daemon's session); stop it first: the mount keeps the layer's baseline and kernel caches, which a change from another process would leave stale\n", stderr)
	m.cancel()
	require.Equal(t, 0, m.wait(t), m.stderr.String())

	// The last mount's policy is the one a commit applies.
	m2 := startMount(t, mnt, "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--layer", layer, "--protect", "secret")
	require.Contains(t, m2.stdout.String(), "mounted ", m2.stderr.String())
	m2.cancel()
	require.Equal(t, 0, m2.wait(t), m2.stderr.String())

	out, stderr, code := cli(t, "layer", "diff", "--layer", layer, "--stat")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "A secret (dir)\nA secret/x (file)\nM src/main.go (file: content)\nA src/new.txt (file)\n", out)
	out, stderr, code = cli(t, "layer", "diff", "--layer", layer, "--json", mnt+"/src/main.go")
	require.Equal(t, 0, code, stderr)
	var d struct {
		Layer   string `json:"layer"`
		Changes []struct {
			Path, Kind, Diff string
		} `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Len(t, d.Changes, 1, out)
	assert.Equal(t, layer, d.Layer)
	assert.Equal(t, "src/main.go", d.Changes[0].Path)
	assert.Equal(t, "modified", d.Changes[0].Kind)
	assert.Contains(t, d.Changes[0].Diff, "+changed\n")

	out, stderr, code = cli(t, "layer", "discard", "--layer", layer, "src/new.txt")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "discarded src/new.txt\n", out)
	_, err := os.Lstat(proj + "/src/new.txt")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "discard made src/new.txt in the project: %v", err)

	out, stderr, code = cli(t, "layer", "commit", "--layer", layer)
	assert.Equal(t, 1, code, stderr)
	assert.Equal(t, "committed src/main.go\nrefused secret: mkdir refused by the session's policy (protected:secret, permission denied)\nrefused secret/x: below secret, which was not committed\n", out)
	b, err := os.ReadFile(proj + "/src/main.go")
	require.NoError(t, err)
	assert.Equal(t, "changed\n", string(b))
	for _, p := range []string{"src/new.txt", "secret"} {
		_, err := os.Lstat(filepath.Join(proj, p))
		assert.True(t, errors.Is(err, fs.ErrNotExist), "%s in the project after the commit: %v", p, err)
	}
	out, stderr, code = cli(t, "layer", "diff", "--layer", layer, "--stat")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "A secret (dir)\nA secret/x (file)\n", out, "what the commit left in the layer")
}

// TestLayerVerbsBadInput: each refusal of the layer verbs and of wsfs
// mount --layer names the input and the rule (exit 2): --layer missing or
// relative, a directory that is no layer, a daemon session's layer (no
// mount policy), a path outside the project and the mountpoint, and a
// layer made for another project given to wsfs mount with another root.
func TestLayerVerbsBadInput(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("layers need root (overlayfs)")
	}
	root, proj, mnt, policyFile := mountFixture(t)
	layer := filepath.Join(root, "layer")
	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--layer", layer)
	require.Contains(t, m.stdout.String(), "mounted ", m.stderr.String())
	m.cancel()
	require.Equal(t, 0, m.wait(t), m.stderr.String())
	other := filepath.Join(root, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	daemonLayer := filepath.Join(root, "dl")
	require.NoError(t, os.MkdirAll(filepath.Join(daemonLayer, "upper"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(daemonLayer, "layer.json"), []byte(`{"version":1,"lower":"`+proj+`"}`), 0o600))

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"layer", "diff"}, "wsfs: --layer: required (the directory wsfs mount --layer was given)\n"},
		{[]string{"layer", "commit", "--layer", "rel"}, "wsfs: layer \"rel\": must be an absolute path\n"},
		{[]string{"layer", "discard", "--layer", other}, "wsfs: layer \"" + other + "\": no layer.json: not a layer directory (wsfs mount --layer DIR makes one)\n"},
		{[]string{"layer", "commit", "--layer", daemonLayer}, "wsfs: layer \"" + daemonLayer + "\": a daemon session's layer (no mount policy recorded): use wsfs session diff, commit or discard with its session\n"},
		{[]string{"layer", "diff", "--layer", layer, "/etc"}, "wsfs: layer \"" + layer + "\": path \"/etc\": outside the root " + proj + " and the mountpoint " + mnt + "\n"},
		{[]string{"mount", "--root", other, "--mountpoint", mnt, "--layer", layer}, "wsfs: --layer \"" + layer + "\": made for the project " + proj + ", not " + other + "\n"},
	} {
		out, stderr, code := cli(t, c.args...)
		assert.Equal(t, 2, code, "%v: %s %s", c.args, out, stderr)
		assert.Equal(t, c.want, stderr, "%v", c.args)
	}
	e, ok, _ := fusefs.MountAt(filepath.Join(layer, "merged"))
	assert.False(t, ok && e.FSType == "overlay", "the overlay left mounted after a refusal")
}
