package confine

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/identity"
	"golang.org/x/sys/unix"
)

// The jail must not hold FUSE mounts that are not its own. bwrap's
// `--ro-bind / /` copies every mount of the caller's namespace into the
// jail's, and a FUSE connection ends only when its last mount, in any
// namespace, is gone: a copy of another session's mount in a running jail
// kept that session's server alive after `wsfs unmount` (its Server.Wait
// blocked, the daemon's `session rm` of it too) until the jail exited.
// So, as root, bwrap starts in a mount namespace of its own (the
// pre-stage below: unshare(2), every mount made private, then each FUSE
// mount the jail does not use detached) and copies that one. Detaching
// there happens before any covering, so no mount is out of reach under a
// tmpfs; and since the namespace is private, nothing propagates back to
// the host.

// nsArg marks the pre-stage's command line: BINARY nsArg CONFIG -- BWRAP
// ARGS...
const nsArg = "__wsfs-confine-ns"

// nsConfig is what the pre-stage needs, passed as JSON in one argument.
type nsConfig struct {
	// Keep are paths whose mounts (and those mounts' ancestors) stay: the
	// views' sources, the writable and read-only directories, bwrap and
	// the helper.
	Keep []string `json:"keep"`
	// Hidden are the places the jail hides (Spec.Hidden): a mount elsewhere
	// whose file system is visible inside one of them (a bind mount of a
	// none root) is detached too.
	Hidden []string `json:"hidden,omitempty"`
}

// keepPaths returns the paths whose FUSE mounts the jail uses.
func (s Spec) keepPaths(bw, helper string) []string {
	keep := viewSources(s.Views)
	keep = append(keep, s.Writable...)
	keep = append(keep, s.ReadOnly...)
	return append(keep, bw, helper)
}

// runNamespaceStage is the pre-stage: it isolates this thread's mounts
// (isolateMounts) and execs bwrap (args[0]) with args and an empty
// environment.
func runNamespaceStage(config string, args []string) int {
	var cfg nsConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "wsfs: confine: pre-stage configuration: %v\n", err)
		return ExitConfineFailed
	}
	if err := isolateMounts(cfg.Keep, cfg.Hidden); err != nil {
		fmt.Fprintf(os.Stderr, "wsfs: confine: %v\n", err)
		return ExitConfineFailed
	}
	err := syscall.Exec(args[0], args, []string{})
	fmt.Fprintf(os.Stderr, "wsfs: confine: exec %s: %v\n", args[0], err)
	return ExitConfineFailed
}

// isolateMounts moves the calling thread into a new mount namespace
// (unshare(2) CLONE_NEWNS), makes every mount in it private (so that
// nothing done here or later reaches the host, mount_namespaces(7)) and
// detaches every FUSE mount and every mount inside a hidden place that
// neither holds one of keep nor lies under one that does
// (detachForeignMounts). It locks the goroutine to its thread
// for good: the thread must exec (or the process exit) afterwards; the
// runtime ends a thread whose goroutine exits locked.
func isolateMounts(keep, hidden []string) error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the jail's mounts private: %w", err)
	}
	if err := detachForeignMounts(keep, hidden); err != nil {
		return err
	}
	return detachHiddenSources(keep, hidden)
}

// detachHiddenSources detaches every mount outside the hidden places whose
// file system is visible inside one of them through another mount
// (identity.MountSource: a bind mount of a none root elsewhere on the
// host), except the mounts holding keep: the tmpfs over a hidden place
// would not cover it. Call it only in a private namespace of the thread's
// own.
func detachHiddenSources(keep, hidden []string) error {
	if len(hidden) == 0 {
		return nil
	}
	kept := map[int]bool{}
	for _, p := range keep {
		if id, err := keptMountID(p); err == nil {
			kept[id] = true
		}
	}
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return fmt.Errorf("list the jail's mounts: %w", err)
	}
	ms := identity.ParseMountinfo(string(data))
	inHidden := func(p string) bool {
		return slices.ContainsFunc(hidden, func(h string) bool { return identity.Within(p, h) })
	}
	for _, m := range ms {
		// Never the host's /proc or /dev: bwrap uses them before it
		// mounts the jail's own there (identity.JailOwn).
		if kept[m.ID] || m.Point == "/" || inHidden(m.Point) || identity.JailOwn(m.Point) {
			continue
		}
		for _, o := range ms {
			if o.ID == m.ID || o.Dev != m.Dev {
				continue
			}
			src, ok := identity.MountSource(m.Root, o.Root, o.Point)
			if !ok || !inHidden(src) {
				continue
			}
			if err := unix.Unmount(m.Point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && err != unix.EINVAL && err != unix.ENOENT {
				return fmt.Errorf("detach the mount at %s (its source %s is hidden) from the jail: %w", m.Point, src, err)
			}
			break
		}
	}
	return nil
}

