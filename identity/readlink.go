package identity

import "golang.org/x/sys/unix"

// ReadlinkAt returns the whole text of the symlink name relative to the
// directory descriptor dirfd (readlinkat(2)): unix.AT_FDCWD for a path, or
// an O_PATH descriptor of the link itself with name "" (Linux >= 2.6.39).
// The buffer grows until the text fits, since a link text can be up to
// PATH_MAX bytes, or more on some file systems. Errors are readlinkat's
// errnos (EINVAL when it is not a symlink, ENOENT, EACCES, ...), unwrapped.
func ReadlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// OpenCanonical opens the canonical absolute path path as an O_PATH
// descriptor (close-on-exec) with openat2(2) RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS: a symlink in any component, the last included,
// fails with ELOOP (a canonical path has none; one now means a swap).
// Errors are openat2's (ENOENT, ENOTDIR, ELOOP, EACCES, ENOSYS before
// Linux 5.6).
func OpenCanonical(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}
