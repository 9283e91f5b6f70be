package mounts

// Where a session may be: its root and mountpoint against the daemon's own
// files and the other sessions, and the root's identity over time.

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
)

// relation names how path a lies relative to path b (both clean, absolute):
// "is", "is inside", "contains", or "" when they are apart.
func relation(a, b string) string {
	switch {
	case a == b:
		return "is"
	case identity.Within(a, b):
		return "is inside"
	case identity.Within(b, a):
		return "contains"
	}
	return ""
}

// ownPlace is the one rule for every path a request names (the root,
// additional roots, temp entries, allow_write, the mountpoint, the cwd;
// DESIGN.md Round 4, "Every path the daemon accepts"): the canonical path
// may not be, lie in or contain one of the daemon's own places — the state
// directory (session records, temp directories), the mount base, and each
// Config.Hidden path (the API socket) — or a session could rewrite its own
// record or the daemon's mounts. It returns the refusing sentence, "" when
// the path is apart; a path at or below atOrBelow (a session's own temp
// directory, for its cwd) or strictly below below (the mount base, for a
// mountpoint) is fine, and so is one containing an own place unless over
// (a cwd above the state directory reads, it grants nothing).
func (m *Manager) ownPlace(path, atOrBelow, below string, over bool) string {
	if (atOrBelow != "" && identity.Within(path, atOrBelow)) || (below != "" && path != below && identity.Within(path, below)) {
		return ""
	}
	own := [][2]string{{"state directory", m.stateDir}, {"mount base", m.mountBase}}
	for _, h := range m.hidden {
		own = append(own, [2]string{"API socket", h})
	}
	for _, o := range own {
		if rel := relation(path, o[1]); rel != "" && (over || rel != "contains") {
			return fmt.Sprintf("%s the daemon's %s %s; a session may not reach the daemon's own files", rel, o[0], o[1])
		}
	}
	return ""
}

// checkOwn is ownPlace for a request's field: CodeInvalid "session ID:
// FIELD "GIVEN" (physical P) <sentence>".
func (m *Manager) checkOwn(id, field, given, path, below string) error {
	s := m.ownPlace(path, "", below, true)
	if s == "" {
		return nil
	}
	desc := fmt.Sprintf("%s %q", field, given)
	if path != filepath.Clean(given) {
		desc += fmt.Sprintf(" (physical %s)", path)
	}
	return errorf(CodeInvalid, "session %q: %s %s", id, desc, s)
}

// checkPlace is checkPlaceLocked with m.mu taken.
func (m *Manager) checkPlace(id, origin, root, mp, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkPlaceLocked(id, origin, root, mp, key)
}

// checkPlaceLocked refuses to nest a new session id with physical root root
// (origin as given) and canonical mountpoint key (mp as given; both empty to
// check the root only) in the daemon's own files or mounts: a root equal
// to, inside or containing the state directory, the mount base or another
// session's mountpoint (the mount would serve the daemon's state or its own
// mounts), and a mountpoint inside another session's physical root (the
// mount would shadow part of that session's project, giving one path two
// identities). Two sessions on overlapping roots are fine. m.mu is held.
func (m *Manager) checkPlaceLocked(id, origin, root, mp, key string) error {
	desc := fmt.Sprintf("root %q", origin)
	if root != filepath.Clean(origin) {
		desc += fmt.Sprintf(" (physical %s)", root)
	}
	if err := m.checkOwn(id, "root", origin, root, ""); err != nil {
		return err
	}
	// The sorted walks below name the first conflict by path or id; they
	// run only when there is one (a create's checks stay cheap with
	// thousands of sessions).
	var others []string
	for other, owner := range m.mountpoints {
		if owner != id && relation(root, other) != "" {
			others = slices.Sorted(maps.Keys(m.mountpoints))
			break
		}
	}
	for _, other := range others {
		if owner := m.mountpoints[other]; owner != id {
			if rel := relation(root, other); rel != "" {
				return errorf(CodeInvalid, "session %q: %s %s session %q's mountpoint %s; a session may not serve another session's mount", id, desc, rel, owner, other)
			}
		}
	}
	if key == "" {
		return nil
	}
	var owners []string
	for owner, other := range m.roots {
		if owner != id && identity.Within(key, other) {
			owners = slices.Sorted(maps.Keys(m.roots))
			break
		}
	}
	for _, owner := range owners {
		if other := m.roots[owner]; owner != id && identity.Within(key, other) {
			return errorf(CodeInvalid, "session %q: mountpoint %q is inside session %q's root %s; the mount would shadow part of that session's project", id, mp, owner, other)
		}
	}
	return nil
}

