package identity

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrnoOf returns the errno err wraps (a syscall.Errno, whose text is the C
// library's strerror, e.g. "no such file or directory"), so that a message
// or an *fs.PathError does not repeat the path or the operation another
// wrapper already carries and callers can still match it with errors.Is;
// err itself when it wraps none.
func ErrnoOf(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// ErrnoText is ErrnoOf(err)'s text: the errno's strerror text, or err's own
// text when it wraps none.
func ErrnoText(err error) string { return ErrnoOf(err).Error() }

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
