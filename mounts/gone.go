package mounts

// A session mount that went away behind the daemon's back.

import (
	"fmt"
	"strings"

	"github.com/wsfs/wsfs/fusefs"
)

// noticeUnmounted moves s to the failed state when its mount is no longer
// in the mount table (unmounted from outside: `wsfs unmount`, umount(8),
// a lazy detach): the mountpoint then shows the bare directory on disk,
// which no policy guards, so nothing may be started there in the session's
// name (Cwd, Chdir, exec refuse a failed session) and list and show say so.
// Remove still cleans up. table is the mount table (fusefs.MountTable),
// nil to ask the kernel about the mountpoint alone (fusefs.MountRootType;
// the table when it cannot say); a table that cannot be read changes
// nothing. s.mu is held.
func (m *Manager) noticeUnmounted(s *session, table map[string]fusefs.MountEntry) {
	if s.srv == nil || s.failed != "" || s.gone {
		return
	}
	if table == nil {
		// Without the table, when the kernel can say: one statx (and a
		// statmount), whatever the number of mounts.
		root, fstype, known := fusefs.MountRootType(s.rec.Mountpoint)
		if known && root && strings.HasPrefix(fstype, "fuse") {
			return
		}
		if !known {
			var err error
			if table, err = fusefs.MountTable(); err != nil {
				return
			}
		}
	}
	if e, ok := table[s.rec.Mountpoint]; ok && strings.HasPrefix(e.FSType, "fuse") {
		return
	}
	s.failed = fmt.Sprintf("the mount at %s went away (unmounted from outside the daemon); session rm removes the session", s.rec.Mountpoint)
	m.log.Warn("session mount went away", "session", s.rec.ID, "mountpoint", s.rec.Mountpoint)
	// The server stops once the kernel lets go of the connection (at once,
	// or when a lazily detached mount's last holder leaves).
	go s.srv.Wait()
	s.srv = nil
}
