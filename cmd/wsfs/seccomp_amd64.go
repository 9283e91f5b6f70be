package main

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// denyUnixSockets installs a seccomp filter (seccomp(2), every thread via
// SECCOMP_FILTER_FLAG_TSYNC) under which socket(AF_UNIX, …) fails with
// EACCES, as do x32 and non-x86-64 system calls (their numbers or argument
// layouts differ, so the check could be bypassed through them).
// socketpair(2) stays allowed: it cannot reach a named socket.
//
// Landlock before ABI 9 (LANDLOCK_ACCESS_FS_RESOLVE_UNIX) does not restrict
// connect(2) to a named Unix socket; without this a confined process could
// talk to the wsfs daemon's socket and widen its own policy.
func denyUnixSockets() error {
	const (
		offNr   = 0  // offsetof(struct seccomp_data, nr)
		offArch = 4  // offsetof(struct seccomp_data, arch)
		offArg0 = 16 // offsetof(struct seccomp_data, args[0]), low word (little endian)
		x32Bit  = 0x40000000
	)
	deny := unix.SECCOMP_RET_ERRNO | uint32(syscall.EACCES)
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArch},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: unix.AUDIT_ARCH_X86_64},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offNr},
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: x32Bit},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.SYS_SOCKET},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: offArg0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.AF_UNIX},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}
