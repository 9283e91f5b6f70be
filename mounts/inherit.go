package mounts

// Sub-sessions: a session created with a parent inherits what its request
// leaves out of the parent's policy, and may never be granted more than the
// parent.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

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
// grants nothing), the protected subpaths when nil (the parent's places
// below the child's roots: inheritedProtected), and the symlink mode
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
		spec.Policy.Protected = inheritedProtected(ps, specRoots(root, spec.Policy.Additional))
	}
	spec.Policy = withParentsOutside(spec.Policy, root, ps)
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
// protected lists by inclusion (the child protects every place of the
// parent's below its roots: inheritedProtected); then reads and writes are decided by both
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
	for _, p := range inheritedProtected(ps, specRoots(cs.Primary, cs.Additional)) {
		if !slices.Contains(cs.Protected, p) {
			return refuse("policy protects less than parent %q: %q is missing from protected", parentID, p)
		}
	}
	for _, p := range outsideProtected(ps, cs.WritableRoots()) {
		if !slices.Contains(cs.ProtectedOutside, p) {
			return refuse("policy protects less than parent %q: %q is missing from protected_outside", parentID, p)
		}
	}
	for _, r := range outsideRepos(ps, cs.WritableRoots()) {
		if !slices.Contains(cs.ProtectedRepos, r) {
			return refuse("policy protects less than parent %q: %q is missing from protected_repos", parentID, r)
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
	childRoots := roots(cs)
	for _, place := range places {
		if place == "" || (own != "" && identity.Within(place, own)) {
			continue
		}
		write := policy.OpCreate
		if slices.Contains(childRoots, place) {
			// The child cannot create its own root, and the parent
			// refuses a file there when the place is on the way to one
			// of its protected places (sub of sub/sec.txt), which the
			// child protects below it: whether it may write there is
			// what a mkdir there says.
			write = policy.OpMkdir
		}
		for _, op := range []policy.Op{policy.OpRead, write} {
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

// Children never wider than their parent, at any time (DESIGN.md, "Round
// 4"): once a session's policy is replaced, each of its sub-sessions whose
// policy now grants more than the new one is narrowed to fit (narrowSpec),
// at once, in its record and its mounts, logged per child; then the same
// for theirs. A narrowing is kept: a later widening of the parent does not
// widen the child back (widen it explicitly, up to the parent's).

// narrowChildren narrows every sub-session of session id, and theirs,
// to fit under its parent's policy in force. No lock may be held: each
// child is locked, then its parent (the order checkUnderParent takes).
func (m *Manager) narrowChildren(id string) {
	var kids []string
	for _, s := range m.published() {
		s.mu.Lock()
		if s.rec.Parent == id && !s.gone && s.failed == "" {
			kids = append(kids, s.rec.ID)
		}
		s.mu.Unlock()
	}
	slices.Sort(kids)
	for _, kid := range kids {
		m.narrowChild(kid)
		m.narrowChildren(kid)
	}
}

// narrowChild narrows session kid to fit under its parent's policy in
// force, when it grants more.
func (m *Manager) narrowChild(kid string) {
	s, err := m.locked(kid, true)
	if err != nil {
		return // removed meanwhile
	}
	defer s.mu.Unlock()
	ppol, prec, err := m.parentOf(kid, s.rec.Parent)
	if err != nil || s.pol == nil {
		return // the parent is gone: nothing constrains kid
	}
	fits := func(p *policy.Policy) error {
		return checkNarrower(kid, s.rec.Parent, ppol, p, prec.Symlinks, s.rec.Symlinks, s.rec.TmpDir)
	}
	why := fits(s.pol)
	if why == nil {
		return
	}
	spec := narrowSpec(s.rec.Policy, ppol)
	pspec, pol, err := m.compilePolicy(kid, s.rec.Root, spec, s.rec.TmpDir)
	if err == nil {
		err = fits(pol)
	}
	if err != nil {
		// What narrowSpec cannot express (a parent's none root inside the
		// child's root, say): the child reads its root and nothing else.
		fence := policy.Spec{Mode: policy.ModeReadOnly, Primary: s.rec.Root, Temp: spec.Temp,
			Protected: spec.Protected, Outside: policy.AccessNone, ProtectedOutside: spec.ProtectedOutside, ProtectedRepos: spec.ProtectedRepos}
		for _, r := range spec.Additional {
			fence.Additional = append(fence.Additional, policy.Root{Path: r.Path, Access: policy.AccessNone})
		}
		if pspec, pol, err = m.compilePolicy(kid, s.rec.Root, fence, s.rec.TmpDir); err == nil {
			if ferr := fits(pol); ferr != nil {
				m.log.Error("session policy: cannot narrow to fit its parent; fenced", "session", kid, "parent", s.rec.Parent, "err", ferr)
			}
		}
	}
	if err != nil {
		m.log.Error("session policy: cannot narrow to fit its parent", "session", kid, "parent", s.rec.Parent, "err", err)
		return
	}
	if _, err := m.swapPolicyLocked(s, kid, pspec, pol); err != nil {
		m.log.Error("session policy: narrowing to fit its parent", "session", kid, "parent", s.rec.Parent, "err", err)
		return
	}
	m.log.Info("session policy narrowed by its parent", "session", kid, "parent", s.rec.Parent, "mode", pol.Mode(), "was", firstLineOf(why))
}

// firstLineOf returns err's text up to the first newline.
func firstLineOf(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// narrowSpec returns own narrowed to what parent grants: the lower of the
// two modes (but workspace-write when the parent may write the child's
// root, as under a read-only parent whose additional root it is), the
// outside unreachable when the parent's is, the protected subpaths of both,
// and each additional root of either (those overlapping own's primary
// aside, which a spec cannot hold) at the lower of the child's access there
// and the parent's decision. own's temp entries are kept (the session's own
// temp directory is not the parent's to grant).
func narrowSpec(own policy.Spec, parent *policy.Policy) policy.Spec {
	ps := parent.Spec()
	out := own
	out.Additional = nil
	child, err := policy.Compile(own)
	if err != nil {
		child = nil
	}
	access := func(p *policy.Policy, at string) policy.Access {
		switch {
		case p == nil:
			return policy.AccessNone
		case p.Decide(policy.OpCreate, at).Allow:
			return policy.AccessReadWrite
		case p.Decide(policy.OpRead, at).Allow:
			return policy.AccessReadOnly
		}
		return policy.AccessNone
	}
	lower := func(a, b policy.Access) policy.Access {
		rank := map[policy.Access]int{policy.AccessNone: 0, policy.AccessReadOnly: 1, policy.AccessReadWrite: 2}
		if rank[a] < rank[b] {
			return a
		}
		return b
	}
	mode := own.Mode
	if mode == "" {
		mode = policy.ModeWorkspaceWrite
	}
	if modeRank(ps.Mode) < modeRank(mode) {
		mode = ps.Mode
		if mode == policy.ModeReadOnly && own.Mode != policy.ModeReadOnly && parent.Decide(policy.OpCreate, own.Primary).Allow {
			mode = policy.ModeWorkspaceWrite
		}
	}
	out.Mode = mode
	if ps.Outside == policy.AccessNone {
		out.Outside = policy.AccessNone
	}
	seen := map[string]bool{}
	add := func(path string) {
		if seen[path] || identity.Within(path, own.Primary) || identity.Within(own.Primary, path) {
			return
		}
		seen[path] = true
		out.Additional = append(out.Additional, policy.Root{Path: path, Access: lower(access(child, path), access(parent, path))})
	}
	for _, r := range own.Additional {
		add(r.Path)
	}
	for _, r := range ps.Additional {
		add(r.Path)
	}
	prot := own.Protected
	if prot == nil {
		prot = policy.DefaultProtected
	}
	out.Protected = slices.Clone(prot)
	for _, p := range inheritedProtected(ps, specRoots(own.Primary, out.Additional)) {
		if !slices.Contains(out.Protected, p) {
			out.Protected = append(out.Protected, p)
		}
	}
	return withParentsOutside(out, own.Primary, ps)
}

// withParentsOutside returns s (a child's spec, primary root root) with
// what its parent (spec ps) protects outside the child's writable roots
// added to its own ProtectedOutside and ProtectedRepos: it cannot write
// there by path (the narrowing check sees to it), but a hard link inside
// its roots may reach it, so the child protects those objects by
// identity (policy.Spec.ProtectedOutside, ProtectedRepos).
func withParentsOutside(s policy.Spec, root string, ps policy.Spec) policy.Spec {
	w := s
	w.Primary = root
	writable := w.WritableRoots()
	s.ProtectedOutside = union(s.ProtectedOutside, outsideProtected(ps, writable))
	s.ProtectedRepos = union(s.ProtectedRepos, outsideRepos(ps, writable))
	return s
}

// union returns a with b's elements it lacks appended (a copy).
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// outsideRepos returns the parent's (spec ps) writable roots that are not
// a child's writable root (roots), and the parent's own ProtectedRepos:
// the repositories there, which the parent protects by identity, the
// child protects too. One strictly below a child's root counts: the
// policy protects by identity the repository at a root and those enclosing
// it, never one nested below it.
func outsideRepos(ps policy.Spec, roots []string) []string {
	var out []string
	for _, r := range append(ps.WritableRoots(), ps.ProtectedRepos...) {
		if !slices.Contains(roots, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// withinAny reports whether p is at or below one of roots.
func withinAny(p string, roots []string) bool {
	for _, c := range roots {
		if c != "" && identity.Within(p, c) {
			return true
		}
	}
	return false
}

// outsideProtected returns the places the parent (spec ps) protects that
// are at or below none of a child's writable roots (roots): each protected
// subpath under each of the parent's writable roots (the policy adds each
// one's target key itself: guardPath), and the parent's own
// ProtectedOutside, in that order, once each. The child cannot write them by path (the narrowing check sees to
// it), but a hard link inside its roots may reach one: it protects their
// objects by identity (policy.Spec.ProtectedOutside). The places below a
// child's writable root are inheritedProtected's; those below a root it
// may only read (or not even that) are here too, since a protected
// subpath guards only in a writable root.
func outsideProtected(ps policy.Spec, roots []string) []string {
	var out []string
	add := func(place string) {
		if withinAny(place, roots) {
			return
		}
		if !slices.Contains(out, place) {
			out = append(out, place)
		}
	}
	for _, p := range ps.Protected {
		for _, r := range ps.WritableRoots() {
			add(filepath.Join(r, p))
		}
	}
	for _, p := range ps.ProtectedOutside {
		add(p)
	}
	return out
}

// specRoots returns a policy's explicit roots: primary, then the
// additional roots' directories.
func specRoots(primary string, additional []policy.Root) []string {
	out := []string{primary}
	for _, r := range additional {
		out = append(out, r.Path)
	}
	return out
}

// inheritedProtected returns the protected subpaths a child whose explicit
// roots are roots must hold to protect no less than the parent (spec ps):
// each place the parent protects (each protected subpath under each of the
// parent's explicit roots, policy.Spec.Protected) that lies strictly below
// one of the child's roots, relative to that root, in the parent's order,
// once each. A child on the parent's own roots gets the parent's list; one
// rooted at the parent's sub gets sub/sec.txt as sec.txt, and none of the
// parent's places elsewhere (its roots do not reach them: what it may
// write there, if anything, the narrowing check compares). A place that
// is a child's root itself cannot be a subpath: the narrowing check
// refuses such a child (it may write where the parent may not).
func inheritedProtected(ps policy.Spec, roots []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, p := range ps.Protected {
		for _, r := range specRoots(ps.Primary, ps.Additional) {
			// The place as spelt and its target key: the parent protects
			// both (a symlink on the way protects the object it reaches,
			// policy.Spec.Protected), so a child rooted at the target's
			// side of the link inherits it too.
			place := filepath.Join(r, p)
			places := []string{place}
			if k, err := identity.TargetKey(place); err == nil && k != place {
				places = append(places, k)
			}
			for _, place := range places {
				for _, c := range roots {
					if c == "" || place == c || !identity.Within(place, c) {
						continue
					}
					rel, err := filepath.Rel(c, place)
					if err != nil || seen[rel] {
						continue
					}
					seen[rel] = true
					out = append(out, rel)
				}
			}
		}
	}
	return out
}