// rootFileID returns the FileID of the directory root names itself (a
// symlink there is an error, not followed).
func rootFileID(root string) (identity.FileID, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return identity.FileID{}, errors.New(identity.ErrnoText(err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return identity.FileID{}, errors.New("not a directory")
	}
	return identity.FileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// checkRoot checks that s's physical root path still names the directory
// its mount serves (the walks of Chdir and Resolve go by that path): when
// the path is gone, ErrOriginGone; when it names another object (the host
// moved the directory away and put another, or a symlink, in its place),
// ErrRootChanged. s.mu is held.
func (m *Manager) checkRoot(s *session) error {
	fd, err := unix.Open(s.rec.Root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return errorf(CodeOriginGone, "session %q: origin %s (physical %s) no longer exists; the working directory cannot be recovered", s.rec.ID, s.rec.Origin, s.rec.Root)
	}
	if err != nil {
		return errorf(CodeInternal, "session %q: root %s: %v", s.rec.ID, s.rec.Root, identity.ErrnoText(err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errorf(CodeInternal, "session %q: root %s: %v", s.rec.ID, s.rec.Root, identity.ErrnoText(err))
	}
	if got := (identity.FileID{Dev: st.Dev, Ino: st.Ino}); got != s.rootID {
		what := "another directory"
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			what = "a symlink"
		default:
			what = "a non-directory"
		}
		return errorf(CodeRootChanged, "session %q: root %s is now %s, not the directory the mount serves (it was moved or replaced on the host); remove the session and create it again", s.rec.ID, s.rec.Root, what)
	}
	return nil
}

// checkFSType refuses the canonical path p (what, as given: `root "x"`)
// when it lies in a pseudo file system or a FUSE mount, where a host view
// never descends (fusefs.RefusedMount).
func checkFSType(id, what, p string) error {
	mp, fstype, refused, err := fusefs.RefusedMount(p)
	if err != nil {
		return errorf(CodeInternal, "session %q: %s: %v", id, what, err)
	}
	if refused {
		return errorf(CodeInvalid, "session %q: %s lies in the %s mount at %s; a session may not use a pseudo file system or a FUSE mount", id, what, fstype, mp)
	}
	return nil
}

// viewDirOf returns the directory of the mount base's host views, jail views
// or jail host views (any session's) at or above p, "" when p is in none.
func (m *Manager) viewDirOf(p string) string {
	for _, dir := range []string{hostViewDir, jailViewDir, jailHostViewDir} {
		if views := filepath.Join(m.mountBase, dir); identity.Within(p, views) {
			return views
		}
	}
	return ""
}

// checkNotInMount refuses a mountpoint at or below another session's
// mountpoint, or inside the mount base's host views, jail views and jail
// host views (any session's): the walk would enter that mount.
func (m *Manager) checkNotInMount(id, mp string) error {
	if views := m.viewDirOf(mp); views != "" {
		return errorf(CodeInvalid, "session %q: mountpoint %q is inside %s, where the daemon mounts its sessions' views; a mountpoint may not be inside a mount the daemon serves", id, mp, views)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// mp and each of its ancestors, innermost first: O(depth), whatever
	// the number of sessions.
	for other := filepath.Clean(mp); ; other = filepath.Dir(other) {
		if owner, ok := m.mountpoints[other]; ok && owner != id {
			if other == filepath.Clean(mp) {
				return errorf(CodeExists, "session %q: mountpoint %q is in use by session %q", id, mp, owner)
			}
			return errorf(CodeExists, "session %q: mountpoint %q is inside session %q's mount %s", id, mp, owner, other)
		}
		if other == "/" || other == "." {
			return nil
		}
	}
}
