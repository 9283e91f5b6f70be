package mounts

// The API's socket outlives the daemon too. With a connection store the
// daemon keeps a duplicate of its listening socket there (KeepListener),
// beside an O_PATH descriptor of the socket's file, and a successor
// serves on the same socket (TakeListener) instead of making a new one:
// a client that connects while no daemon runs (a takeover, a crash) is
// queued in the socket's backlog and answered once the successor serves,
// a pause rather than ECONNREFUSED, as with systemd's socket activation.

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/transport"
)

// Store names of the kept listener and of its socket file.
const (
	listenerName     = "api.listen"
	listenerFileName = "api.listen.file"
)

// KeepListener keeps a duplicate of l, the API's listener whose socket
// file is path (made by Listen), in st, with an O_PATH descriptor of that
// file by which TakeListener knows it again; either replaces what was
// kept before.
func KeepListener(st transport.Store, l *net.UnixListener, path string) error {
	file, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	defer unix.Close(file)
	rc, err := l.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	if err := rc.Control(func(fd uintptr) { perr = st.Put(listenerName, int(fd)) }); err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("socket %s: keep: %w", path, perr)
	}
	if err := st.Put(listenerFileName, file); err != nil {
		st.Remove(listenerName)
		return fmt.Errorf("socket %s: keep: %w", path, err)
	}
	return nil
}

// TakeListener returns the API listener a previous daemon kept in st
// (KeepListener) when path is still its socket file (the same device and
// inode as the file kept beside it) and it still listens; nil when none
// was kept, or when what was kept is stale (removed from st then, with
// why). The caller then makes a new one (Listen).
func TakeListener(st transport.Store, path string) (*net.UnixListener, error) {
	fd, ok, err := transport.TakeNamed(st, listenerName)
	if err != nil || !ok {
		return nil, err
	}
	file, ok, err := transport.TakeNamed(st, listenerFileName)
	if err == nil && ok {
		defer unix.Close(file)
	}
	stale := func(why string) (*net.UnixListener, error) {
		unix.Close(fd)
		st.Remove(listenerName)
		st.Remove(listenerFileName)
		return nil, fmt.Errorf("socket %s: the kept listener is not used: %s", path, why)
	}
	switch {
	case err != nil:
		return stale(err.Error())
	case !ok:
		return stale("its socket file was not kept")
	}
	var kept, now unix.Stat_t
	if err := unix.Fstat(file, &kept); err != nil {
		return stale(err.Error())
	}
	if err := unix.Lstat(path, &now); err != nil {
		return stale(err.Error())
	}
	if kept.Dev != now.Dev || kept.Ino != now.Ino {
		return stale("another file is at the socket's path now")
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return stale("not a listening socket")
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // net.FileListener holds a duplicate
	nl, err := net.FileListener(f)
	if err != nil {
		return stale(err.Error())
	}
	l, ok := nl.(*net.UnixListener)
	if !ok {
		nl.Close()
		return stale("not a Unix socket")
	}
	l.SetUnlinkOnClose(false)
	return l, nil
}

// ForgetListener removes the kept listener from st (a full stop: no
// successor serves the socket).
func ForgetListener(st transport.Store) {
	st.Remove(listenerName)
	st.Remove(listenerFileName)
}
