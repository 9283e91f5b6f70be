package mounts

// Sub-sessions: a session created with a parent inherits what its request
// leaves out of the parent's policy, and may never be granted more than the
// parent.

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// parentOf returns the compiled policy and the record (symlink mode,
// allow_write directories, users) of session parent, for a child id. A
// parent that is unknown or still being created is ErrInvalid; a failed one
// ErrFailed.
func (m *Manager) parentOf(id, parent string) (*policy.Policy, record, error) {
	if parent == id {
		return nil, record{}, errorf(CodeInvalid, "session %q: parent %q: a session cannot be its own parent", id, parent)
	}
	ps, err := m.locked(parent, true)
	switch CodeOf(err) {
	case "":
	case CodeNotFound:
		return nil, record{}, errorf(CodeInvalid, "session %q: parent %q: no such session", id, parent)
	default:
		return nil, record{}, errorf(CodeOf(err), "session %q: parent: %v", id, err)
	}
	defer ps.mu.Unlock()
	return ps.pol, ps.rec, nil
}

// checkUsers refuses a child's users that its parent does not serve (a
// sub-session may only narrow its parent).
func checkUsers(id, parentID string, parentUsers, users []uint32) error {
	for _, u := range users {
		if !slices.Contains(parentUsers, u) {
			return errorf(CodeInvalid, "session %q: users: uid %d: parent %q does not serve it; a sub-session may only narrow its parent's users", id, u, parentID)
		}
	}
	return nil
}

// checkAllowWrite refuses a child's allow_write directory (written directly
// by its jails, past the mount) that its parent could not write either:
// neither inside one of the parent's allow_write directories nor writable
// under the parent's policy.
func checkAllowWrite(id, parentID string, parent *policy.Policy, parentAllow, allow []string) error {
	for _, w := range allow {
		if slices.ContainsFunc(parentAllow, func(p string) bool { return identity.Within(w, p) }) {
			continue
		}
		if d := parent.Decide(policy.OpCreate, w); !d.Allow {
			return errorf(CodeInvalid, "session %q: allow_write %s: parent %q may not write there (%s); a sub-session may only narrow its parent's policy", id, w, parentID, d.Rule)
		}
	}
	return nil
}

// inherit fills what spec leaves out from the parent's compiled policy and
// symlink mode: the mode and the outside's access when empty, the
// additional roots when nil (less
// those that overlap the child's root, which a policy cannot hold next to
// its primary; the narrowing check below sees to it that dropping one
// grants nothing), the protected subpaths when nil, and the symlink mode
// when empty. The temp area is not inherited: a session's own temp
// directory is its default.
func inherit(spec Spec, root string, parent *policy.Policy, parentLinks fusefs.SymlinkMode) Spec {
	ps := parent.Spec()
	if spec.Policy.Mode == "" {
		spec.Policy.Mode = ps.Mode
	}
	if spec.Policy.Additional == nil {
		for _, r := range ps.Additional {
			if !identity.Within(r.Path, root) && !identity.Within(root, r.Path) {
				spec.Policy.Additional = append(spec.Policy.Additional, r)
			}
		}
	}
	if spec.Policy.Protected == nil {
		spec.Policy.Protected = ps.Protected
	}
	if spec.Policy.Outside == "" {
		spec.Policy.Outside = ps.Outside
	}
	if spec.Symlinks == "" {
		spec.Symlinks = parentLinks
	}
	return spec
}

// modeRank orders the modes by what they grant.
func modeRank(m policy.Mode) int {
	switch m {
	case policy.ModeReadOnly:
		return 0
	case policy.ModeWorkspaceWrite:
		return 1
	}
	return 2
}

// linkRank orders the symlink modes by what they let through: follow hands
// the kernel every link text, past the policy.
func linkRank(m fusefs.SymlinkMode) int {
	if m == fusefs.SymlinksFollow {
		return 1
	}
	return 0
}

// checkNarrower refuses a child policy that grants anything its parent's
// does not. The mode and the symlink mode are compared by rank, the
// protected lists by inclusion; then reads and writes are decided by both
// policies at every place where either policy's decision can change: each
// root and temp entry of either (a decision is constant inside an area but
// for protected names), each protected name under each of the parent's
// roots, and the outside. own is the child's own temp directory, which every
// session may write and which is not asked of the parent.
func checkNarrower(id, parentID string, parent, child *policy.Policy, parentLinks, childLinks fusefs.SymlinkMode, own string) error {
	refuse := func(format string, a ...any) error {
		return errorf(CodeInvalid, "session %q: %s; a sub-session may only narrow its parent's policy",
			id, fmt.Sprintf(format, a...))
	}
	ps, cs := parent.Spec(), child.Spec()
	if modeRank(cs.Mode) > modeRank(ps.Mode) {
		return refuse("policy mode %q is wider than parent %q's %q", cs.Mode, parentID, ps.Mode)
	}
	if linkRank(childLinks) > linkRank(parentLinks) {
		return refuse("symlink mode %q is wider than parent %q's %q", childLinks, parentID, parentLinks)
	}
	for _, p := range ps.Protected {
		if !slices.Contains(cs.Protected, p) {
			return refuse("policy protects less than parent %q: %q is missing from protected", parentID, p)
		}
	}
	var places []string
	roots := func(s policy.Spec) []string {
		out := []string{s.Primary}
		for _, r := range s.Additional {
			out = append(out, r.Path)
		}
		return append(out, s.Temp...)
	}
	for _, r := range roots(ps) {
		places = append(places, r)
		for _, p := range ps.Protected {
			places = append(places, filepath.Join(r, p))
		}
	}
	places = append(places, roots(cs)...)
	places = append(places, "/")
	for _, place := range places {
		if place == "" || (own != "" && identity.Within(place, own)) {
			continue
		}
		for _, op := range []policy.Op{policy.OpRead, policy.OpCreate} {
			c, p := child.Decide(op, place), parent.Decide(op, place)
			if c.Allow && !p.Allow {
				what := "write"
				if op == policy.OpRead {
					what = "read"
				}
				return refuse("policy is wider than parent %q's: it may %s %s (%s), the parent may not (%s)", parentID, what, place, c.Rule, p.Rule)
			}
		}
	}
	return nil
}
