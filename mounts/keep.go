package mounts

// Sessions that outlive the daemon (DESIGN.md, "Round 4"). With
// Config.Store, every session's two connections (its mount and its host
// view) are kept outside the process from the moment they are mounted
// (fusefs Config.Keep). A daemon that dies (kill -9, OOM) or detaches
// (SIGTERM, a takeover: Detach) leaves them there; the next daemon on the
// same state directory takes them in Recover and serves them on, so
// processes in the mounts see a pause and no error. A connection with no
// session record, or whose session cannot be served on, is ended (its
// descriptors closed everywhere: the kernel then answers ENOTCONN) and the
// session is mounted again as before.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// detachWait bounds how long Detach waits for a request in flight (a lock
// wait may never end); one still running is answered by the successor
// after FUSE_NOTIFY_RESEND.
const detachWait = 2 * time.Second

// takeKept takes the connections kept in the store; those of no recorded
// session (have) are ended at once, so that Recover's cleanup finds their
// mounts dead rather than waiting on them.
func (m *Manager) takeKept(have map[string]bool) {
	if m.store == nil {
		return
	}
	conns, bad, err := transport.TakeConns(m.store)
	if err != nil {
		m.log.Warn("recover: kept connections could not be read; sessions are mounted again", "store", m.store.Kind(), "err", err)
		return
	}
	for name, why := range bad {
		m.log.Warn("recover: a kept connection is ended: its state cannot be used", "name", name, "err", why)
		transport.ForgetName(m.store, name)
	}
	m.kept = conns
	for mp, c := range conns {
		if !have[c.Meta.Session] {
			m.endKept(mp)
		}
	}
}

// takeConn returns the kept connection of mountpoint mp (nil if none) and
// no longer counts it as kept.
func (m *Manager) takeConn(mp string) *transport.Conn {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.kept[mp]
	delete(m.kept, mp)
	return c
}

// isKept reports whether a connection of mountpoint mp is kept and not
// yet taken.
func (m *Manager) isKept(mp string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kept[mp] != nil
}

// endKept ends the kept connection of mountpoint mp: closed here and
// removed from the store, the kernel ends it (ENOTCONN).
func (m *Manager) endKept(mp string) {
	if c := m.takeConn(mp); c != nil {
		m.endConn(c)
	}
}

func (m *Manager) endConn(c *transport.Conn) {
	c.Close()
	if err := transport.Forget(m.store, c.Meta.Mountpoint); err != nil {
		m.log.Warn("kept connection not removed from the store", "mountpoint", c.Meta.Mountpoint, "err", err)
	}
}

// leaveKept lets go of every kept connection no session took. With end
// (a session whose record cannot be read, or that failed) each is ended:
// its mount is dead (ENOTCONN) from then on, as after a crash without
// keeping, until Remove clears it. Without (this daemon stopped while it
// was starting: a takeover's SIGTERM) only this process's copies are
// closed, and the store keeps them for the next daemon.
func (m *Manager) leaveKept(end bool) {
	m.mu.Lock()
	left := m.kept
	m.kept = nil
	m.mu.Unlock()
	for _, c := range left {
		if end {
			m.endConn(c)
		} else {
			c.Close()
		}
	}
}

