package mounts

import (
	"context"
	"errors"

	"github.com/wsfs/wsfs/fusefs"
)

// Sync is the sync barrier of session id (DESIGN.md, "Round 4"): it returns
// once every change made on the host before the call is visible through the
// session's mount, its host view and its jail views (fusefs.Server.
// SyncHostChanges on each: the watcher has passed a marker; the host views,
// which have no watcher, drop what the kernel caches). Errors: ErrNotFound,
// ErrFailed, or CodeInternal when a barrier could not be placed or timed out.
func (m *Manager) Sync(ctx context.Context, id string) error {
	s, err := m.locked(id, true)
	if err != nil {
		return err
	}
	srvs := []*fusefs.Server{s.srv, s.jailView}
	s.mu.Unlock()
	m.mu.Lock()
	if hv := m.hostViews[id]; hv != nil {
		srvs = append(srvs, hv.srv, hv.jail)
	}
	m.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if srv == nil {
			continue
		}
		if err := srv.SyncHostChanges(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errorf(CodeInternal, "session %q: sync: %v", id, err)
	}
	return nil
}
