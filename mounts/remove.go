package mounts

// Remove: unmount a session and delete its state.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// Remove ends the session's jails (AddJail), unmounts session id, removes the mountpoint when Create made it,
// and deletes its record, event log, intent and temp directory. A mount
// still in use gives ErrBusy naming the holders, and the session stays;
// force detaches a busy mount lazily (MNT_DETACH) instead. A layered
// session whose sub-sessions serve its layer is ErrBusy too, naming them,
// force or not. A mount already
// gone (unmounted from outside) counts as unmounted. For a session whose
// record was unreadable, a dead mount on its default mountpoint is cleared
// (clearDeadDefaultMount).
//
// Errors: ErrNotFound, ErrBusy, CodeInternal.
func (m *Manager) Remove(ctx context.Context, id string, force bool) error {
	s, err := m.locked(id, false)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.rec.Layer != "" && s.layer != nil {
		// Their mounts serve its layer: removing it would leave them a
		// tree that is gone.
		if subs := s.layer.users(); len(subs) > 0 {
			return errorf(CodeBusy, "session %q: sub-sessions run on its layer (%s); remove them first", id, strings.Join(subs, ", "))
		}
	}
	m.endJails(s)
	switch {
	case s.srv != nil:
		if err := s.srv.Unmount(force); err != nil {
			var busy *fusefs.BusyError
			if errors.As(err, &busy) {
				return &Error{Code: CodeBusy, Message: fmt.Sprintf("session %q: %v", id, err), Err: err}
			}
			if mounted, merr := isMounted(s.rec.Mountpoint); merr != nil || mounted {
				return errorf(CodeInternal, "session %q: unmount %s: %v", id, s.rec.Mountpoint, err)
			}
			// Unmounted from outside (or its directory removed since):
			// already done. The server stops once the kernel lets go of the
			// connection (at once, or when a lazily detached mount's last
			// holder leaves).
			m.log.Info("remove: mount already gone", "session", id, "mountpoint", s.rec.Mountpoint)
			go s.srv.Wait()
		}
		s.srv = nil
	case s.unreadable:
		m.clearDeadDefaultMount(id)
	default:
		if err := clearMount(s.rec.Mountpoint, force, false); err != nil {
			return errorf(CodeInternal, "session %q: unmount %s: %v", id, s.rec.Mountpoint, err)
		}
	}
	m.unmountJailView(s)
	m.unmountHostView(id)
	if s.layer != nil && s.rec.Layer == "" {
		// A sub-session on its parent's layer: the layer is not its own.
		s.layer.dropSub(id)
		s.layer = nil
	}
	if s.rec.Layer != "" {
		// What the session did not commit goes with it.
		if s.layer != nil {
			s.layer.Close()
			s.layer = nil
		}
		if err := removeLayerDir(s.rec.Layer); err != nil {
			m.log.Warn("remove: layer", "session", id, "err", err)
		}
	}
	if s.rec.MadeMountpoint {
		if err := os.Remove(s.rec.Mountpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("remove: mountpoint", "session", id, "mountpoint", s.rec.Mountpoint, "err", err)
		}
	}
	if err := removeDurable(filepath.Join(m.sessDir, id+".json")); err != nil {
		return errorf(CodeInternal, "session %q: delete record: %v", id, err)
	}
	s.events.close()
	os.Remove(filepath.Join(m.sessDir, id+".events"))
	os.Remove(filepath.Join(m.sessDir, id+".pending"))
	os.RemoveAll(s.rec.TmpDir)
	s.gone = true
	m.mu.Lock()
	delete(m.sessions, id)
	delete(m.roots, id)
	if m.mountpoints[s.rec.Mountpoint] == id {
		delete(m.mountpoints, s.rec.Mountpoint)
	}
	m.mu.Unlock()
	m.places.Remove(id) // shown again in the other host views
	m.log.Info("session removed", "session", id, "force", force)
	return nil
}

// isMounted reports whether something is mounted at mp.
func isMounted(mp string) (bool, error) {
	table, err := fusefs.MountTable()
	if err != nil {
		return false, err
	}
	_, ok := table[mp]
	return ok, nil
}

// clearDeadDefaultMount clears a dead (ENOTCONN) FUSE mount on the default
// mountpoint <mount-base>/<id> of a session whose record was unreadable (its
// real mountpoint is unknown), and removes that directory when it is then
// empty, unless another session uses that path. A live mount is left alone.
func (m *Manager) clearDeadDefaultMount(id string) {
	mp := filepath.Join(m.mountBase, id)
	m.mu.Lock()
	owner, taken := m.mountpoints[mp]
	m.mu.Unlock()
	if taken {
		m.log.Info("remove: default mountpoint belongs to another session; left alone", "session", id, "mountpoint", mp, "owner", owner)
		return
	}
	table, err := fusefs.MountTable()
	if err != nil {
		m.log.Warn("remove: mount table", "session", id, "err", err)
		return
	}
	if e, ok := table[mp]; !ok || !strings.HasPrefix(e.FSType, "fuse") {
		return
	}
	// statfs(2), not stat(2): with default_permissions the kernel answers
	// stat of a dead mount's root from its attribute cache. fusefs.Statfs:
	// over io_uring a dead server's ring, torn down, answers ECONNABORTED
	// first.
	var st unix.Statfs_t
	if err := fusefs.Statfs(mp, &st); err != unix.ENOTCONN {
		m.log.Info("remove: default mountpoint holds a live mount; left alone", "session", id, "mountpoint", mp)
		return
	}
	if err := clearMount(mp, true, true); err != nil {
		m.log.Warn("remove: clear dead mount", "session", id, "mountpoint", mp, "err", err)
		return
	}
	// A wsfs mount in the daemon's mount base: the session's default
	// mountpoint, which Create made (removed only when empty).
	os.Remove(mp)
	m.log.Info("remove: cleared a dead mount", "session", id, "mountpoint", mp)
}
