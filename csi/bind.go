package csi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
)

// wsfsFSType is the file system type of every wsfs mount (and of a bind of
// one) in /proc/self/mountinfo.
const wsfsFSType = "fuse.wsfs"

// statDir reports whether path (followed) is a directory.
func statDir(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// canonicalTarget returns target with its parent directory resolved
// physically (the name the mount table uses), or target cleaned when the
// parent cannot be resolved.
func canonicalTarget(target string) string {
	target = filepath.Clean(target)
	if dir, err := identity.Canonical(filepath.Dir(target)); err == nil {
		return filepath.Join(dir, filepath.Base(target))
	}
	return target
}

// targetState is what is mounted at a target path.
type targetState int

const (
	targetEmpty   targetState = iota // nothing mounted
	targetServed                     // a bind of the session's live mount
	targetStale                      // a wsfs mount of another (dead or other) connection
	targetForeign                    // something that is not wsfs
)

// inspectTarget reports what is mounted at target, given the session's
// mountpoint mp (both canonical): the mount table's top mount at target
// compared by device with the session's mount.
func inspectTarget(target, mp string) (targetState, fusefs.MountEntry, error) {
	table, err := fusefs.MountTable()
	if err != nil {
		return targetEmpty, fusefs.MountEntry{}, err
	}
	e, ok := table[target]
	switch {
	case !ok:
		return targetEmpty, e, nil
	case e.FSType != wsfsFSType:
		return targetForeign, e, nil
	}
	if sm, ok := table[mp]; ok && sm.Dev == e.Dev {
		return targetServed, e, nil
	}
	return targetStale, e, nil
}

// bindTarget bind-mounts the session's mount mp at target (made when
// missing; madeTarget says so), read-only when readOnly. Only the bind is
// made read-only (a per-mount flag); the session's own mount stays
// writable, so its policy decides for every other view of it.
func bindTarget(mp, target string, readOnly bool) (madeTarget bool, err error) {
	switch isDir, err := statDir(target); {
	case errors.Is(err, unix.ENOENT):
		if err := os.Mkdir(target, 0o750); err != nil {
			return false, fmt.Errorf("target %s: %w", target, err)
		}
		madeTarget = true
	case err != nil:
		return false, fmt.Errorf("target %s: %w", target, err)
	case !isDir:
		return false, fmt.Errorf("target %s: not a directory", target)
	}
	undo := func() {
		if madeTarget {
			os.Remove(target)
		}
	}
	if err := unix.Mount(mp, target, "", unix.MS_BIND, ""); err != nil {
		undo()
		return false, fmt.Errorf("bind %s at %s: %w", mp, target, err)
	}
	if readOnly {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
		if err := unix.Mount("", target, "", flags, ""); err != nil {
			unix.Unmount(target, unix.MNT_DETACH)
			undo()
			return false, fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return madeTarget, nil
}

// unbindTarget unmounts every wsfs mount stacked at target (lazily when
// busy: the pod is gone when kubelet asks, and a leaked reference must not
// block it) and leaves anything else alone.
func unbindTarget(target string) error {
	for range 16 {
		table, err := fusefs.MountTable()
		if err != nil {
			return err
		}
		e, ok := table[target]
		if !ok {
			return nil
		}
		if e.FSType != wsfsFSType {
			return fmt.Errorf("target %s: a %s mount is there, not a wsfs one; left alone", target, e.FSType)
		}
		if err := fusefs.Unmount(target, true); err != nil {
			return err
		}
	}
	return fmt.Errorf("target %s: still mounted after 16 unmounts", target)
}

// removeTarget removes the target directory when it is empty (the CSI spec:
// the SP deletes what it created at target_path); a missing one is fine.
func removeTarget(target string) error {
	err := os.Remove(target)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("target %s: %w", target, err)
}
