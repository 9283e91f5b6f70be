package mounts

// A session's working directory: validated at use, changed by Chdir, logged
// as events. Inside the root it is a path relative to the mount root, shown
// in the mount; outside it (a cwd is not a write grant: seeds' ADR-0012) the
// absolute physical path of a directory the session may read, shown through
// its host view, whose policy decides every later access.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// sessionView is what a walk as a process in a session sees it needs: the
// session's physical root, its mountpoint and mount's server (which decides
// what the session may read inside its root), and its host view's
// mountpoint and server (which decides what the session may read outside
// its root; nil when none is mounted).
type sessionView struct {
	root, mp, hostView string
	tmpDir             string // the session's own temp directory (in the state directory)
	srv, hostSrv       *fusefs.Server
}

// view returns the sessionView of the session with root, mountpoint mp,
// mount srv (nil: none yet) and id.
func (m *Manager) view(root, mp string, srv *fusefs.Server, id string) sessionView {
	v := sessionView{root: root, mp: mp, srv: srv, hostView: m.hostViewOf(id), tmpDir: filepath.Join(m.tmpBase, id)}
	m.mu.Lock()
	if hv := m.hostViews[id]; hv != nil {
		v.hostSrv = hv.srv
	}
	m.mu.Unlock()
	return v
}

