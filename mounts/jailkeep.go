package mounts

// Jails that outlive the daemon. With Config.Store a jail is a process in
// kept mounts like any other: its views (jailview.go) are kept with the
// session's connections, so a daemon that dies or hands over leaves the
// jail running, paused on its views; the next daemon serves the views on
// and takes the jail back from its record (jailrecord.go) in Recover, as
// if AddJail had registered it. A jail whose session or views cannot be
// served on is ended then, as a stop ends it, since every access of its
// through them would fail (ENOTCONN). No reaper ends the jails of a
// daemon that dies with a store (jailreaper.go): the store keeps their
// views alive, and the next daemon decides.

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/transport"
)

// adoptJails takes session s's jails js (recordedJails) back, s adopted
// (s.mu held: its mount and host view served on): its kept jail views are
// served on, and each jail is registered as AddJail registers it. A session
// whose mount shows links as stored has no jail views: its jails bind the
// session mount and host view. When a view the jails need was not kept or
// cannot be served on, the jails are ended (dropJails); kept views with no
// jail left are ended too.
func (m *Manager) adoptJails(s *session, js []jail) {
	id := s.rec.ID
	vc, hc := m.takeConn(m.jailViewOf(id)), m.takeConn(JailHostViewPath(m.mountBase, id))
	var err error
	switch {
	case len(js) == 0:
		if vc != nil || hc != nil {
			err = errNoJails
		}
	case s.rec.Symlinks == fusefs.SymlinksFollow && vc == nil && hc == nil:
	case vc == nil || hc == nil:
		err = errViewsNotKept
	default:
		// Ends both on error: one may serve already.
		err = m.adoptJailViews(s, vc, hc)
		vc, hc = nil, nil
	}
	if err != nil {
		if len(js) > 0 {
			m.log.Warn("recover: the jails' views could not be served on; the jails are ended", "session", id, "jails", len(js), "err", err)
		}
		for _, c := range []*transport.Conn{vc, hc} {
			if c != nil {
				m.endConn(c)
			}
		}
		m.dropJails(id, js, false)
		return
	}
	for _, j := range js {
		s.jails = append(s.jails, j)
		m.watchJailExit(j)
		// No reaper: only a daemon with a store adopts (jailkeep.go).
		m.registerJail(id, j.pid, j.fd)
		m.log.Info("jail kept", "session", id, "pid", j.pid)
	}
}

// adoptJailViews serves s's kept jail view vc and host view twin hc on
// (s.mu held). On error both connections are ended: neither serves.
func (m *Manager) adoptJailViews(s *session, vc, hc *transport.Conn) error {
	if err := m.serveJailView(s, vc); err != nil {
		m.endConn(vc)
		m.endConn(hc)
		return err
	}
	m.mu.Lock()
	hv := m.hostViews[s.rec.ID]
	m.mu.Unlock()
	var err error = errViewsNotKept
	if hv != nil {
		err = m.serveJailHostView(s, hv, hc)
	}
	if err != nil {
		if !errors.Is(err, errHostViewGone) {
			m.endConn(hc)
		}
		// vc serves: the unmount ends it, its kept copy with it.
		m.unmountJailView(s)
	}
	return err
}

// errNoJails and errViewsNotKept say why a session's kept jail views are
// not served on.
var (
	errNoJails      = errorf(CodeInternal, "no jail of the session runs any more")
	errViewsNotKept = errorf(CodeInternal, "the session's jail view and its host view twin were not both kept")
)

// dropJails lets go of session id's recorded jails js that were not
// adopted. With keep (this daemon stopped while starting: a takeover's
// SIGTERM) only the pidfds are closed, and the records stay for the next
// daemon; otherwise each jail is ended (killJail) and its record removed,
// and the session's jail view directories are cleared (a dead daemon's
// views, or kept ones ended).
func (m *Manager) dropJails(id string, js []jail, keep bool) {
	for _, j := range js {
		if keep {
			unix.Close(j.fd)
			continue
		}
		m.log.Info("recover: ending a jail whose views cannot be served on", "session", id, "pid", j.pid)
		m.killJail(id, j.pid, j.fd)
		m.forgetJail(j)
	}
	if keep {
		return
	}
	for _, dir := range []string{m.jailViewOf(id), JailHostViewPath(m.mountBase, id)} {
		m.endKept(dir)
		m.clearViewDir(id, dir)
	}
}
