package fusefs

import (
	"bytes"
	"fmt"
	"os"
	"strings"
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
// syscalls whatever the number of mounts (mountRoot). A missing p is no
// mount root. known is false when the kernel cannot say (a kernel before
// 6.8, another error): the caller reads the mount table instead.
func MountRootType(p string) (root bool, fstype string, known bool) {
	id, root, known := mountRoot(p)
	if !known || !root {
		return root, "", known
	}
	e, err := statmountEntry(id)
	if err != nil {
		return true, "", false
	}
	name, _, _ := strings.Cut(e.FSType, ".")
	return true, name, true
}

// mountRoot reports whether p (not followed) is a mount root, and that
// mount's unique id: statx(2) with STATX_ATTR_MOUNT_ROOT and
// STATX_MNT_ID_UNIQUE. AT_STATX_DONT_SYNC: a FUSE mount's root is answered
// from the kernel's cache, without a request to its server.
func mountRoot(p string) (id uint64, root, known bool) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC|unix.AT_NO_AUTOMOUNT,
		unix.STATX_MNT_ID_UNIQUE, &stx)
	switch {
	case err == unix.ENOENT || err == unix.ENOTDIR:
		return 0, false, true
	case err != nil, stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0, stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0:
		return 0, false, false
	}
	return stx.Mnt_id, stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, true
}

// statmount(2) request flags and the layout of struct statmount, from
// include/uapi/linux/mount.h (Linux 6.8; fs_subtype and sb_source 6.13):
// a 512-byte fixed part, then the strings, which the fixed part names by
// their offset after it.
const (
	statmountSBBasic   = 0x1   // STATMOUNT_SB_BASIC: sb_dev_major, sb_dev_minor
	statmountMntRoot   = 0x8   // STATMOUNT_MNT_ROOT
	statmountFSType    = 0x20  // STATMOUNT_FS_TYPE
	statmountFSSubtype = 0x100 // STATMOUNT_FS_SUBTYPE
	statmountSBSource  = 0x200 // STATMOUNT_SB_SOURCE

	statmountFixed = 512
	offMask        = 8
	offDevMajor    = 16
	offDevMinor    = 20
	offFSType      = 36
	offMntRoot     = 104
	offFSSubtype   = 120
	offSBSource    = 124
)

// statmountEntry returns the mount with the unique id id as MountTable
// would (statmount(2), struct mnt_id_req version 0): Dev, FSType
// ("type.subtype"), Root and Source ("none" when the kernel gives none, as
// mountinfo says). A FUSE mount without its subtype (a kernel before 6.13)
// is an error, so the caller reads the mount table.
func statmountEntry(id uint64) (MountEntry, error) {
	req := struct {
		size, spare uint32
		mntID       uint64
		param       uint64
	}{size: 24, mntID: id, param: statmountSBBasic | statmountMntRoot | statmountFSType | statmountFSSubtype | statmountSBSource}
	buf := make([]byte, statmountFixed+4096)
	_, _, e := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req)), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if e != 0 {
		return MountEntry{}, e
	}
	u32 := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&buf[off])) }
	mask := *(*uint64)(unsafe.Pointer(&buf[offMask]))
	const required = statmountSBBasic | statmountMntRoot | statmountFSType
	if mask&required != required {
		return MountEntry{}, unix.ENODATA
	}
	str := func(flag uint64, off int) string {
		if mask&flag == 0 {
			return ""
		}
		s := buf[min(statmountFixed+int(u32(off)), len(buf)):]
		if i := bytes.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return string(s)
	}
	e2 := MountEntry{
		Dev:    fmt.Sprintf("%d:%d", u32(offDevMajor), u32(offDevMinor)),
		FSType: str(statmountFSType, offFSType),
		Root:   str(statmountMntRoot, offMntRoot),
		// Without a source the kernel sets no bit; mountinfo says "none".
		Source: str(statmountSBSource, offSBSource),
	}
	if e2.Source == "" {
		e2.Source = "none"
	}
	switch sub := str(statmountFSSubtype, offFSSubtype); {
	case sub != "":
		e2.FSType += "." + sub
	case strings.HasPrefix(e2.FSType, "fuse"):
		// A FUSE mount without its subtype (a kernel before 6.13 cannot
		// give it): not enough to tell a wsfs mount.
		return MountEntry{}, unix.ENODATA
	}
	if e2.FSType == "" || e2.Root == "" {
		return MountEntry{}, unix.ENODATA
	}
	return e2, nil
}

// MountAt returns the mount at the mount point p (canonical) as MountTable
// has it, ok false when p is no mount point, in O(1) syscalls whatever the
// number of mounts (statx, then statmount at a mount root); the mount table
// is read only when the kernel cannot say. Errors: the mount table could
// not be read.
func MountAt(p string) (e MountEntry, ok bool, err error) {
	id, root, known := mountRoot(p)
	if known && !root {
		return MountEntry{}, false, nil
	}
	if known {
		if e, err := statmountEntry(id); err == nil {
			return e, true, nil
		}
	}
	table, err := MountTable()
	if err != nil {
		return MountEntry{}, false, err
	}
	e, ok = table[p]
	return e, ok, nil
}