// walker returns the one physical walk (identity.Walker) for paths as a
// process in the session v uses them: relative paths start at the physical
// path of the working directory cwd (see session.cwd), so ".." is physical
// (DESIGN.md, "Path semantics"): at the mount root it is the project's
// parent, not the mount base, as in the jail, where the root is at its
// physical path; the mountpoint shows the root and the
// host view shows "/" (so link texts naming either map back to physical
// paths, and ".." leaves them upwards as in the kernel); every other mount
// this daemon serves is refused with EACCES. The daemon never looks into a
// mount it serves: a thread blocked on its own mount could not be answered
// once the server dies.
//
// Links are walked as stored: the mount presents them so that walking them
// there reaches the same physical object as on the host (DESIGN.md, "Links
// are links").
func (m *Manager) walker(v sessionView, cwd string) identity.Walker {
	return identity.Walker{
		Cwd: cwdPhysical(v.root, cwd),
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
			if _, ok := m.servedMount(p); ok || m.viewDirOf(p) != "" {
				return "", false, syscall.EACCES // another session's mount, a host view, a jail view
			}
			// Inside a pseudo file system the host view never enters
			// (proc, sysfs, ...): its magic links (/proc/self/cwd) would
			// name the daemon's own places, not the session's. Its mount
			// point itself is looked at (the host view's rule refuses it
			// with its name).
			if mp, _, refused, err := fusefs.RefusedMount(p); err != nil || (refused && p != mp) {
				return "", false, syscall.EACCES
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

// cwdPath returns the path processes use for the working directory cwd
// (see session.cwd) of a session with mountpoint mp and host view hv: inside
// the mount, or, for an absolute physical path outside the root, inside the
// host view (fusefs.InHostView).
func cwdPath(mp, hv, cwd string) string {
	if filepath.IsAbs(cwd) {
		return fusefs.InHostView(hv, cwd)
	}
	return inMount(mp, cwd)
}

// cwdPhysical returns the physical path of the working directory cwd (see
// session.cwd) of a session with root root.
func cwdPhysical(root, cwd string) string {
	if filepath.IsAbs(cwd) {
		return cwd
	}
	return physicalOf(root, cwd)
}

// cwdOfPath is cwdPath's inverse: the working directory (see session.cwd)
// that p, a path inside the mountpoint mp or the host view hv, names.
func cwdOfPath(mp, hv, p string) (string, bool) {
	switch {
	case identity.Within(p, mp):
		rel, _ := filepath.Rel(mp, p)
		return rel, true
	case hv != "" && identity.Within(p, hv):
		return "/" + strings.TrimPrefix(strings.TrimPrefix(p, hv), "/"), true
	}
	return "", false
}

// dirInMount resolves path as a directory of the session v, relative to the
// working directory cwd (see walker), and returns it as a working directory
// (see session.cwd). path may be relative, absolute inside the mount or its
// host view, or an absolute host path: every spelling of an object inside
// the root names it at its one path inside the mount. The result must be an
// existing directory the session may read, as its mount or host view
// answers (fusefs.Server.Decide): inside the root, or outside it through
// the host view; a none root or a place the host view hides is EACCES. A
// walk error wraps its errno (ENOENT, ENOTDIR, ELOOP, EACCES).
func (m *Manager) dirInMount(ctx context.Context, v sessionView, cwd, path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", fmt.Errorf("%q: the path is blank", path)
	}
	w := m.walker(v, cwd)
	key, err := w.Canonical(ctx, path)
	if errors.Is(err, syscall.ENOENT) {
		// What the session may not read it may not probe either: the
		// refusal comes before "no such directory".
		if k, kerr := w.TargetKey(ctx, path); kerr == nil {
			if s := m.ownPlace(k, v.tmpDir, "", false); s != "" {
				return "", &errnoError{syscall.EACCES, fmt.Sprintf("%q (physical %s) %s (rule hostview:hidden)", path, k, s)}
			}
			if rerr := v.mayRead(path, k); rerr != nil {
				return "", m.whyHidden(rerr, v, k)
			}
			return "", &errnoError{syscall.ENOENT, fmt.Sprintf("%q: no such directory (%s)", path, cwdPath(v.mp, v.hostView, v.cwdOf(k)))}
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EACCES) {
			if why := m.whyRefusedWalk(v, path); why != "" {
				return "", &errnoError{syscall.EACCES, fmt.Sprintf("%q: %s: %s", path, identity.ErrnoText(syscall.EACCES), why)}
			}
		}
		return "", fmt.Errorf("%q: %w", path, identity.ErrnoOf(err))
	}
	if s := m.ownPlace(key, v.tmpDir, "", false); s != "" {
		return "", &errnoError{syscall.EACCES, fmt.Sprintf("%q (physical %s) %s (rule hostview:hidden)", path, key, s)}
	}
	if err := v.mayRead(path, key); err != nil {
		return "", m.whyHidden(err, v, key)
	}
	out := v.cwdOf(key)
	if !isDir(key) {
		return "", fmt.Errorf("%q: %w (%s)", path, syscall.ENOTDIR, cwdPath(v.mp, v.hostView, out))
	}
	return out, nil
}

// whyRefusedWalk names the rule when the walk of path (absolute, as a
// session v's cd gives it) was refused with EACCES inside a place the
// daemon never walks for a session: another session's mountpoint, the
// mount base, the state directory (rule hostview:hidden). "" otherwise.
func (m *Manager) whyRefusedWalk(v sessionView, path string) string {
	if !filepath.IsAbs(path) {
		return ""
	}
	p := filepath.Clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	for mp, id := range m.mountpoints {
		if mp != v.mp && identity.Within(p, mp) {
			return fmt.Sprintf("it is in session %q's mountpoint %s, which other sessions never see (rule hostview:hidden)", id, mp)
		}
	}
	switch {
	case identity.Within(p, m.mountBase):
		return fmt.Sprintf("it is in the daemon's mount base %s, which sessions never see but through their own mount (rule hostview:hidden)", m.mountBase)
	case identity.Within(p, m.stateDir):
		return fmt.Sprintf("it is in the daemon's state directory %s, which sessions never see (rule hostview:hidden)", m.stateDir)
	}
	return ""
}

// whyHidden adds to err, session v's EACCES for the canonical physical path
// key outside its root, the other session whose root holds key (the
// innermost), when there is one: the host view hides other sessions' roots.
// Any other error is returned as it is.
func (m *Manager) whyHidden(err error, v sessionView, key string) error {
	var ee *errnoError
	if !errors.As(err, &ee) || ee.errno != syscall.EACCES || identity.Within(key, v.root) {
		return err
	}
	m.mu.Lock()
	id, root := "", ""
	for i, r := range m.roots {
		if identity.Within(key, r) && len(r) > len(root) {
			id, root = i, r
		}
	}
	m.mu.Unlock()
	if id == "" {
		return err
	}
	return &errnoError{ee.errno, fmt.Sprintf("%s: it is in session %q's root %s, which other sessions never see", ee.msg, id, root)}
}

// mayRead refuses the canonical physical path key (path as given) when the
// session v may not read it as a working directory: inside the root what
// its mount answers (fusefs.Server.Decide: the policy; the places the host
// view hides, like another session's root inside this one, are shown by the
// mount), outside it what its host view answers (the policy, the hidden
// places), EACCES for a none root or a hidden place; a passage of the host
// view (a hidden place on the way to a visible one, like the mount base or
// the state directory: fusefs.Server.Passage) is EACCES
// too, since a process there would see only the way (and a jail could not
// be built there). Without a host view only the root is readable.
func (v sessionView) mayRead(path, key string) error {
	srv := v.server(key)
	switch {
	case srv == nil && !identity.Within(key, v.root):
		return fmt.Errorf("%q resolves to %s, outside the session's mount %s, and the session has no host view", path, key, v.mp)
	case srv == nil:
		return nil // creating: the mount decides nothing a policy would not
	}
	if d := srv.Decide(policy.OpRead, key); !d.Allow {
		return &errnoError{d.Errno, fmt.Sprintf("%q: %s: the session may not read %s (rule %s)", path, identity.ErrnoText(d.Errno), key, d.Rule)}
	}
	if srv == v.hostSrv && srv.Passage(key) {
		return &errnoError{syscall.EACCES, fmt.Sprintf("%q: %s: %s is hidden from the session, which may only pass through it (rule hostview:passage)", path, identity.ErrnoText(syscall.EACCES), key)}
	}
	return nil
}

// server returns the server whose answer is the session's at the
// canonical physical path key (fusefs.Server.Decide): the session mount
// inside the root, the host view outside it; nil when that is not mounted
// (a create in progress, a session without a host view).
func (v sessionView) server(key string) *fusefs.Server {
	if identity.Within(key, v.root) {
		return v.srv
	}
	return v.hostSrv
}

// cwdOf returns the working directory (see session.cwd) for the canonical
// physical path key: relative inside the root, else key itself.
func (v sessionView) cwdOf(key string) string {
	if identity.Within(key, v.root) {
		rel, _ := filepath.Rel(v.root, key)
		return rel
	}
	return key
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
// directory no longer exists on the host, or the session may no longer read
// it (its policy changed), the session recovers to the origin (the mount
// root) and logs a "recover" event first.
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
		Path:     cwdPath(s.rec.Mountpoint, s.hostView, s.cwd),
		Physical: cwdPhysical(s.rec.Root, s.cwd),
	}
}

// validateCwd checks that s's directory still exists on the host (and,
// outside the root, that the session may still read it); when it does not,
// it recovers to the origin (logging a "recover" event, returned) or, when
// the origin is gone too, fails with ErrOriginGone. s.mu is held.
func (m *Manager) validateCwd(s *session) (*Event, error) {
	if err := m.checkRoot(s); err != nil {
		return nil, err
	}
	if s.cwd == "." {
		return nil, nil
	}
	dir := s.cwd
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.rec.Root, s.cwd)
	}
	// The stored path must still name the directory physically, walked
	// as the session walks (the one walker: other sessions' mounts and
	// the views are EACCES): a component replaced by a symlink since (the
	// session may write outside its root) would hand exec and the jail
	// another directory under the old name, another session's mount say.
	// It is not re-resolved: a cwd changes only by a logged cd.
	v := m.view(s.rec.Root, s.rec.Mountpoint, s.srv, s.rec.ID)
	key, werr := m.walker(v, ".").Canonical(context.Background(), dir)
	var reason string
	switch {
	case errors.Is(werr, syscall.ENOENT) || werr == nil && !isDir(key):
		reason = fmt.Sprintf("%s no longer exists", dir)
	case werr != nil:
		reason = fmt.Sprintf("%s: %v", dir, identity.ErrnoText(werr))
	case key != dir:
		reason = fmt.Sprintf("%s now resolves to %s (a symlink in its path)", dir, key)
	case filepath.IsAbs(s.cwd):
		if err := v.mayRead(dir, dir); err != nil {
			reason = err.Error()
		}
	}
	if reason == "" {
		return nil, nil
	}
	mp := s.rec.Mountpoint
	ev, err := s.events.append(Event{
		Time: time.Now().UTC(), Type: EventRecover,
		From: cwdPath(mp, s.hostView, s.cwd), To: mp,
		Reason: reason,
	})
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", s.rec.ID, err)
	}
	m.log.Info("session cwd recovered", "session", s.rec.ID, "from", ev.From, "to", ev.To)
	s.cwd = "."
	return &ev, nil
}

