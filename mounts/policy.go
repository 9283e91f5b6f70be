package mounts

// A session's policy: compiled at Create, replaced by SetPolicy, changed by
// PatchPolicy.

import (
	"context"
	"fmt"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// compilePolicy fills spec.Primary with root (refusing a different one) and
// compiles it; every additional root and every temp entry spec names but
// ownTmp (the session's own temp directory) is refused in or over the
// daemon's own places (Manager.ownPlace).
func (m *Manager) compilePolicy(id, root string, spec policy.Spec, ownTmp string) (policy.Spec, *policy.Policy, error) {
	if spec.Primary != "" {
		c, err := identity.Canonical(spec.Primary)
		if err != nil || c != root {
			return spec, nil, errorf(CodeInvalid, "session %q: policy primary %q: must be empty or the session root %s", id, spec.Primary, root)
		}
	}
	spec.Primary = root
	pol, err := policy.Compile(spec)
	if err != nil {
		return spec, nil, errorf(CodeInvalid, "session %q: %v", id, err)
	}
	if err := checkFSType(id, fmt.Sprintf("root %q", root), root); err != nil {
		return spec, nil, err
	}
	compiled := pol.Spec()
	for i, r := range compiled.Additional {
		if err := m.checkOwn(id, fmt.Sprintf("additional[%d].path", i), spec.Additional[i].Path, r.Path, ""); err != nil {
			return spec, nil, err
		}
		if r.Access != policy.AccessNone {
			if err := checkFSType(id, fmt.Sprintf("additional root %q", r.Path), r.Path); err != nil {
				return spec, nil, err
			}
		}
	}
	// The temp entries the request names (not the default, not the
	// session's own temp directory, which lives in the state directory).
	for i, t := range spec.Temp {
		if c, err := identity.Canonical(t); err == nil && c != ownTmp {
			if err := m.checkOwn(id, fmt.Sprintf("temp[%d]", i), t, c, ""); err != nil {
				return spec, nil, err
			}
		}
	}
	return spec, pol, nil
}

// SetPolicy replaces session id's policy: it compiles spec (Primary empty or
// the session root), writes the record durably, then swaps the mount's
// policy, so that every process's next operation sees it. On any error the
// old policy stays in force, in the mount and in the record.
//
// Errors: ErrNotFound, ErrFailed, ErrInvalid (the policy does not compile,
// or, for a sub-session whose parent still exists, grants more than the
// parent's: see Create),
// CodeInternal (the record write failed).
func (m *Manager) SetPolicy(ctx context.Context, id string, spec policy.Spec) (Session, error) {
	return m.changePolicy(id, func(policy.Spec) policy.Spec { return spec })
}

// PatchPolicy changes some fields of session id's policy (policy.Patch: a
// new mode, added or re-accessed additional roots, added protected
// subpaths), live, as SetPolicy replaces all of it: the patched spec is
// compiled, the record written durably, then the mount's policy swapped.
// Two concurrent patches both apply (changePolicy). An empty patch is refused (ErrInvalid).
//
// Errors: ErrNotFound, ErrFailed, ErrInvalid (empty patch, or the patched
// policy does not compile or grants more than a parent's), CodeInternal (the record write failed).
func (m *Manager) PatchPolicy(ctx context.Context, id string, p policy.Patch) (Session, error) {
	if p.Empty() {
		return Session{}, errorf(CodeInvalid, "session %q: policy patch: empty (give mode, additional or protected)", id)
	}
	if err := p.CheckLimits(); err != nil {
		return Session{}, errorf(CodeInvalid, "session %q: %v", id, err)
	}
	return m.changePolicy(id, func(cur policy.Spec) policy.Spec { return cur.Apply(p) })
}

// policyCompileHook, when set (by a test), is called by changePolicy with
// the session's id while it compiles, the session's lock not held.
var policyCompileHook func(id string)

// changePolicy sets session id's policy to next(the spec in force). The
// session's lock is held only to read the spec in force and to swap the
// new one in, not while it compiles (Compile is linear, but a policy near
// the limits still takes milliseconds, and every request that lists or
// reads a session takes its lock): a session list, or a request for the
// same session, never waits for a compilation. When the policy in force
// changed meanwhile (another patch, a parent's narrowing), next is applied
// to the new one and compiled again, so that concurrent changes all apply.
func (m *Manager) changePolicy(id string, next func(policy.Spec) policy.Spec) (Session, error) {
	for {
		s, err := m.locked(id, true)
		if err != nil {
			return Session{}, err
		}
		inForce, root, tmp := s.pol, s.rec.Root, s.rec.TmpDir
		layerOf, lower := s.rec.LayerOf, layerLower(s)
		spec := next(s.rec.Policy)
		parent := s.rec.Parent
		s.mu.Unlock()
		if spec.Temp == nil {
			spec.Temp = []string{tmp} // as at Create
		}
		if parent != "" {
			// Whatever the new spec says, a sub-session keeps what its
			// parent protects outside its writable roots.
			if ppol, _, err := m.parentOf(id, parent); err == nil && ppol != nil {
				spec = withParentsOutside(spec, root, ppol.Spec())
			}
		}
		if policyCompileHook != nil {
			policyCompileHook(id)
		}
		pspec, pol, err := m.compilePolicy(id, root, spec, tmp)
		if err != nil {
			return Session{}, err
		}
		if lower != "" {
			if err := offLayer(id, layerOf, lower, pol, nil); err != nil {
				return Session{}, err
			}
		}
		again, err := m.locked(id, true)
		if err != nil {
			return Session{}, err
		}
		if again != s || s.pol != inForce {
			again.mu.Unlock()
			continue // removed and made again, or changed meanwhile
		}
		if err := m.checkUnderParent(s, id, pol); err != nil {
			s.mu.Unlock()
			return Session{}, err
		}
		out, err := m.swapPolicyLocked(s, id, pspec, pol)
		s.mu.Unlock()
		if err == nil {
			m.narrowChildren(id)
		}
		return out, err
	}
}

// checkUnderParent refuses pol for s (locked by the caller) when s is a
// sub-session whose parent still exists and pol grants more than the
// parent's policy in force. A removed parent constrains nothing any more.
func (m *Manager) checkUnderParent(s *session, id string, pol *policy.Policy) error {
	if s.rec.Parent == "" {
		return nil
	}
	ppol, prec, err := m.parentOf(id, s.rec.Parent)
	if err != nil {
		if CodeOf(err) == CodeInvalid {
			return nil // the parent is gone
		}
		return err
	}
	return checkNarrower(id, s.rec.Parent, ppol, pol, prec.Symlinks, s.rec.Symlinks, s.rec.TmpDir)
}

// swapPolicyLocked writes pspec (compiled: pol) into s's record (s locked
// by the caller), then swaps the policy of s's mount, jail view and host
// views; on error nothing changed.
func (m *Manager) swapPolicyLocked(s *session, id string, pspec policy.Spec, pol *policy.Policy) (Session, error) {
	rec := s.rec
	rec.Policy = pspec
	if err := m.writeRecord(rec); err != nil {
		return Session{}, errorf(CodeInternal, "session %q: record: %v", id, err)
	}
	s.srv.SetPolicy(pol)
	if s.jailView != nil {
		s.jailView.SetPolicy(pol)
	}
	m.setHostViewPolicy(id, pol)
	s.rec, s.pol = rec, pol
	m.log.Info("session policy set", "session", id, "mode", pol.Mode())
	return s.snapshot(), nil
}
