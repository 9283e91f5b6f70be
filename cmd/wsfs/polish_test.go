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
