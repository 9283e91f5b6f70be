package fusefs

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Objects created through the mount belong to their creator (DESIGN.md,
// "Owners"): the FUSE request's uid and gid, a setgid parent giving its
// group (and its setgid bit to subdirectories), the setgid bit of a new
// file kept only when the creator is in the file's group. The server gets
// all of that from the backing kernel itself, by making the object with the
// calling thread's filesystem identity switched to the caller's
// (setfsuid(2), setfsgid(2), and the supplementary groups the kernel
// consults), as libfuse's passthrough_hp can. Why this and not a chown of
// the new object afterwards:
//
//   - race-free: the object is the caller's from the moment its name
//     exists; a chown afterwards leaves a window in which it is the
//     server's (and a fifo, socket, device or directory has no descriptor to
//     chown before it has a name; O_TMPFILE+linkat covers regular files
//     only, and not on every file system);
//   - exact: the kernel's own inode_init_owner and mode_strip_sgid rules
//     apply, where a chown would have to re-implement them (and a chown by
//     root clears the setuid and setgid bits the creator asked for:
//     chown(2));
//   - cheap: three or four system calls that only swap the thread's
//     credentials, and none at all when the caller is the server's own
//     user (every request of a single-user mount, and root's).
//
// The identity is per thread: the raw setfsuid, setfsgid and setgroups
// system calls act on the calling thread only (Go's syscall.Setgroups acts
// on all threads; setfsuid(2) and setfsgid(2) return the previous id and
// never an error, so they are called raw and their effect read back). The switch runs on a goroutine locked to its
// thread; a thread whose identity could not be restored ends with that
// goroutine (runtime.LockOSThread), so no other work ever runs on it. The
// kernel has already checked the caller's access with default_permissions;
// the backing kernel checks it again with the same identity.
//
// A server that is not root cannot take another identity: objects are then
// its own user's, as with any FUSE file system run by an ordinary user.

// serverIdentity is who the server is, read once per process.
type serverIdentity struct {
	uid, gid  uint32
	groups    []int // supplementary groups, restored after each switch
	canSwitch bool  // root: CAP_SETUID and CAP_SETGID
}

var self = func() serverIdentity {
	groups, _ := unix.Getgroups()
	return serverIdentity{
		uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()),
		groups: groups, canSwitch: os.Geteuid() == 0,
	}
}()

// asCaller runs create, which makes one object in the directory dirfd,
// with the FUSE caller's filesystem identity when it differs from the
// server's, and with the process umask umask when not 0 (the caller's,
// FUSE_DONT_MASK: mount.umask). create is passed the mode bits it must
// clear itself (the umask where no thread could take it, else 0). The
// errors are create's, or EPERM when the identity could not be taken.
func asCaller(ctx context.Context, dirfd int, umask uint32, create func(mask uint32) error) error {
	c, ok := fuse.FromContext(ctx)
	if !ok || !self.canSwitch || (c.Uid == self.uid && c.Gid == self.gid) {
		if umask == 0 {
			return create(0)
		}
		return withUmask(umask, nil, nil, create)
	}
	groups, all := callerGroups(dirfd, c)
	err := createAs(c, groups, umask, create)
	if err == syscall.EACCES && !all {
		// An ACL entry for a supplementary group (FUSE_POSIX_ACL: the
		// kernel has checked it with all of the caller's groups).
		if groups = procGroups(c.Pid); len(groups) > 0 {
			err = createAs(c, groups, umask, create)
		}
	}
	return err
}

// createAs runs create on a thread with c's fsuid and fsgid and the
// supplementary groups (and the umask, when not 0).
func createAs(c *fuse.Caller, groups []int, umask uint32, create func(mask uint32) error) error {
	if umask != 0 {
		return withUmask(umask, c, groups, create)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := setThreadIdentity(c.Uid, c.Gid, groups)
		if err == nil {
			err = create(0)
		}
		if setThreadIdentity(self.uid, self.gid, self.groups) == nil {
			runtime.UnlockOSThread()
		} // else the thread exits with this goroutine
		done <- err
	}()
	return <-done
}

// callerGroups returns the supplementary groups the backing kernel needs to
// decide a create in dirfd as the caller would be decided natively: write
// and search access through the directory's group, and whether a new
// object's setgid bit survives (inode_init_owner, in_group_p on the
// directory's group). When the directory's group is the caller's own, none
// are needed (all is false: asCaller reads them after an EACCES, which only
// an ACL entry naming another group can cause); otherwise the caller's
// groups are read from /proc, as libfuse's fuse_req_getgroups does (FUSE
// sends none, and go-fuse does not expose FUSE_CREATE_SUPP_GROUP's one).
func callerGroups(dirfd int, c *fuse.Caller) (groups []int, all bool) {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, "", &st, unix.AT_EMPTY_PATH) != nil || st.Gid == c.Gid {
		return nil, false
	}
	return procGroups(c.Pid), true
}

// procGroups returns the supplementary groups of process pid (a thread id
// works too); none when it is gone.
func procGroups(pid uint32) []int {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	return parseGroups(b)
}

// parseGroups returns the numbers on the "Groups:" line of a
// /proc/PID/status text (proc(5)).
func parseGroups(status []byte) []int {
	i := bytes.Index(status, []byte("\nGroups:"))
	if i < 0 {
		return nil
	}
	line := status[i+len("\nGroups:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var groups []int
	for _, f := range bytes.Fields(line) {
		if g, err := strconv.ParseUint(string(f), 10, 32); err == nil {
			groups = append(groups, int(g))
		}
	}
	return groups
}

// setThreadIdentity sets this thread's supplementary groups, fsgid and
// fsuid, in the order that keeps the privilege each step needs. setfsuid
// and setfsgid report no error: the result is read back.
func setThreadIdentity(uid, gid uint32, groups []int) error {
	if err := unix.Setgroups(groups); err != nil { // raw syscall: this thread only
		return err
	}
	if !setfsid(unix.SYS_SETFSGID, gid) || !setfsid(unix.SYS_SETFSUID, uid) {
		return syscall.EPERM
	}
	return nil
}

// setfsid calls setfsuid(2) or setfsgid(2) (nr) with id and reports whether
// the thread's id is id afterwards (an invalid id, -1, changes nothing and
// returns the current one).
func setfsid(nr uintptr, id uint32) bool {
	unix.RawSyscall(nr, uintptr(id), 0, 0)
	cur, _, _ := unix.RawSyscall(nr, uintptr(^uint32(0)), 0, 0)
	return uint32(cur) == id
}
