package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// policyFixture makes a tree with a project (with .git/hooks), a read-only
// additional root, a none root and a temp area, writes a YAML policy for it
// and returns the tree's root and the policy file.
func policyFixture(t *testing.T) (root, file string) {
	root = tree(t, "proj/src/", "proj/.git/hooks/", "ro/f", "secret/", "tmp/", "elsewhere/", "proj/lout -> ../ro")
	file = filepath.Join(root, "policy.yaml")
	body := fmt.Sprintf(`mode: workspace-write
primary: %[1]s/proj
additional:
  - path: %[1]s/ro
    access: read-only
  - path: %[1]s/secret
    access: none
temp: [%[1]s/tmp]
`, root)
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))
	return root, file
}

func TestPolicyCheck(t *testing.T) {
	root, file := policyFixture(t)
	t.Chdir(root)

	out, errOut, code := cli(t, "policy", "check", "--policy", file,
		"proj/src/new.go", "proj/.git/hooks/pre-commit", "proj/lout/f", "ro/f", "secret/x", "tmp/t", "elsewhere/x")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Equal(t, ""+
		"proj/src/new.go\tallow\t-\tprimary:read-write\n"+
		"proj/.git/hooks/pre-commit\tdeny\tEACCES\tprotected:git:.git/hooks\n"+
		"proj/lout/f\tdeny\tEROFS\tadditional:read-only\n"+
		"ro/f\tdeny\tEROFS\tadditional:read-only\n"+
		"secret/x\tdeny\tEACCES\troot:none\n"+
		"tmp/t\tallow\t-\ttemp:read-write\n"+
		"elsewhere/x\tdeny\tEROFS\toutside:read-only\n", out)

	t.Run("--op read", func(t *testing.T) {
		out, _, code := cli(t, "policy", "check", "--policy", file, "--op", "read", "ro/f", "secret/x")
		assert.Equal(t, 0, code)
		assert.Equal(t, "ro/f\tallow\t-\tadditional:read-only\nsecret/x\tdeny\tEACCES\troot:none\n", out)
	})

	t.Run("--json", func(t *testing.T) {
		out, errOut, code := cli(t, "--json", "policy", "check", "--policy", file, "--op", "mkdir", "proj/lout/d", "proj/src/d")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, ""+
			`{"path":"proj/lout/d","key":"`+root+`/ro/d","op":"mkdir","allow":false,"errno":"EROFS","rule":"additional:read-only"}`+"\n"+
			`{"path":"proj/src/d","key":"`+root+`/proj/src/d","op":"mkdir","allow":true,"errno":"","rule":"primary:read-write"}`+"\n", out)
	})

	t.Run("a path that cannot be resolved fails, exit 1", func(t *testing.T) {
		out, errOut, code := cli(t, "policy", "check", "--policy", file, "ro/f/x", "proj/src/a")
		assert.Equal(t, 1, code)
		assert.Equal(t, "proj/src/a\tallow\t-\tprimary:read-write\n", out)
		assert.Equal(t, "wsfs: policy check: resolve "+root+"/ro/f/x: not a directory\n", errOut)

		out, _, code = cli(t, "--json", "policy", "check", "--policy", file, "ro/f/x")
		assert.Equal(t, 1, code)
		assert.Equal(t, `{"path":"ro/f/x","op":"write","error":{"errno":"ENOTDIR","message":"resolve `+root+`/ro/f/x: not a directory"}}`+"\n", out)
	})
}

