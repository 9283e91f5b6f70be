package identity

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrnoText returns the C library's text of the errno err wraps (strerror,
// e.g. "no such file or directory"), so a message does not repeat the path
// an *fs.PathError already carries; err's own text when it wraps none.
func ErrnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// ErrnoName returns the symbolic name of the errno err wraps ("ELOOP"), as
// errno(3) spells it, or "errno N" for a number without a name; "" when err
// wraps no errno. A syscall.Errno is itself an error, so ErrnoName(e) names
// e.
func ErrnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	if name := unix.ErrnoName(errno); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(errno))
}
