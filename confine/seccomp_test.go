package confine

import (
	"encoding/binary"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// runBPF interprets the classic BPF subset seccompFilter uses (LD W ABS,
// JEQ/JGE K, JA, RET K) over a struct seccomp_data.
func runBPF(t *testing.T, prog []unix.SockFilter, arch, nr, arg0 uint32) uint32 {
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	binary.LittleEndian.PutUint32(data[16:], arg0)
	binary.LittleEndian.PutUint32(data[24:], arg0) // args[1]: the tests pass one argument for both
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			if acc >= in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("pc %d: unexpected instruction %#x", pc, in.Code)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

// TestSeccompFilterArches checks the amd64 and arm64 filters by
// interpretation: io_uring ENOSYS, socket(AF_UNIX) EACCES, socket(AF_INET)
// and others allowed, other architectures (and x32) EACCES.
func TestSeccompFilterArches(t *testing.T) {
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	eacces := unix.SECCOMP_RET_ERRNO | uint32(syscall.EACCES)
	enosys := unix.SECCOMP_RET_ERRNO | uint32(syscall.ENOSYS)
	eperm := unix.SECCOMP_RET_ERRNO | uint32(syscall.EPERM)
	for name, a := range seccompArches {
		prog := seccompFilter(a)
		for _, c := range []struct {
			what          string
			arch, nr, arg uint32
			want          uint32
		}{
			{"io_uring_setup", a.audit, 425, 0, enosys},
			{"io_uring_enter", a.audit, 426, 0, enosys},
			{"io_uring_register", a.audit, 427, 0, enosys},
			{"socket(AF_UNIX)", a.audit, a.socket, unix.AF_UNIX, eacces},
			{"socket(AF_INET)", a.audit, a.socket, unix.AF_INET, allow},
			{"read", a.audit, 0, unix.AF_UNIX, allow},
			{"openat (56 on arm64, 257 on amd64)", a.audit, 257, 0, allow},
			{"another architecture", unix.AUDIT_ARCH_I386, 1, 0, eacces},
			{"ioctl(TIOCSTI)", a.audit, a.ioctl, unix.TIOCSTI, eperm},
			{"ioctl(TIOCLINUX)", a.audit, a.ioctl, unix.TIOCLINUX, eperm},
			{"ioctl(TCGETS)", a.audit, a.ioctl, unix.TCGETS, allow},
			{"ioctl(fd, 41 = socket's number)", a.audit, a.ioctl, 41, allow},
		} {
			if got := runBPF(t, prog, c.arch, c.nr, c.arg); got != c.want {
				t.Errorf("%s: %s: %#x, want %#x", name, c.what, got, c.want)
			}
		}
		if a.x32 != 0 {
			if got := runBPF(t, prog, a.audit, a.x32|41, unix.AF_UNIX); got != eacces {
				t.Errorf("%s: x32 socket: %#x, want EACCES", name, got)
			}
		}
	}
	if seccompArches["amd64"].socket != 41 || seccompArches["arm64"].socket != 198 {
		t.Error("socket(2) numbers: want 41 on amd64, 198 on arm64")
	}
	if seccompArches["amd64"].ioctl != 16 || seccompArches["arm64"].ioctl != 29 {
		t.Error("ioctl(2) numbers: want 16 on amd64, 29 on arm64")
	}
	if _, ok := seccompArches["amd64"]; !ok || unix.SYS_IO_URING_SETUP != sysIoUringSetup {
		t.Errorf("io_uring_setup is %d here, want %d", unix.SYS_IO_URING_SETUP, sysIoUringSetup)
	}
}