func TestPolicyShow(t *testing.T) {
	root, file := policyFixture(t)
	out, errOut, code := cli(t, "policy", "show", "--policy", file)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, fmt.Sprintf(`mode: workspace-write
primary: %[1]s/proj
additional:
  - path: %[1]s/ro
    access: read-only
  - path: %[1]s/secret
    access: none
temp:
  - %[1]s/tmp
protected: []
`, root), out)

	out, errOut, code = cli(t, "policy", "show", "--json", "--policy", file)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, fmt.Sprintf(`{"mode":"workspace-write","primary":"%[1]s/proj","additional":[{"path":"%[1]s/ro","access":"read-only"},{"path":"%[1]s/secret","access":"none"}],"temp":["%[1]s/tmp"],"protected":[]}`+"\n", root), out)

	t.Run("canonical roots", func(t *testing.T) {
		dir := tree(t, "real/", "alias -> real")
		f := filepath.Join(dir, "p.json")
		require.NoError(t, os.WriteFile(f, []byte(`{"primary":"`+dir+`/alias","mode":"read-only","temp":[],"protected":[]}`), 0o644))
		out, errOut, code := cli(t, "--json", "policy", "show", "--policy", f)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, `{"mode":"read-only","primary":"`+dir+`/real","additional":[],"temp":[],"protected":[]}`+"\n", out)

		// The output is a policy file for the same policy, in JSON and YAML.
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		out2, _, code := cli(t, "--json", "policy", "show", "--policy", f)
		require.Equal(t, 0, code)
		assert.Equal(t, out, out2)
		out, _, code = cli(t, "policy", "show", "--policy", f)
		require.Equal(t, 0, code)
		assert.Equal(t, "mode: read-only\nprimary: "+dir+"/real\nadditional: []\ntemp: []\nprotected: []\n", out)
		yamlFile := filepath.Join(dir, "p.yaml")
		require.NoError(t, os.WriteFile(yamlFile, []byte(out), 0o644))
		out2, _, code = cli(t, "policy", "show", "--policy", yamlFile)
		require.Equal(t, 0, code)
		assert.Equal(t, out, out2)
	})

	t.Run("outside none is kept", func(t *testing.T) {
		dir := tree(t, "real/")
		f := filepath.Join(dir, "p.yaml")
		require.NoError(t, os.WriteFile(f, []byte("primary: "+dir+"/real\ntemp: []\nprotected: []\noutside: none\n"), 0o644))
		out, errOut, code := cli(t, "policy", "show", "--policy", f)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "mode: workspace-write\nprimary: "+dir+"/real\nadditional: []\ntemp: []\nprotected: []\noutside: none\n", out)
		out, errOut, code = cli(t, "--json", "policy", "show", "--policy", f)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, `{"mode":"workspace-write","primary":"`+dir+`/real","additional":[],"temp":[],"protected":[],"outside":"none"}`+"\n", out)
		// Read back: the same policy (outside still unreachable).
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		out, _, code = cli(t, "policy", "check", "--policy", f, "/etc")
		require.Equal(t, 0, code)
		assert.Equal(t, "/etc\tdeny\tEACCES\troot:none\n", out)
	})
}

func TestPolicyBadInput(t *testing.T) {
	root, file := policyFixture(t)
	write := func(name, body string) string {
		p := filepath.Join(root, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	badMode := write("mode.yaml", "mode: sideways\nprimary: "+root+"/proj\n")
	relative := write("rel.json", `{"primary":"proj"}`)
	unknownField := write("field.yaml", "primary: "+root+"/proj\ncolour: red\n")
	missing := filepath.Join(root, "nope.yaml")

	cases := []struct {
		name string
		args []string
	}{
		{"unknown op", []string{"policy", "check", "--policy", file, "--op", "zap", "x"}},
		{"missing file", []string{"policy", "show", "--policy", missing}},
		{"unknown mode", []string{"policy", "show", "--policy", badMode}},
		{"relative primary", []string{"policy", "check", "--policy", relative, "x"}},
		{"unknown field", []string{"policy", "show", "--policy", unknownField}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(t, c.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Regexp(t, `^wsfs: [^\n]+\n$`, errOut, "one line")
		})
	}

	_, errOut, _ := cli(t, "policy", "check", "--policy", file, "--op", "zap", "x")
	assert.Equal(t, `wsfs: --op "zap": unknown operation (one of read, create, mkdir, mknod, mknod-device, symlink, link, unlink, rmdir, rename, open-write, setattr, setxattr, removexattr, fallocate, copy-file-range, write)`+"\n", errOut)
	_, errOut, _ = cli(t, "policy", "show", "--policy", badMode)
	assert.Equal(t, "wsfs: policy file "+badMode+`: mode "sideways": unknown mode (want read-only, workspace-write or full-access)`+"\n", errOut)
	_, errOut, _ = cli(t, "policy", "show", "--policy", missing)
	assert.Contains(t, errOut, missing)
	_, errOut, _ = cli(t, "policy", "show", "--policy", unknownField)
	assert.Contains(t, errOut, unknownField)
	assert.Contains(t, errOut, "colour")
}
