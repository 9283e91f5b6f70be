package mounts

// A session's working directory: validated at use, changed by Chdir, logged
// as events.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
)

// view returns the mountView of a session's mount.
func (m *Manager) view(root, mp string, symlinks fusefs.SymlinkMode) mountView {
	return mountView{root: root, mp: mp, symlinks: symlinks, avoid: m.servedMount}
}

// servedMount returns the mountpoint of a session (or a create in progress)
// at or above path.
func (m *Manager) servedMount(path string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for mp := range m.mountpoints {
		if identity.Within(path, mp) {
			return mp, true
		}
	}
	return "", false
}

// dirInMount resolves path as a directory inside the mount v, relative to
// the directory curRel inside the mount, and returns its path relative to
// the mountpoint. The walk has the kernel's semantics in the mount (symlinks
// as the mount presents them, ".." above the mount root leaving it) but
// reads only the backing tree (see mountWalk). path may also be an absolute
// host path inside the root, which names the same directory inside the
// mount. The result must be an existing directory inside the mount.
func (m *Manager) dirInMount(ctx context.Context, v mountView, curRel, path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", fmt.Errorf("%q: the path is blank", path)
	}
	walk := path
	if filepath.IsAbs(path) && path != v.mp && !strings.HasPrefix(path, v.mp+"/") {
		// A host path: accepted when it names a directory inside the root.
		if mp, ok := m.servedMount(filepath.Clean(path)); ok {
			return "", fmt.Errorf("%q is inside the wsfs mount %s of another session", path, mp)
		}
		key, err := identity.TargetKey(path)
		if err != nil {
			return "", fmt.Errorf("%q: %v", path, identity.ErrnoText(err))
		}
		if !identity.Within(key, v.root) {
			return "", fmt.Errorf("%q resolves to %s, outside the session's root %s (not reachable inside the mount)", path, key, v.root)
		}
		rel, _ := filepath.Rel(v.root, key)
		walk = inMount(v.mp, rel)
	}
	w, err := v.walk(ctx, curRel, walk)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q: %v", path, identity.ErrnoText(err))
	case !w.InMount:
		return "", fmt.Errorf("%q resolves to %s, outside the session's mount %s", path, w.Key, v.mp)
	case !w.Exists:
		return "", fmt.Errorf("%q: no such directory (%s)", path, w.MountPath)
	case !w.IsDir:
		return "", fmt.Errorf("%q: not a directory (%s)", path, w.MountPath)
	}
	rel, _ := filepath.Rel(v.mp, w.MountPath)
	return rel, nil
}

// Cwd returns session id's working directory, validated at use: when the
// directory no longer exists on the host, the session recovers to the
// origin (the mount root) and logs a "recover" event first.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone (the origin vanished too),
// ErrRootChanged (see checkRoot), CodeInternal (the event log could not be
// written).
func (m *Manager) Cwd(ctx context.Context, id string) (WorkDir, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return WorkDir{}, err
	}
	defer s.mu.Unlock()
	ev, err := m.validateCwd(s)
	if err != nil {
		return WorkDir{}, err
	}
	wd := s.workDir()
	if ev != nil {
		wd.Changed, wd.Events = true, []Event{*ev}
	}
	return wd, nil
}

// workDir returns s's current directory; s.mu must be held.
func (s *session) workDir() WorkDir {
	return WorkDir{
		Session:  s.rec.ID,
		Path:     inMount(s.rec.Mountpoint, s.cwd),
		Physical: physicalOf(s.rec.Root, s.cwd),
	}
}

// validateCwd checks that s's directory still exists on the host; when it
// does not, it recovers to the origin (logging a "recover" event, returned)
// or, when the origin is gone too, fails with ErrOriginGone. s.mu is held.
func (m *Manager) validateCwd(s *session) (*Event, error) {
	if err := m.checkRoot(s); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.rec.Root, s.cwd)
	if isDir(dir) && s.cwd != "." {
		return nil, nil
	}
	if s.cwd == "." {
		return nil, nil
	}
	mp := s.rec.Mountpoint
	ev, err := s.events.append(Event{
		Time: time.Now().UTC(), Type: EventRecover,
		From: inMount(mp, s.cwd), To: mp,
		Reason: fmt.Sprintf("%s no longer exists", dir),
	})
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", s.rec.ID, err)
	}
	m.log.Info("session cwd recovered", "session", s.rec.ID, "from", ev.From, "to", ev.To)
	s.cwd = "."
	return &ev, nil
}

// Chdir changes session id's working directory to path: relative to the
// current directory (validated first, see Cwd), absolute inside the mount,
// or an absolute host path inside the root. The target must be an existing
// directory reachable inside the mount. A change is appended to the event
// log (fsync) and published only after that succeeded; a change to the
// current directory writes nothing.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone, ErrInvalid (missing, not a
// directory, outside the mount), CodeInternal (the log write failed).
func (m *Manager) Chdir(ctx context.Context, id, path string) (WorkDir, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return WorkDir{}, err
	}
	defer s.mu.Unlock()
	var logged []Event
	ev, err := m.validateCwd(s)
	if err != nil {
		return WorkDir{}, err
	}
	if ev != nil {
		logged = append(logged, *ev)
	}
	rel, err := m.dirInMount(ctx, m.view(s.rec.Root, s.rec.Mountpoint, s.rec.Symlinks), s.cwd, path)
	if err := m.checkRoot(s); err != nil {
		return WorkDir{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return WorkDir{}, errorf(CodeInvalid, "session %q: cd %v", id, err)
	}
	if rel != s.cwd {
		mp := s.rec.Mountpoint
		ev, err := s.events.append(Event{
			Time: time.Now().UTC(), Type: EventCd,
			From: inMount(mp, s.cwd), To: inMount(mp, rel),
		})
		if err != nil {
			return WorkDir{}, errorf(CodeInternal, "session %q: event log: %v", id, err)
		}
		s.cwd = rel
		logged = append(logged, ev)
	}
	wd := s.workDir()
	wd.Changed, wd.Events = len(logged) > 0, logged
	return wd, nil
}

// Events returns session id's working-directory events, oldest first.
//
// Errors: ErrNotFound, CodeInternal (the log could not be read).
func (m *Manager) Events(ctx context.Context, id string) ([]Event, error) {
	s, err := m.locked(id, false)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	f, err := os.Open(filepath.Join(m.sessDir, id+".events"))
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	defer f.Close()
	events, _, err := readEvents(f)
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	if events == nil {
		events = []Event{}
	}
	return events, nil
}
