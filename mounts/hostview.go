package mounts

// The host views: one FUSE mount per session at <mount-base>/@host/<id>
// (DESIGN.md, "Host view"), made with the session, recovered with it,
// removed with it. Escaping links in the session's mount point into it.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// hostViewDir is the directory of the host views under the mount base. A
// session id never contains "@", so it is never a session's mountpoint.
const hostViewDir = "@host"

// hostViewOf returns the host view mountpoint of session id.
func (m *Manager) hostViewOf(id string) string {
	return filepath.Join(m.mountBase, hostViewDir, id)
}

// hostView is a session's mounted host view, as the Manager tracks it to
// update what it hides.
type hostView struct {
	srv *fusefs.Server
	pol *policy.Policy // the session's policy
	// jail is its twin for the session's jails (links as stored), mounted
	// with the first jail; nil before (jailview.go).
	jail *fusefs.Server
}

// mountHostView makes the host view directory of session id (and its
// parent) and mounts the host view there with pol and the session's logger, showing root and the
// mountpoint mp as links to mp. A stale mount left there by a dead daemon
// is cleared first. On error nothing is left: no mount, no directory.
//
// With adopt (Recover), the host view's kept connection is served on
// instead: its directory is neither looked at nor made (it is that
// connection's mountpoint), and on error adopt is still the caller's.
func (m *Manager) mountHostView(id, root, mp string, pol *policy.Policy, log *slog.Logger, users []uint32, adopt *transport.Conn) (*fusefs.Server, error) {
	dir := m.hostViewOf(id)
	if adopt != nil {
		return m.serveHostView(id, root, mp, pol, log, users, adopt)
	}
	if err := clearMount(dir, true, true); err != nil {
		return nil, fmt.Errorf("host view %s: clear stale mount: %v", dir, err)
	}
	// The parent may vanish between the two when the last other host view
	// goes away (unmountHostView): then once more.
	var err error
	for try := 0; try < 2; try++ {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
			if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, os.ErrExist) {
				err = nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host view %s: %s", dir, identity.ErrnoText(err))
	}
	srv, err := m.serveHostView(id, root, mp, pol, log, users, nil)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return srv, nil
}

// serveHostView mounts (or, with adopt, serves on) session id's host view
// and registers it.
func (m *Manager) serveHostView(id, root, mp string, pol *policy.Policy, log *slog.Logger, users []uint32, adopt *transport.Conn) (*fusefs.Server, error) {
	dir := m.hostViewOf(id)
	srv, err := fusefs.MountHostView(fusefs.HostViewConfig{
		Mountpoint: dir,
		Policy:     pol,
		Hidden:     m.viewHidden(),
		Shared:     m.places,
		Owner:      id,
		Links:      map[string]string{root: mp, mp: mp},
		Logger:     log, // the session's, with its labels
		Session:    id,
		Users:      users,
		// No inotify watcher: a daemon with many sessions would run out of
		// inotify instances (128 per user by default) at twice the rate;
		// the host view keeps the short default cache timeouts instead.
		NoWatch:   true,
		Keep:      m.store,
		Adopt:     adopt,
		Transport: m.transport,
	})
	if err != nil {
		return nil, fmt.Errorf("host view %s: %v", dir, err)
	}
	m.mu.Lock()
	m.hostViews[id] = &hostView{srv: srv, pol: pol}
	m.mu.Unlock()
	return srv, nil
}

// unmountHostView unmounts session id's host view (lazily when busy: the
// session mount is gone, and what is left inside sees ENOTCONN) and
// removes its directory. Safe to call when there is none.
func (m *Manager) unmountHostView(id string) {
	m.mu.Lock()
	hv := m.hostViews[id]
	delete(m.hostViews, id)
	var twin *fusefs.Server
	if hv != nil {
		twin = hv.jail
	}
	m.mu.Unlock()
	dir := m.hostViewOf(id)
	m.unmountView(id, twin, JailHostViewPath(m.mountBase, id))
	if hv != nil {
		if err := hv.srv.Unmount(false); err != nil {
			if ferr := hv.srv.Unmount(true); ferr != nil {
				m.log.Warn("host view: unmount", "session", id, "dir", dir, "err", ferr)
			}
		}
	} else if err := clearMount(dir, true, true); err != nil {
		m.log.Warn("host view: clear mount", "session", id, "dir", dir, "err", err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("host view: remove directory", "session", id, "dir", dir, "err", err)
	}
	os.Remove(filepath.Dir(dir)) // the last one: nothing left in the mount base
}

// setHostViewPolicy gives session id's host view (and its jail twin) the
// policy pol; what they hide for pol's none roots follows from it.
func (m *Manager) setHostViewPolicy(id string, pol *policy.Policy) {
	m.mu.Lock()
	hv := m.hostViews[id]
	var srvs []*fusefs.Server
	if hv != nil {
		hv.pol = pol
		srvs = append(srvs, hv.srv)
		if hv.jail != nil {
			srvs = append(srvs, hv.jail)
		}
	}
	m.mu.Unlock()
	for _, srv := range srvs {
		srv.SetPolicy(pol)
	}
}

// placesOf returns the places a session with physical root root and
// mountpoint mp hides from every other session (m.places): both, but a
// root at a system directory (SystemDir), which other sessions see
// read-only as the host has it.
func placesOf(root, mp string) []string {
	if SystemDir(root) {
		return []string{mp}
	}
	return []string{root, mp}
}

// viewHidden returns what every host view hides on top of
// fusefs.DefaultHidden besides the other sessions (m.places, consulted by
// each view as HostViewConfig.Shared with the session as Owner): the
// daemon's state directory (records, event logs, the lock, every other
// session's temp area), the mount base (every other session's default
// mountpoint, every host view) and Config.Hidden (the socket). Every other
// session's root and mountpoint are hidden through m.places; fusefs itself
// hides mounts whose source lies in a none root of the session's policy.
// What the session may see stays visible where it lies inside those (its
// temp area under the state directory, its mountpoint under the mount base,
// a root next to the socket): the host view makes the directories on the
// way passages, listed with only the names on the way
// (fusefs.HostViewConfig).
func (m *Manager) viewHidden() []string {
	return append([]string{m.stateDir, m.mountBase}, m.hidden...)
}

// checkWritable refuses w, a canonical directory a jail of session id
// (policy pol) would bind writable directly, when it lies in or contains a
// place the session's host view hides (viewHidden, the other sessions'
// places in m.places, and pol's none roots): a jail binds it over the tmpfs
// that hides them, and a write there bypasses the mounts' policy (session
// records, another session's mountpoint).
func (m *Manager) checkWritable(id string, pol *policy.Policy, w string) error {
	var places []string
	for _, r := range pol.Spec().Additional {
		if r.Access == policy.AccessNone {
			places = append(places, r.Path)
		}
	}
	check := func(h string) error {
		switch {
		case identity.Within(w, h):
			return fmt.Errorf("lies in %s, which the session's host view hides (a jail may not write there)", h)
		case identity.Within(h, w):
			return fmt.Errorf("contains %s, which the session's host view hides (a jail may not write there)", h)
		}
		return nil
	}
	for _, h := range places {
		if err := check(h); err != nil {
			return err
		}
	}
	if place, _, rel, ok := m.places.Conflict(w, id); ok {
		return fmt.Errorf("%s %s, which the session's host view hides (a jail may not write there)", rel, place)
	}
	for _, h := range m.viewHidden() {
		if err := check(h); err != nil {
			return err
		}
	}
	return nil
}
