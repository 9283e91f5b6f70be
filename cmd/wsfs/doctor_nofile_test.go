package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The descriptor-limit check warns below fusefs.LowDescriptorLimit (65536),
// with the limit in the detail and how to raise it.
func TestCheckDescriptors(t *testing.T) {
	assert.Equal(t, check{Name: "descriptor limit", Status: checkOK, Detail: "1048576 descriptors"}, checkDescriptors(1048576))
	assert.Equal(t, check{Name: "descriptor limit", Status: checkOK, Detail: "65536 descriptors"}, checkDescriptors(65536))
	assert.Equal(t, check{Name: "descriptor limit", Status: checkWarn,
		Detail: "20000 descriptors: a tree with more inodes than that, walked through a mount, gets EMFILE (one descriptor per inode the kernel keeps)",
		Fix:    "raise the hard limit to >= 65536 (ulimit -Hn, systemd LimitNOFILE=, the container's nofile)"}, checkDescriptors(20000))
	assert.Equal(t, checkWarn, checkDescriptors(0).Status)
}