// adoptSession serves session id on its kept connections (mount and host
// view), s.mu held. done reports that it is served; otherwise err says why
// not (nil: nothing was kept) and both connections are ended, so that the
// caller can mount the session again.
func (m *Manager) adoptSession(id string, s *session, rec record) (done bool, err error) {
	mc, hc := m.takeConn(rec.Mountpoint), m.takeConn(m.hostViewOf(id))
	if mc == nil && hc == nil {
		return false, nil
	}
	end := func(err error) (bool, error) {
		for _, c := range []*transport.Conn{mc, hc} {
			if c != nil {
				m.endConn(c)
			}
		}
		return false, err
	}
	if mc == nil || hc == nil {
		return end(errors.New("only one of the session's two connections was kept"))
	}
	pol, err := policy.Compile(rec.Policy)
	if err != nil {
		return end(err)
	}
	rootID, err := rootFileID(rec.Root)
	if err != nil {
		return end(fmt.Errorf("root %s: %v", rec.Root, err))
	}
	log := m.labelled(rec.Labels)
	if _, err := m.mountHostView(id, rec.Root, rec.Mountpoint, pol, log, rec.Users, hc); err != nil {
		return end(err)
	}
	lay, err := m.reopenLayer(s, rec)
	if err != nil {
		m.unmountHostView(id)
		mc.Close()
		transport.Forget(m.store, mc.Meta.Mountpoint)
		return false, err
	}
	srv, err := fusefs.Mount(layered(fusefs.Config{
		Root: rec.Root, Mountpoint: rec.Mountpoint, Policy: pol,
		Symlinks: rec.Symlinks, Logger: log, Session: id, HostView: m.hostViewOf(id), Users: rec.Users,
		Keep: m.store, Adopt: mc, Transport: m.transport,
		Hidden: m.viewHidden(), Shared: m.places, Owner: id,
	}, lay))
	if err != nil {
		// The host view serves already: unmounting it ends its
		// connection and its kept copy.
		m.unmountHostView(id)
		mc.Close()
		transport.Forget(m.store, mc.Meta.Mountpoint)
		return false, err
	}
	s.srv, s.pol, s.rootID = srv, pol, rootID
	m.log.Info("session served on", "session", id, "mountpoint", rec.Mountpoint, "cwd", cwdPath(rec.Mountpoint, s.hostView, s.cwd))
	return true, nil
}

// hostViewServers returns the servers of every host view and of its jail
// twin (m.mu held).
func (m *Manager) hostViewServers() []*fusefs.Server {
	views := make([]*fusefs.Server, 0, len(m.hostViews))
	for _, hv := range m.hostViews {
		views = append(views, hv.srv)
		if hv.jail != nil {
			views = append(views, hv.jail)
		}
	}
	return views
}

// servers returns every server the Manager runs: the sessions' mounts and
// jail views, and the host views and their twins.
func (m *Manager) servers() []*fusefs.Server {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	out := m.hostViewServers()
	m.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		for _, srv := range []*fusefs.Server{s.srv, s.jailView} {
			if srv != nil {
				out = append(out, srv)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Detach stops the Manager for a successor: every session's servers stop at
// a request boundary (fusefs Server.Pause; what arrives later waits in the
// kernel, and is sent to the successor again), jails run on (paused on
// their views, which are kept too), records and kept connections stay,
// nothing is unmounted, and the state directory's lock is released. Without a store it is Close: a
// connection nobody keeps would end with the process anyway.
func (m *Manager) Detach(ctx context.Context) error {
	if m.store == nil {
		return m.Close(ctx)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	views := m.hostViewServers()
	m.mu.Unlock()
	paused, late := 0, 0
	for _, s := range all {
		s.mu.Lock()
		// The jails run on, paused on their views as every other
		// process in the mounts; the next daemon takes them back from
		// their records (jailkeep.go).
		for _, j := range s.jails {
			unix.Close(j.fd)
		}
		s.jails = nil
		if s.jailView != nil && !s.jailView.Pause(detachWait) {
			late++
		}
		if s.srv != nil {
			if !s.srv.Pause(detachWait) {
				late++
			}
			paused++
		}
		s.events.close()
		s.gone = true
		s.mu.Unlock()
	}
	for _, v := range views {
		if !v.Pause(detachWait) {
			late++
		}
	}
	m.closeReaper() // none with a store (jailkeep.go)
	if m.lock != nil {
		m.lock.Close()
	}
	m.log.Info("sessions detached: their connections are kept for the next daemon", "count", paused, "store", m.store.Kind(), "still_running", late)
	return nil
}
