package fusefs

import (
	"errors"
	"fmt"
	"os/user"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Work done for a user rather than for a request (a layer's commit or
// discard acting with a session's users' rights, mounts/layer*.go) takes
// that user's file system identity the way the server makes objects as
// their creator (owner.go): on a thread of its own, with setgroups(2),
// setfsgid(2) and setfsuid(2) on that thread only. It also gives up every
// effective capability on that thread (capset(2) is per thread, like the
// three calls above): setfsuid(2) to a nonzero uid clears the file system
// capabilities only (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
// CAP_FOWNER, CAP_FSETID...), which would leave CAP_SYS_ADMIN setting
// trusted.* attributes and CAP_MKNOD making devices. What the work does
// to files is then decided by the kernel exactly as for that user:
// permission bits, ACLs, sticky directories, the owner rules of chmod(2),
// chown(2) and utimensat(2), protected_hardlinks.

// Cred is a user's file system identity: the uid and gid the kernel checks
// permissions with, and the supplementary groups.
type Cred struct {
	Uid, Gid uint32
	Groups   []int
}

// UserCred returns uid's identity from the user database (os/user): its
// primary group and its supplementary groups; gid uid and no groups when
// the database has no entry for it (65534 is nobody:nogroup on Debian
// either way).
func UserCred(uid uint32) Cred {
	c := Cred{Uid: uid, Gid: uid}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return c
	}
	if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
		c.Gid = uint32(g)
	}
	ids, _ := u.GroupIds()
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != c.Gid {
			c.Groups = append(c.Groups, int(g))
		}
	}
	return c
}

// ErrNoIdentity is RunAs's error when it could not take the identity (a
// server that is not root; setfsuid, setgroups or capset refused): nothing
// of f ran. It is no EPERM, so that a caller never takes it for f's own
// refusal.
var ErrNoIdentity = errors.New("could not take the user's identity")

// RunAs runs f on a thread of its own with c's identity and no effective
// capability, and returns f's error. The thread gets the server's identity
// and capabilities back afterwards; one that cannot ends with f's
// goroutine (runtime.LockOSThread), so no other work ever runs with c's
// rights. Errors: f's, or "uid N: " ErrNoIdentity (errors.Is) when the
// identity could not be taken.
func RunAs(c Cred, f func() error) error {
	noID := func() error { return fmt.Errorf("uid %d: %w", c.Uid, ErrNoIdentity) }
	if !self.canSwitch {
		return noID()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var saved [2]unix.CapUserData
		if err := unix.Capget(&hdr, &saved[0]); err != nil {
			runtime.UnlockOSThread() // nothing changed
			done <- noID()
			return
		}
		err := setThreadIdentity(c.Uid, c.Gid, c.Groups)
		if err == nil {
			none := saved
			none[0].Effective, none[1].Effective = 0, 0
			err = unix.Capset(&hdr, &none[0])
		}
		if err == nil {
			err = f()
		} else {
			err = noID()
		}
		// Capabilities first: setgroups(2) needs CAP_SETGID back.
		if unix.Capset(&hdr, &saved[0]) == nil && setThreadIdentity(self.uid, self.gid, self.groups) == nil {
			runtime.UnlockOSThread()
		} // else the thread exits with this goroutine
		done <- err
	}()
	return <-done
}