// isFUSE reports whether a mountinfo file system type is FUSE's ("fuse",
// "fuseblk", "fuse.NAME"; not "fusectl", the control file system).
func isFUSE(fstype string) bool {
	return fstype == "fuse" || fstype == "fuseblk" || strings.HasPrefix(fstype, "fuse.")
}

// mountIDAt returns the id of the mount p resolves into (statx(2)'s
// stx_mnt_id, filled by the VFS whatever the mask). It asks for no
// attribute at all and accepts cached ones (AT_STATX_DONT_SYNC), so the
// final FUSE inode sends no request to its server, and a FUSE mount of
// another user without allow_other answers too (fuse_getattr's empty-mask
// case) instead of EACCES; it triggers no automount. follow says whether a
// final symlink is followed.
func mountIDAt(p string, follow bool) (int, error) {
	flags := unix.AT_STATX_DONT_SYNC | unix.AT_NO_AUTOMOUNT
	if !follow {
		flags |= unix.AT_SYMLINK_NOFOLLOW
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, flags, 0, &stx); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: no mount id (Linux 5.8 or newer needed)", p)
	}
	return int(stx.Mnt_id), nil
}

// keptMountID returns the id of the mount the canonical path p lies in,
// walked without following any symlink (identity.OpenCanonical): a path
// swapped for a link to another session's mount keeps nothing.
func keptMountID(p string) (int, error) {
	fd, err := identity.OpenCanonical(p)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC|unix.AT_NO_AUTOMOUNT, 0, &stx); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: no mount id (Linux 5.8 or newer needed)", p)
	}
	return int(stx.Mnt_id), nil
}

// detachForeignMounts detaches (umount2(2) MNT_DETACH) every FUSE mount of
// the calling thread's mount namespace, and every mount at or inside one
// of the hidden places (a layer session's overlay under the state
// directory, a host mount inside another session's root), except the
// mounts holding the existing paths of keep and their ancestors: the jail's
// /proc/self/mountinfo then lists no mount the tmpfs over a hidden place
// would merely cover (their mountpoints and options, an overlay's lowerdir
// naming another session's root among them). umount2 reaches the topmost
// mount at a path (statx's mount id says which): a FUSE mount covered by
// mounts stacked on it (its descendants, which go with it anyway) is
// reached by detaching those first, one per round; one covered by a mount
// over a parent directory is out of reach and stays. Call it only in a
// private namespace of the thread's own (isolateMounts): an unmount in a
// namespace that shares mounts with the host propagates to it.
func detachForeignMounts(keep, hidden []string) error {
	inHidden := func(p string) bool {
		return slices.ContainsFunc(hidden, func(h string) bool { return identity.Within(p, h) })
	}
	kept := map[int]bool{}
	for _, p := range keep {
		if id, err := keptMountID(p); err == nil {
			kept[id] = true
		}
	}
	for round := 0; ; round++ {
		data, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return fmt.Errorf("list the jail's mounts: %w", err)
		}
		ms := identity.ParseMountinfo(string(data))
		parent := make(map[int]int, len(ms))
		for _, m := range ms {
			parent[m.ID] = m.Parent
		}
		// Whatever a kept mount hangs from stays too.
		keepAll := map[int]bool{}
		for id := range kept {
			for seen := 0; id != 0 && !keepAll[id] && seen < len(ms); seen++ {
				keepAll[id] = true
				id = parent[id]
			}
		}
		// Outer mounts first: detaching one takes its subtree along.
		slices.SortStableFunc(ms, func(a, b identity.Mount) int { return depth(a.Point) - depth(b.Point) })
		detached := map[int]bool{}
		under := func(id int) bool {
			for seen := 0; id != 0 && seen < len(ms); seen++ {
				if detached[id] {
					return true
				}
				id = parent[id]
			}
			return false
		}
		covered := false
		for _, m := range ms {
			if !(isFUSE(m.FSType) || inHidden(m.Point)) || keepAll[m.ID] || under(m.ID) {
				continue
			}
			top, err := mountIDAt(m.Point, false)
			if err != nil {
				continue // its path cannot be walked: out of reach
			}
			if top != m.ID {
				// Another mount lies over it at its path. One stacked on
				// it (its descendant) would go with it anyway: detach that
				// one now, this one in the next round. One over a parent
				// directory puts it out of reach.
				if !descends(parent, top, m.ID) {
					continue
				}
				covered = true
			}
			if err := unix.Unmount(m.Point, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
				return fmt.Errorf("detach the %s mount at %s from the jail: %w", m.FSType, m.Point, err)
			}
			detached[top] = true
		}
		if !covered || round == 16 {
			return nil
		}
	}
}

// descends reports whether mount id lies below mount anc in the mount tree
// parent (id → parent id).
func descends(parent map[int]int, id, anc int) bool {
	for seen := 0; id != 0 && seen <= len(parent); seen++ {
		id = parent[id]
		if id == anc {
			return true
		}
	}
	return false
}
