package main

import (
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
