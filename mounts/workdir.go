package mounts

// A session's working directory: validated at use, changed by Chdir, logged
// as events.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsfs/wsfs/identity"
)

// sessionView is what a walk as a process in a session sees it needs: the
// session's physical root, its mountpoint, and its host view ("" when it
// has none).
type sessionView struct{ root, mp, hostView string }

// view returns the sessionView of the session with root, mountpoint mp and
// id.
func (m *Manager) view(root, mp, id string) sessionView {
	return sessionView{root: root, mp: mp, hostView: m.hostViewOf(id)}
}

// walker returns the one physical walk (identity.Walker) for paths as a
// process in the session v uses them: relative paths start at the directory
// curRel inside the mount; the mountpoint shows the root and the host view
// shows "/" (so link texts naming either map back to physical paths, and
// ".." leaves them upwards as in the kernel); every other mount this daemon
// serves is refused with EACCES. The daemon never looks into a mount it
// serves: a thread blocked on its own mount could not be answered once the
// server dies.
//
// Links are walked as stored: the mount presents them so that walking them
// there reaches the same physical object as on the host (DESIGN.md, "Links
// are links").
func (m *Manager) walker(v sessionView, curRel string) identity.Walker {
	return identity.Walker{
		Cwd: inMount(v.mp, curRel),
		Mount: func(p string) (string, bool, error) {
			switch {
			case p == v.mp:
				return v.root, true, nil
			case v.hostView != "" && p == v.hostView:
				return "/", true, nil
			}
			if v.hostView != "" && identity.Within(v.hostView, p) {
				return "", false, nil // on the way to the session's own host view
			}
			if _, ok := m.servedMount(p); ok || identity.Within(p, filepath.Join(m.mountBase, hostViewDir)) {
				return "", false, syscall.EACCES // another session's mount or host view
			}
			return "", false, nil
		},
	}
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

// dirInMount resolves path as a directory of the session v, relative to the
// directory curRel inside the mount (see walker), and returns its path
// relative to the mountpoint. path may be relative, absolute inside the
// mount or its host view, or an absolute host path: every spelling of an
// object inside the root names it at its one path inside the mount. The
// result must be an existing directory inside the root. A walk error wraps
// its errno (ENOENT, ENOTDIR, ELOOP, EACCES).
func (m *Manager) dirInMount(ctx context.Context, v sessionView, curRel, path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", fmt.Errorf("%q: the path is blank", path)
	}
	w := m.walker(v, curRel)
	key, err := w.Canonical(ctx, path)
	if errors.Is(err, syscall.ENOENT) {
		if k, kerr := w.TargetKey(ctx, path); kerr == nil && identity.Within(k, v.root) {
			rel, _ := filepath.Rel(v.root, k)
			return "", &errnoError{syscall.ENOENT, fmt.Sprintf("%q: no such directory (%s)", path, inMount(v.mp, rel))}
		}
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("%q: %w", path, identity.ErrnoOf(err))
	case !identity.Within(key, v.root):
		return "", fmt.Errorf("%q resolves to %s, outside the session's mount %s", path, key, v.mp)
	}
	rel, _ := filepath.Rel(v.root, key)
	if !isDir(key) {
		return "", fmt.Errorf("%q: %w (%s)", path, syscall.ENOTDIR, inMount(v.mp, rel))
	}
	return rel, nil
}

// errnoError is a message that carries an errno for errors.Is and the
// API's "errno" field.
type errnoError struct {
	errno syscall.Errno
	msg   string
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }

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
	rel, err := m.dirInMount(ctx, m.view(s.rec.Root, s.rec.Mountpoint, s.rec.ID), s.cwd, path)
	if err := m.checkRoot(s); err != nil {
		return WorkDir{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return WorkDir{}, errorf(CodeInvalid, "session %q: cd %w", id, err)
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
