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
		Detail: "20000 descriptors: a walk of a tree with more inodes than three quarters of that reopens node descriptors by file handle (slower); an unprivileged mount gets EMFILE",
		Fix:    "raise the hard limit to >= 65536 (ulimit -Hn, systemd LimitNOFILE=, the container's nofile)"}, checkDescriptors(20000))
	assert.Equal(t, checkWarn, checkDescriptors(0).Status)
}

func TestCheckTransport(t *testing.T) {
	assert.Equal(t, check{Name: "fuse transport", Status: checkOK,
		Detail: "io-uring: new mounts are served over FUSE over io_uring (enable_uring=Y; --fuse-transport dev opts out)"}, checkTransport(true, true))
	assert.Equal(t, check{Name: "fuse transport", Status: checkWarn,
		Detail: "/dev/fuse: FUSE over io_uring is built but off (enable_uring=N)",
		Fix:    "echo 1 > /sys/module/fuse/parameters/enable_uring (new mounts), and `options fuse enable_uring=1` in /etc/modprobe.d/fuse.conf (at boot); wsfs never changes it itself"}, checkTransport(true, false))
	assert.Equal(t, check{Name: "fuse transport", Status: checkWarn,
		Detail: "/dev/fuse: the kernel has no FUSE over io_uring (/sys/module/fuse/parameters/enable_uring is missing)",
		Fix:    "Linux 6.14+ built with CONFIG_FUSE_IO_URING serves over per-CPU rings"}, checkTransport(false, false))
}
