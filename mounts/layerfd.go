package mounts

// Descriptor-relative file access for diff, commit and discard
// (layerdiff.go): the daemon runs them as root on trees a session's user
// may change under it, so each works on a descriptor of the very object
// it means, reached without following a symlink.

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openRoot opens the directory dir as an O_PATH descriptor, the root of
// the descriptor walks below.
func openRoot(dir string) (int, error) {
	return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// openAt opens rel below the directory open as root (no symlink in any
// component, never above root; "" or "." is root itself) with flags.
func openAt(root int, rel string, flags int) (int, error) {
	if rel == "" || rel == "." {
		return unix.Openat(root, ".", flags|unix.O_CLOEXEC, 0)
	}
	for {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
}

// fstatFd is fstat(2).
func fstatFd(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

// procFd is the /proc/self/fd link of fd (a path to the very object).
func procFd(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// errNotRegular is openRegular's error for an object that is no regular
// file (a FIFO, a device, a socket: never opened).
var errNotRegular = errors.New("not a regular file")

// openRegular opens the regular file rel below root for reading, without
// opening anything else: the object is first opened O_PATH|O_NOFOLLOW and
// checked, then reopened through its descriptor, so a name swapped for a
// FIFO or a device never blocks or wakes a driver. It returns the file
// and its fstat; errNotRegular (with the object's stat) for another type.
func openRegular(root int, rel string) (*os.File, unix.Stat_t, error) {
	pfd, err := openAt(root, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	defer unix.Close(pfd)
	st, err := fstatFd(pfd)
	if err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, errNotRegular
	}
	fd, err := unix.Open(procFd(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), rel), st, nil
}
