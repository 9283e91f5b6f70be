package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The descriptor-limit check warns below fusefs.LowDescriptorLimit (65536),
// with the limit in the detail and how to raise it, and says how many idle
// sessions the limit holds (mounts.SessionsFor).
func TestCheckDescriptors(t *testing.T) {
	assert.Equal(t, check{Name: "descriptor limit", Status: checkOK, Detail: "1048576 descriptors: room for about 349504 idle sessions in one daemon (3 descriptors each, 64 for the daemon; fewer as the kernel keeps inodes looked up)"}, checkDescriptors(1048576))
	assert.Equal(t, check{Name: "descriptor limit", Status: checkOK, Detail: "65536 descriptors: room for about 21824 idle sessions in one daemon (3 descriptors each, 64 for the daemon; fewer as the kernel keeps inodes looked up)"}, checkDescriptors(65536))
	assert.Equal(t, check{Name: "descriptor limit", Status: checkWarn,
		Detail: "20000 descriptors: a walk of a tree with more inodes than three quarters of that reopens node descriptors by file handle (slower), and an unprivileged mount gets EMFILE; room for about 6645 idle sessions in one daemon (3 descriptors each, 64 for the daemon; fewer as the kernel keeps inodes looked up)",
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

// TestAbortFile: doctor's fix for a hung mount names the fusectl file of
// its connection (the device's minor number), N only when the device is
// not known.
func TestAbortFile(t *testing.T) {
	for dev, want := range map[string]string{
		"0:57": "/sys/fs/fuse/connections/57/abort",
		"":     "/sys/fs/fuse/connections/N/abort",
		"0:":   "/sys/fs/fuse/connections/N/abort",
	} {
		if got := abortFile(dev); got != want {
			t.Errorf("abortFile(%q) = %q, want %q", dev, got, want)
		}
	}
}
