package fusefs

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// MountEntry is one mount of /proc/self/mountinfo (proc(5)), as MountTable
// reports it.
type MountEntry struct {
	// Dev is the mount's device, "MAJOR:MINOR".
	Dev string
	// FSType is the file system type ("fuse.wsfs" for a wsfs mount).
	FSType string
	// Root is the directory of the file system shown at the mount point
	// ("/" unless a bind mount shows a subdirectory).
	Root string
	// Source is the mount source: the served root for a session mount,
	// HostViewSource for a host view.
	Source string
}

// MountTable returns the mounts of this mount namespace by mount point, from
// /proc/self/mountinfo (octal escapes decoded). Of several mounts stacked on
// one point, the last (the visible one) wins.
func MountTable() (map[string]MountEntry, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(string(data)), nil
}

// parseMountinfo is MountTable's parser of the text of a mountinfo file
// (identity.ParseMountinfo).
func parseMountinfo(data string) map[string]MountEntry {
	set := make(map[string]MountEntry)
	for _, m := range identity.ParseMountinfo(data) {
		set[m.Point] = MountEntry{Dev: m.Dev, FSType: m.FSType, Root: m.Root, Source: m.Source}
	}
	return set
}

// MountRootType reports whether the path p (a symlink there not followed)
// is the root of a mount, and if so the file system type of that mount
// (the type's name without subtype: "fuse" for "fuse.wsfs"), in O(1)
// syscalls whatever the number of mounts: statx(2) with
// STATX_ATTR_MOUNT_ROOT and STATX_MNT_ID_UNIQUE, then statmount(2)
// STATMOUNT_FS_TYPE (Linux 6.8). A missing p is no mount root. known is
// false when the kernel cannot say (an older kernel, another error): the
// caller reads the mount table instead. AT_STATX_DONT_SYNC: a FUSE mount's
// root is answered from the kernel's cache, without a request to its
// server.
func MountRootType(p string) (root bool, fstype string, known bool) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC|unix.AT_NO_AUTOMOUNT,
		unix.STATX_MNT_ID_UNIQUE, &stx)
	switch {
	case err == unix.ENOENT || err == unix.ENOTDIR:
		return false, "", true
	case err != nil, stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0, stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0:
		return false, "", false
	case stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0:
		return false, "", true
	}
	fstype, err = statmountFSType(stx.Mnt_id)
	if err != nil {
		return true, "", false
	}
	return true, fstype, true
}

// statmountFSType returns the file system type of the mount with the unique
// id id (statmount(2), STATMOUNT_FS_TYPE; struct mnt_id_req version 0 and
// struct statmount of include/uapi/linux/mount.h: the strings follow the
// 512-byte fixed part, fs_type is their offset at byte 36, the returned
// mask at byte 8).
func statmountFSType(id uint64) (string, error) {
	const (
		statmountFSTypeFlag = 0x20 // STATMOUNT_FS_TYPE
		fixedSize           = 512
	)
	req := struct {
		size, spare uint32
		mntID       uint64
		param       uint64
	}{size: 24, mntID: id, param: statmountFSTypeFlag}
	buf := make([]byte, fixedSize+256)
	_, _, e := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if e != 0 {
		return "", e
	}
	if mask := *(*uint64)(unsafe.Pointer(&buf[8])); mask&statmountFSTypeFlag == 0 {
		return "", unix.ENODATA
	}
	off := int(*(*uint32)(unsafe.Pointer(&buf[36])))
	s := buf[min(fixedSize+off, len(buf)):]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if len(s) == 0 {
		return "", unix.ENODATA
	}
	return string(s), nil
}

// MountAt returns the mount at the mount point p (canonical) as MountTable
// has it, ok false when p is no mount point. The mount table is read only
// when p is a mount root or the kernel cannot say (MountRootType): asking
// about a directory that is not a mount point costs one statx(2), not a
// read of every mount. Errors: the mount table could not be read.
func MountAt(p string) (e MountEntry, ok bool, err error) {
	if root, _, known := MountRootType(p); known && !root {
		return MountEntry{}, false, nil
	}
	table, err := MountTable()
	if err != nil {
		return MountEntry{}, false, err
	}
	e, ok = table[p]
	return e, ok, nil
}
