package fusefs

import (
	"context"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Set-user-ID and set-group-ID bits on a write (DESIGN.md, "Owners"; issue
// 20 item 16). The server writes, truncates and opens as root, which the
// backing kernel lets keep both bits (CAP_FSETID), so it negotiates
// FUSE_HANDLE_KILLPRIV_V2 and clears them itself where the kernel asks
// (a caller without CAP_FSETID): FUSE_WRITE_KILL_SUIDGID on a write,
// FUSE_OPEN_KILL_SUIDGID on an O_TRUNC open or create, FATTR_KILL_SUIDGID on
// a truncate or chown. It clears them as ext4 does
// (setattr_should_drop_suidgid, fs/attr.c): the set-user-ID bit always; the
// set-group-ID bit when the file is group-executable or the caller is
// outside the file's group (primary or supplementary group); regular files
// only. Without it the kernel's fallback (fuse_setattr) cleared the
// set-group-ID bit only with group-execute set. A write through a
// passthrough backing file, a fallocate and a copy_file_range never reach
// the server as writes: the kernel asks for the kill itself then
// (file_remove_privs on the FUSE file, with the caller's credentials),
// which reaches the server as a SETATTR that changes nothing (no FATTR_*
// bit; go-fuse shows no ATTR_KILL_*), the same request as chown(f, -1, -1)
// — which on ext4 clears the bits by the same rule. Root's empty SETATTR
// (chown -1 -1: the backing chown clears set-user-ID and a group-executable
// file's set-group-ID, as ext4 does for a caller with CAP_FSETID) and root's
// chown are left to the backing kernel; FATTR_KILL_SUIDGID comes with a
// truncate only from a caller without CAP_FSETID.

// killSuidgid clears the bits of the file behind n that a write by ctx's
// caller clears on ext4. The error is the chmod's.
func (n *node) killSuidgid(ctx context.Context) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Fstatat(n.fd(), "", &st, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return toErrno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0 {
		return 0
	}
	kill := st.Mode & unix.S_ISUID
	if st.Mode&unix.S_ISGID != 0 && (st.Mode&unix.S_IXGRP != 0 || !callerInGroup(ctx, st.Gid)) {
		kill |= unix.S_ISGID
	}
	if kill == 0 {
		return 0
	}
	defer n.xattrs.drop() // a mode change rewrites an ACL's mask
	if err := unix.Chmod(procPath(n.fd()), st.Mode&07777&^kill); err != nil {
		return toErrno(err)
	}
	return 0
}

// callerInGroup reports whether ctx's caller has gid as its group or as a
// supplementary group (read from /proc, as callerGroups does).
func callerInGroup(ctx context.Context, gid uint32) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return true
	}
	if c.Gid == gid {
		return true
	}
	return slices.Contains(procGroups(c.Pid), int(gid))
}

// killOnSetattr reports whether a SETATTR with valid (the FATTR_* bits;
// changes: those that change something) from ctx's caller asks for the bits
// to be cleared by killSuidgid: FATTR_KILL_SUIDGID, or a SETATTR that
// changes nothing, except from root (see above).
func killOnSetattr(ctx context.Context, valid, changes uint32) bool {
	c, ok := fuse.FromContext(ctx)
	root := ok && c.Uid == 0
	switch {
	case valid&fuse.FATTR_KILL_SUIDGID != 0 && valid&(fuse.FATTR_UID|fuse.FATTR_GID) == 0:
		return true // a truncate by a caller without CAP_FSETID
	case valid&fuse.FATTR_KILL_SUIDGID != 0:
		return !root // a chown: sent whoever the caller is
	case valid&changes == 0:
		return !root // a kill request or chown(-1, -1)
	}
	return false
}

// killRequested reports whether the request in ctx asks for the bits to be
// cleared (fuse.Context.KillSuidgid: a write, or an O_TRUNC open or create,
// by a caller without CAP_FSETID).
func killRequested(ctx context.Context) bool {
	fc, ok := ctx.(*fuse.Context)
	return ok && fc.KillSuidgid
}
