package mounts

// The jail views: DESIGN.md wants links shown as stored inside a jail
// (`exec --confine`), where a path means what it means on the host, while
// the session mount presents escaping links as texts into the host view
// (contain). So a session whose mount rewrites links gets, with its first
// jail, a second mount of its root at <mount-base>/@jail/<id> in follow
// mode (links as stored) with the session's policy, which the jail shows at
// the root's physical path instead of the session mount. It is unmounted
// with the session (after its jails are ended) and when the daemon stops.

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/wsfs/wsfs/fusefs"
)

// jailViewDir is the directory of the jail views under the mount base (a
// session id never contains "@").
const jailViewDir = "@jail"

// jailViewOf returns the jail view mountpoint of session id.
func (m *Manager) jailViewOf(id string) string {
	return JailViewPath(m.mountBase, id)
}

// JailViewPath returns where a daemon with the mount base mountBase mounts
// session id's jail view (links as stored, for its jails):
// <mountBase>/@jail/<id>. Nothing is mounted there before the session's
// first jail registers (Manager.AddJail), nor for a session whose mount
// shows links as stored already.
func JailViewPath(mountBase, id string) string {
	return filepath.Join(mountBase, jailViewDir, id)
}

// ensureJailView mounts s's jail view when s needs one and has none yet
// (s.mu held, s mounted). A session whose mount already shows links as
// stored (follow) needs none: its jails show the session mount. A failure
// is logged and leaves no mount: the jail then shows the session mount, as
// before jail views existed.
func (m *Manager) ensureJailView(s *session) {
	id := s.rec.ID
	if s.jailView != nil || s.srv == nil || s.rec.Symlinks == fusefs.SymlinksFollow {
		return
	}
	dir := m.jailViewOf(id)
	if err := clearMount(dir, true, true); err != nil {
		m.log.Warn("jail view: clear stale mount", "session", id, "dir", dir, "err", err)
		return
	}
	var err error
	for try := 0; try < 2; try++ { // the parent may vanish in between (unmountJailView)
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, os.ErrExist) {
				err = nil
				break
			}
		}
	}
	if err != nil {
		m.log.Warn("jail view: directory", "session", id, "dir", dir, "err", err)
		return
	}
	srv, err := fusefs.Mount(fusefs.Config{
		Root: s.rec.Root, Mountpoint: dir, Policy: s.pol, Symlinks: fusefs.SymlinksFollow,
		Logger: m.labelled(s.rec.Labels), Session: id,
		// With the watcher, as the session mount: long kernel cache
		// timeouts made safe by invalidations; both mounts share the
		// process's inotify instance and each directory's watch.
	})
	if err != nil {
		os.Remove(dir)
		m.log.Warn("jail view: mount", "session", id, "dir", dir, "err", err)
		return
	}
	s.jailView = srv
	m.log.Info("jail view mounted", "session", id, "dir", dir)
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
func (m *Manager) unmountJailView(s *session) {
	id := s.rec.ID
	dir := m.jailViewOf(id)
	if s.jailView != nil {
		if err := s.jailView.Unmount(false); err != nil {
			if ferr := s.jailView.Unmount(true); ferr != nil {
				m.log.Warn("jail view: unmount", "session", id, "dir", dir, "err", ferr)
			}
		}
		s.jailView = nil
	}
	m.clearJailView(id)
}

// clearJailView clears whatever mount is left at session id's jail view
// directory (a dead daemon's) and removes the directory, and the jail view
// directory of the mount base when it is the last.
func (m *Manager) clearJailView(id string) {
	dir := m.jailViewOf(id)
	if err := clearMount(dir, true, true); err != nil {
		m.log.Warn("jail view: clear mount", "session", id, "dir", dir, "err", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("jail view: remove directory", "session", id, "dir", dir, "err", err)
	}
	os.Remove(filepath.Dir(dir)) // the last one: nothing left in the mount base
}
