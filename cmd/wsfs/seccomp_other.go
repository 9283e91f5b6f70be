//go:build !amd64

package main

import "errors"

// denyUnixSockets is only implemented for amd64; elsewhere a kernel with
// Landlock ABI 9 (LANDLOCK_ACCESS_FS_RESOLVE_UNIX) is needed for --confine.
func denyUnixSockets() error {
	return errors.New("no seccomp filter for this architecture; Landlock ABI 9 (Linux with LANDLOCK_ACCESS_FS_RESOLVE_UNIX) is needed")
}
