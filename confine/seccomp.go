package confine

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompArch is what the filter needs to know about an architecture: its
// audit number (seccomp_data.arch) and the numbers of the system calls it
// refuses. The io_uring numbers are the same on every architecture
// (asm-generic/unistd.h); socket(2)'s differ.
type seccompArch struct {
	audit  uint32
	socket uint32
	ioctl  uint32
	// x32 is the bit that marks x32 system calls on amd64 (refused: their
	// argument layouts differ), 0 elsewhere.
	x32 uint32
}

// seccompArches are the architectures with a filter: amd64
// (arch/x86/entry/syscalls/syscall_64.tbl: socket 41) and arm64
// (include/uapi/asm-generic/unistd.h: socket 198, ioctl 29); amd64's ioctl
// is 16.
var seccompArches = map[string]seccompArch{
	"amd64": {audit: unix.AUDIT_ARCH_X86_64, socket: 41, ioctl: 16, x32: 0x40000000},
	"arm64": {audit: unix.AUDIT_ARCH_AARCH64, socket: 198, ioctl: 29},
}

// The io_uring system calls (io_uring_setup(2) and friends): seccomp cannot
// see the operations submitted through a ring, so the ring itself is refused.
const (
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427
)

// seccompFilter returns the classic BPF program for arch: system calls of
// any other architecture (i386 or x32 on amd64, arm32 on arm64) fail with
// EACCES, as does socket(AF_UNIX, …) (the daemon's socket is a way to widen
// the policy); io_uring_setup, io_uring_enter and io_uring_register fail
// with ENOSYS (as on a kernel without io_uring, so programs fall back to
// ordinary system calls); ioctl(2) TIOCSTI and TIOCLINUX fail with EPERM
// (they push input into the terminal the jail shares with its caller, who
// would run it outside: tty_ioctl(4)); everything else is allowed.
// socketpair(2) stays allowed: it cannot reach a named socket.
func seccompFilter(a seccompArch) []unix.SockFilter {
	const (
		offNr   = 0  // offsetof(struct seccomp_data, nr)
		offArch = 4  // offsetof(struct seccomp_data, arch)
		offArg0 = 16 // offsetof(struct seccomp_data, args[0]), low word (little endian)
		offArg1 = 24 // args[1], low word
	)
	eacces := unix.SECCOMP_RET_ERRNO | uint32(syscall.EACCES)
	enosys := unix.SECCOMP_RET_ERRNO | uint32(syscall.ENOSYS)
	eperm := unix.SECCOMP_RET_ERRNO | uint32(syscall.EPERM)
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}
	}
	prog := []unix.SockFilter{
		ld(offArch),
		jeq(a.audit, 1, 0),
		ret(eacces),
		ld(offNr),
	}
	if a.x32 != 0 {
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: a.x32, Jt: 0, Jf: 1},
			ret(eacces))
	}
	prog = append(prog,
		jeq(sysIoUringSetup, 3, 0),
		jeq(sysIoUringEnter, 2, 0),
		jeq(sysIoUringRegister, 1, 0),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA, K: 1},
		ret(enosys),
		jeq(a.ioctl, 0, 5),
		ld(offArg1), // ioctl's cmd is an unsigned int: the low word is all of it
		jeq(unix.TIOCSTI, 2, 0),
		jeq(unix.TIOCLINUX, 1, 0),
		ret(unix.SECCOMP_RET_ALLOW),
		ret(eperm),
		jeq(a.socket, 0, 3),
		ld(offArg0),
		jeq(unix.AF_UNIX, 0, 1),
		ret(eacces),
		ret(unix.SECCOMP_RET_ALLOW),
	)
	return prog
}

// installSeccomp installs the filter of the running architecture on every
// thread (SECCOMP_FILTER_FLAG_TSYNC); no_new_privs must be set.
func installSeccomp() error {
	a, ok := seccompArches[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no filter for %s (amd64 and arm64 have one)", runtime.GOARCH)
	}
	prog := seccompFilter(a)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}
