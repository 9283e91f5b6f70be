package mounts

// The jail views: DESIGN.md wants links shown as stored inside a jail
// (`exec --confine`), where a path means what it means on the host, while
// the session mount and its host view present escaping links as texts into
// the host view (contain). So, with its first jail, a session whose mount
// rewrites links gets a second mount of its root at <mount-base>/@jail/<id>
// in follow mode (links as stored) with the session's policy, which the
// jail shows at the root's physical path instead of the session mount; and
// its host view a twin in follow mode at <mount-base>/@jailhost/<id>, which
// the jail shows wherever it would show the host view (additional roots, a
// working directory outside the roots, the host view's own path). Both are
// unmounted with the session (after its jails are ended) and at a full
// stop; with a connection store they are kept as the session's own
// connections are, and served on after a restart with the jails
// (jailkeep.go); a dead daemon's that were not kept are cleared at
// recovery.

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/transport"
)

// jailViewDir and jailHostViewDir are the directories of the jail views and
// of the host views' twins under the mount base (a session id never
// contains "@").
const (
	jailViewDir     = "@jail"
	jailHostViewDir = "@jailhost"
)

// jailViewOf returns the jail view mountpoint of session id.
func (m *Manager) jailViewOf(id string) string {
	return JailViewPath(m.mountBase, id)
}

// JailViewPath returns where a daemon with the mount base mountBase mounts
// session id's jail view (its root, links as stored, for its jails):
// <mountBase>/@jail/<id>. Nothing is mounted there before the session's
// first jail registers (Manager.AddJail), nor for a session whose mount
// shows links as stored already.
func JailViewPath(mountBase, id string) string {
	return filepath.Join(mountBase, jailViewDir, id)
}

// JailHostViewPath returns where a daemon with the mount base mountBase
// mounts the twin of session id's host view for its jails (the host, links
// as stored): <mountBase>/@jailhost/<id>, with the jail view.
func JailHostViewPath(mountBase, id string) string {
	return filepath.Join(mountBase, jailHostViewDir, id)
}

// ensureJailView mounts s's jail view and its host view's twin when s needs
// them and has none yet (s.mu held, s mounted). A session whose mount
// already shows links as stored (follow) needs none: its jails show the
// session mount and host view. A failure is logged and leaves no mount:
// the jail then shows the session mount or host view, as before jail views
// existed.
func (m *Manager) ensureJailView(s *session) {
	id := s.rec.ID
	if s.srv == nil || s.rec.Symlinks == fusefs.SymlinksFollow {
		return
	}
	if s.jailView == nil {
		dir := m.jailViewOf(id)
		if m.makeViewDir(id, dir) {
			if err := m.serveJailView(s, nil); err != nil {
				os.Remove(dir)
				m.log.Warn("jail view: mount", "session", id, "dir", dir, "err", err)
			} else {
				m.log.Info("jail view mounted", "session", id, "dir", dir)
			}
		}
	}
	m.mu.Lock()
	hv := m.hostViews[id]
	need := hv != nil && hv.jail == nil
	m.mu.Unlock()
	if !need {
		return
	}
	dir := JailHostViewPath(m.mountBase, id)
	if !m.makeViewDir(id, dir) {
		return
	}
	if err := m.serveJailHostView(s, hv, nil); err != nil {
		os.Remove(dir)
		m.log.Warn("jail host view: mount", "session", id, "dir", dir, "err", err)
		return
	}
	m.log.Info("jail host view mounted", "session", id, "dir", dir)
}

// serveJailView mounts s's jail view at its directory (made already), or
// with adopt serves that kept connection on (Recover), and sets
// s.jailView (s.mu held). On error nothing is mounted, and adopt is still
// the caller's.
func (m *Manager) serveJailView(s *session, adopt *transport.Conn) error {
	id := s.rec.ID
	srv, err := fusefs.Mount(layered(fusefs.Config{
		Root: s.rec.Root, Mountpoint: m.jailViewOf(id), Policy: s.pol, Symlinks: fusefs.SymlinksFollow,
		Logger: m.labelled(s.rec.Labels), Session: id, Transport: m.transport, Users: s.rec.Users,
		Hidden: m.viewHidden(), Shared: m.places, Owner: id,
		// Kept as the session's own connections are, so that the jails
		// outlive the daemon with their views (keep.go).
		Keep: m.store, Adopt: adopt,
		// With the watcher, as the session mount: long kernel cache
		// timeouts made safe by invalidations; both mounts share the
		// process's inotify instance and each directory's watch.
	}, s.layer))
	if err != nil {
		return err
	}
	s.jailView = srv
	return nil
}