// Chdir changes session id's working directory to path: relative to the
// current directory (validated first, see Cwd), absolute inside the mount
// or the host view, or an absolute host path. The target must be an
// existing directory the session may read (see dirInMount): inside the root
// it is shown in the mount, outside it through the host view, whose policy
// decides every later access (a cwd is not a write grant). A change is
// appended to the event log (fsync) and published only after that
// succeeded; a change to the current directory writes nothing.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone, ErrInvalid (missing, not a
// directory, not readable by the session: errno EACCES), CodeInternal (the
// log write failed).
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
	cwd, err := m.dirInMount(ctx, m.view(s.rec.Root, s.rec.Mountpoint, s.srv, s.rec.ID), s.cwd, path)
	if err := m.checkRoot(s); err != nil {
		return WorkDir{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return WorkDir{}, errorf(CodeInvalid, "session %q: cd %w", id, err)
	}
	if cwd != s.cwd {
		mp, hv := s.rec.Mountpoint, s.hostView
		ev, err := s.events.append(Event{
			Time: time.Now().UTC(), Type: EventCd,
			From: cwdPath(mp, hv, s.cwd), To: cwdPath(mp, hv, cwd),
		})
		if err != nil {
			return WorkDir{}, errorf(CodeInternal, "session %q: event log: %v", id, err)
		}
		s.cwd = cwd
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
