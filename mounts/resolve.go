package mounts

// Resolve: a path as a process in the session would use it.

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/resolver"
)

// Resolve answers, for path as a process in session id would use it
// (relative to the session's working directory inside the mount), its
// display path, its in-mount path, its physical key and the read and write
// decisions a process meets at that key (fusefs.Server.Decide of the
// session mount inside the root, of its host view outside it: the mounts
// on the way included, as a cd decides them). The walk has the mount's semantics (see
// Manager.walker: the one physical walk from the physical working
// directory, the mountpoint and host view mapped to what they show, ".."
// above the root being the root's parent), so it agrees with what the
// kernel does in the jail (`cat PATH` run by `wsfs exec --confine` in the
// session's directory), and the key is the physical object the mount
// serves. The display path follows resolver.Target's rule, in the mount's
// namespace: the lexical join with the directory, or MountPath (Key when the
// walk left the mount) when PATH has a ".." segment.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone, ErrInvalid (a blank path,
// or one the walk refuses: ENOTDIR, ELOOP, EACCES).
func (m *Manager) Resolve(ctx context.Context, id, path string) (Resolution, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return Resolution{}, err
	}
	defer s.mu.Unlock()
	if _, err := m.validateCwd(s); err != nil {
		return Resolution{}, err
	}
	if strings.TrimSpace(path) == "" {
		return Resolution{}, errorf(CodeInvalid, "session %q: resolve %q: the path is blank", id, path)
	}
	mp := s.rec.Mountpoint
	cwd := cwdPath(mp, s.hostView, s.cwd)
	v := m.view(s.rec.Root, mp, s.srv, id)
	key, err := m.walker(v, s.cwd).TargetKey(ctx, path)
	if err := m.checkRoot(s); err != nil {
		return Resolution{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return Resolution{}, errorf(CodeInvalid, "session %q: resolve %q: %w", id, path, identity.ErrnoOf(err))
	}
	res := Resolution{Session: id, Path: path, Cwd: cwd, Key: key}
	// The resolver's rule, in the mount's namespace: an object inside the
	// root is named by its one path inside the mount.
	name := key
	if identity.Within(key, v.root) {
		rel, _ := filepath.Rel(v.root, key)
		res.MountPath = inMount(mp, rel)
		name = res.MountPath
	}
	res.Display = resolver.Display(cwd, path, name)
	decide := s.pol.Decide
	if srv := v.server(key); srv != nil {
		// What a process meets there (fusefs.Server.Decide), as a cd
		// decides it (mayRead): inside the root the mount's answer (a
		// mount inside the root decided at its source, the mounts on
		// the way first), outside it the host view's (its hidden places,
		// the mounts on the way).
		decide = srv.Decide
	} else if m.hiddenFrom(id, key) {
		// Outside the root, the places every view of the session hides
		// (its jails and host view alike): the daemon's own directories
		// but for the session's temp area, and other sessions' places.
		hidden := policy.Decision{Allow: false, Rule: "hostview:hidden", Errno: syscall.EACCES}
		decide = func(policy.Op, string) policy.Decision { return hidden }
	}
	res.Read = decision(decide(policy.OpRead, res.Key))
	res.Write = decision(decide(policy.OpWrite, res.Key))
	return res, nil
}

// hiddenFrom reports whether the canonical path key, outside session id's
// root, is hidden from the session: at or in one of the daemon's own
// places (ownPlace), but for the session's own temp area, or in another
// session's place (m.places). These are the places its jails cover and
// its host view refuses.
func (m *Manager) hiddenFrom(id, key string) bool {
	if m.ownPlace(key, filepath.Join(m.tmpBase, id), "", false) != "" {
		return true
	}
	_, _, rel, ok := m.places.Conflict(key, id)
	return ok && rel == "lies in"
}

// decision converts a policy.Decision to its JSON form.
func decision(d policy.Decision) Decision {
	out := Decision{Allow: d.Allow, Rule: d.Rule}
	if d.Errno != 0 {
		out.Errno = identity.ErrnoName(d.Errno)
	}
	return out
}