// serveJailHostView mounts the twin of s's host view hv at its directory
// (made already), or with adopt serves that kept connection on, and sets
// hv.jail (s.mu held). On error nothing is mounted, and adopt is still
// the caller's but after errHostViewGone.
func (m *Manager) serveJailHostView(s *session, hv *hostView, adopt *transport.Conn) error {
	id := s.rec.ID
	dir := JailHostViewPath(m.mountBase, id)
	srv, err := fusefs.MountHostView(fusefs.HostViewConfig{
		Mountpoint: dir,
		Policy:     s.pol,
		Hidden:     m.viewHidden(),
		Shared:     m.places,
		Owner:      id,
		// No link for the root: the jail shows the jail view over the
		// root's path.
		Symlinks:  fusefs.SymlinksFollow,
		Logger:    m.labelled(s.rec.Labels),
		Session:   id,
		Users:     s.rec.Users,
		NoWatch:   true, // as the host view
		Transport: m.transport,
		Keep:      m.store,
		Adopt:     adopt,
	})
	if err != nil {
		return err
	}
	m.mu.Lock()
	if cur := m.hostViews[id]; cur == hv {
		hv.jail = srv
		srv = nil
	}
	m.mu.Unlock()
	if srv != nil { // the host view went meanwhile
		m.unmountView(id, srv, dir) // ends adopt too
		return errHostViewGone
	}
	return nil
}

// errHostViewGone is serveJailHostView's error when the session's host
// view went while its twin was mounted: the twin (and its adopted
// connection) is ended already.
var errHostViewGone = errors.New("the session's host view is gone")

// makeViewDir clears a stale mount at dir and makes dir (and its parent);
// false (logged) when it cannot.
func (m *Manager) makeViewDir(id, dir string) bool {
	if err := clearMount(dir, true, true); err != nil {
		m.log.Warn("jail view: clear stale mount", "session", id, "dir", dir, "err", err)
		return false
	}
	var err error
	for try := 0; try < 2; try++ { // the parent may vanish in between (clearViewDir)
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, os.ErrExist) {
				return true
			}
		}
	}
	m.log.Warn("jail view: directory", "session", id, "dir", dir, "err", err)
	return false
}

// addStats adds the counters of more to st (fresh maps of its own, as
// fusefs.Server.Stats returns them).
func addStats(st *fusefs.Stats, more fusefs.Stats) {
	for k, v := range more.Ops {
		if st.Ops == nil {
			st.Ops = map[string]uint64{}
		}
		st.Ops[k] += v
	}
	for k, v := range more.Denials {
		if st.Denials == nil {
			st.Denials = map[string]uint64{}
		}
		st.Denials[k] += v
	}
}

// unmountJailView unmounts s's jail view (s.mu held, its jails ended;
// lazily when still busy) and removes its directory; without one it clears
// a stale mount a dead daemon left there. Safe to call when there is none.
// The host view's twin goes with the host view (unmountHostView).
func (m *Manager) unmountJailView(s *session) {
	m.unmountView(s.rec.ID, s.jailView, m.jailViewOf(s.rec.ID))
	s.jailView = nil
}

// unmountView unmounts srv (nil: none) mounted at dir for session id,
// lazily when busy, then clears dir (clearViewDir).
func (m *Manager) unmountView(id string, srv *fusefs.Server, dir string) {
	if srv != nil {
		if err := srv.Unmount(false); err != nil {
			if ferr := srv.Unmount(true); ferr != nil {
				m.log.Warn("jail view: unmount", "session", id, "dir", dir, "err", ferr)
			}
		}
	}
	m.clearViewDir(id, dir)
}

// clearViewDir clears whatever mount is left at dir (a dead daemon's) and
// removes dir, and its parent when it is the last.
func (m *Manager) clearViewDir(id, dir string) {
	if err := clearMount(dir, true, true); err != nil {
		m.log.Warn("jail view: clear mount", "session", id, "dir", dir, "err", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("jail view: remove directory", "session", id, "dir", dir, "err", err)
	}
	os.Remove(filepath.Dir(dir)) // the last one: nothing left in the mount base
}
