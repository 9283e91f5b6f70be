package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A relative --mountpoint given from / is joined as "/relmnt", not "//relmnt".
func TestRelativeMountpointFromSlash(t *testing.T) {
	root := tree(t, "proj/")
	t.Chdir("/")
	_, errOut, code := cli(t, "mount", "--root", root+"/proj", "--mountpoint", "wsfs-polish-no-such-dir")
	assert.Equal(t, 2, code)
	assert.Equal(t, `wsfs: mountpoint "/wsfs-polish-no-such-dir": does not exist`+"\n", errOut)
}

// A missing argument is named alone when the ones before it were given.
func TestSessionResolveMissingPath(t *testing.T) {
	_, errOut, code := cli(t, "session", "resolve", "s1")
	assert.Equal(t, 2, code)
	assert.Equal(t, "wsfs: session resolve: missing PATH\n", errOut)
	_, errOut, code = cli(t, "session", "resolve")
	assert.Equal(t, 2, code)
	assert.Equal(t, "wsfs: session resolve: missing session ID and PATH\n", errOut)
}

// No daemon at the socket: the one line says where to look.
func TestUnreachableDaemonHint(t *testing.T) {
	sock := tree(t) + "/nosock"
	_, errOut, code := cli(t, "session", "list", "--socket", sock)
	assert.Equal(t, 1, code)
	assert.Equal(t, "wsfs: wsfs daemon at "+sock+": dial unix "+sock+": connect: no such file or directory"+
		" (is `wsfs serve` running? its socket: --socket or $WSFS_SOCKET)\n", errOut)
}

// Every policy file error has one form: "policy file X: <what>".
func TestPolicyFileErrorsOneForm(t *testing.T) {
	dir := tree(t)
	for _, c := range []struct{ name, content, want string }{
		{"extra.yaml", "mode: read-only\nextra: 1\n", `line 2: unknown field "extra"`},
		{"mode.yaml", "mode: bogus\n", `mode "bogus": unknown mode (want read-only, workspace-write or full-access)`},
		{"trail.json", `{"mode": "read-only"} {}`, `trailing data after the policy object`},
		{"missing.yaml", "", "no such file or directory"},
	} {
		p := dir + "/" + c.name
		if c.name != "missing.yaml" {
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, errOut, code := cli(t, "policy", "show", "--policy", p)
		assert.Equal(t, 2, code, c.name)
		assert.Equal(t, "wsfs: policy file "+p+": "+c.want+"\n", errOut, c.name)
	}
}

// session resolve --help names every write decision it prints.
func TestResolveHelpNamesEACCES(t *testing.T) {
	out, errOut, code := cli(t, "session", "resolve", "--help")
	if code != 0 || !strings.Contains(out, `"write=EACCES (protected:git:.git/hooks)"`) || !strings.Contains(out, `"write=EROFS"`) {
		t.Fatalf("session resolve --help: %d %q %q", code, out, errOut)
	}
}
