package fusefs

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Backing-store helpers. Every call is relative to a descriptor the node holds
// (an O_PATH fd bound to the object since lookup), so a host-side rename or a
// directory swapped for a symlink cannot redirect it (gocryptfs syscallcompat
// and libfuse passthrough_hp do the same).

// openPath opens name in dirfd as an O_PATH descriptor without following a
// final symlink; the result names the object itself, whatever it is.
func openPath(dirfd int, name string) (int, error) {
	return retryFd(func() (int, error) {
		return unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
}

// openPathStat opens name in dirfd as openPath does and fstats it; the
// descriptor is closed again when the fstat fails.
func openPathStat(dirfd int, name string) (int, syscall.Stat_t, error) {
	return statOpened(openPath(dirfd, name))
}

// statOpened fstats a descriptor just opened (fd, err from the open), and
// closes it again when the fstat fails.
func statOpened(fd int, err error) (int, syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err != nil {
		return -1, st, err
	}
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// fstat stats the object fd names (an O_PATH fd included), not following it.
func fstat(fd int, st *syscall.Stat_t) error {
	var ust unix.Stat_t
	if err := unix.Fstatat(fd, "", &ust, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	*st = statFromUnix(&ust)
	return nil
}

func statFromUnix(ust *unix.Stat_t) syscall.Stat_t {
	return syscall.Stat_t{
		Dev: ust.Dev, Ino: ust.Ino, Nlink: ust.Nlink, Mode: ust.Mode,
		Uid: ust.Uid, Gid: ust.Gid, Rdev: ust.Rdev, Size: ust.Size,
		Blksize: ust.Blksize, Blocks: ust.Blocks,
		Atim: syscall.Timespec(ust.Atim), Mtim: syscall.Timespec(ust.Mtim), Ctim: syscall.Timespec(ust.Ctim),
	}
}

// procPath is the magic link through which an O_PATH fd's object can be
// reopened or changed by calls that take no descriptor (chmod, truncate,
// xattrs): proc(5), /proc/self/fd.
func procPath(fd int) string {
	return "/proc/self/fd/" + strconv.Itoa(fd)
}

// reopen opens the object an O_PATH fd names with real access flags.
func reopen(fd int, flags int) (int, error) {
	return unix.Open(procPath(fd), flags|unix.O_CLOEXEC, 0)
}

// errno converts an error from x/sys or os into a syscall.Errno.
func toErrno(err error) syscall.Errno {
	switch e := err.(type) {
	case nil:
		return 0
	case syscall.Errno:
		return e
	case *os.PathError:
		return toErrno(e.Err)
	case *os.LinkError:
		return toErrno(e.Err)
	case *os.SyscallError:
		return toErrno(e.Err)
	}
	return syscall.EIO
}
