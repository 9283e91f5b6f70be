package policy

import (
	"slices"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/identity"
)

// kind is the kind of area a path falls in; it names the rule.
type kind uint8

const (
	kindPrimary kind = iota
	kindAdditional
	kindTemp
	kindOutside
)

var kindNames = [...]string{
	kindPrimary: "primary", kindAdditional: "additional",
	kindTemp: "temp", kindOutside: "outside",
}

// area is one compiled root (or the outside pseudo-root) with its decisions
// precomputed, so Decide only copies a Decision.
type area struct {
	path   string // canonical; "/" for the file system root
	kind   kind
	access Access // effective access in the policy's mode
	read   Decision
	write  Decision
}

// guard is one protected key: a canonical path that is read-only, and whose
// ancestors cannot be renamed or removed.
type guard struct {
	key  string
	deny Decision
}

// indexThreshold is the number of areas plus guards above which Decide looks
// the path's ancestors up in a map instead of scanning every root and guard:
// the scan is O(roots); the index costs one map lookup per distinct key length
// that falls on a component boundary of the path. Measured crossover: about a
// dozen entries.
const indexThreshold = 12

var (
	denyDevice      = Decision{Errno: syscall.EPERM, Rule: "device"}
	denyNone        = Decision{Errno: syscall.EACCES, Rule: "root:none"}
	denyNotAbsolute = Decision{Errno: syscall.EACCES, Rule: "path:not-absolute"}
	denyNotCanon    = Decision{Errno: syscall.EACCES, Rule: "path:not-canonical"}
	denyRenameXDev  = Decision{Errno: syscall.EXDEV, Rule: "rename:cross-root"}
	denyLinkXDev    = Decision{Errno: syscall.EXDEV, Rule: "link:cross-root"}
)

// Policy is a compiled, immutable Spec. Safe for concurrent use: no method
// mutates it, so callers share one *Policy between goroutines and replace it
// as a whole (an atomic.Pointer) to change a live session's policy.
type Policy struct {
	spec     Spec
	writable bool
	areas    []area // most specific (longest path) first; equal paths merged
	outside  area
	aindex   map[string]*area // areas by path
	alens    []int            // the lengths of the aindex keys, longest first
	useIndex bool
	// prot holds the protected set, which follows the host (protect.go).
	// A pointer, so the copies tests make share it.
	prot *protection
	// repos caches what repositories' configs name (git.go), shared by
	// copies like prot.
	repos *repoCache
}

// Compile checks spec and canonicalizes every root; it is the only way to
// make a *Policy.
//
// Defaults: an empty Mode is workspace-write; a nil Temp is DefaultTemp(); a
// nil Protected is DefaultProtected (an empty, non-nil slice means none).
//
// Compile refuses, with a one-line error prefixed "policy:" that names the
// field and the rule: an unknown mode or access name; a missing, relative or
// non-existent primary, or one that is not a directory; a relative,
// non-existent or unresolvable additional root; explicit roots (primary and
// additional) that overlap — equal, or one inside the other, after
// canonicalization; a relative temp entry; a protected entry that is empty,
// absolute, not clean, or has a ".." component. Temp entries that do not exist
// are dropped, and temp entries may overlap explicit roots (the most specific
// root decides).
//
// For each writable explicit root R (the primary unless the mode is
// read-only, and every read-write additional root) and each protected entry
// S, both the lexical path R/S and identity.TargetKey(R/S) are protected, so
// a symlinked component protects its physical target. What git executes is
// protected by the repository rule (git.go) whatever the list says.
//
// Compile reads the file system (lstat, readlink, reading .git pointer
// files); so do write decisions in writable roots (the repository rule's
// lstat calls). The protected set follows the host: DecideAt revalidates
// and recomputes it (see protect.go), and also matches protected objects
// by (dev, ino).
func Compile(spec Spec) (*Policy, error) {
	return compile(spec)
}

// Spec returns the compiled spec: the mode filled in, every root canonical,
// the temp entries that exist (canonical), and the protected list in force.
// The slices are copies; changing them does not change p.
func (p *Policy) Spec() Spec {
	s := p.spec
	s.Additional = append([]Root(nil), p.spec.Additional...)
	s.Temp = append([]string{}, p.spec.Temp...)
	s.Protected = append([]string{}, p.spec.Protected...)
	s.ProtectedOutside = slices.Clone(p.spec.ProtectedOutside)
	s.ProtectedRepos = slices.Clone(p.spec.ProtectedRepos)
	return s
}

// Mode returns the policy's mode (never empty).
func (p *Policy) Mode() Mode { return p.spec.Mode }

// Writable reports whether any path can be written under p (informational:
// mounts are never made kernel-read-only, so a policy can be widened live).
// It is false only in read-only mode with no read-write additional root (the
// temp area and the outside are read-only then too).
func (p *Policy) Writable() bool { return p.writable }

// Decide answers op on physicalPath, a canonical absolute path (as
// identity.Canonical or identity.TargetKey return). A read, and a write the
// area refuses, make no system call and do not allocate; a write a
// writable explicit root allows is then asked of the repository rule
// (git.go: lstat(2) of the path's git names and of each ancestor's .git,
// stat(2) of the configs it consults, parsed only when they changed).
//
// The most specific root containing the path decides (explicit roots and temp
// entries alike; "/" boundaries, so /a/bc is not inside /a). In order:
//   - a "none" root: EACCES, rule "root:none", for every op, OpRead included;
//   - OpRead: allowed, rule "<area>:<access>";
//   - OpMknodDevice (a character or block device, or a whiteout): EPERM,
//     rule "device", except in full-access mode, where it is decided as
//     any other create below;
//   - a path equal to or under a protected key: EACCES, rule
//     "protected:<entry>"; for OpRename, OpUnlink and OpRmdir also a path
//     that is an ancestor of a protected key (that would move the protected
//     name away);
//   - the repository rule (git.go): EACCES, rule "protected:git:<path>";
//   - the matrix: allowed with rule "<area>:read-write" when the area is
//     writable in the mode, else EROFS with rule "<area>:read-only", where
//     <area> is primary, additional, temp or outside.
//
// A path that is not absolute is refused with EACCES "path:not-absolute", one
// with an empty, "." or ".." component with EACCES "path:not-canonical"; a
// single trailing "/" is ignored.
func (p *Policy) Decide(op Op, physicalPath string) Decision {
	d, _, _ := p.decide(op, physicalPath)
	return d
}

// DecideRename answers a rename from src to dst (both canonical physical
// paths). Each end is decided as OpRename, then:
//   - an end refused whatever the other end is — a "none" root (EACCES
//     "root:none"), a path that is not canonical, or a name whose rename
//     would move a protected subpath away (EACCES "protected:<entry>", e.g.
//     renaming .git) — is returned as is, the source first;
//   - both ends allowed in the same root: allowed (the source's decision);
//   - both ends refused with the same errno (both EROFS, both protected):
//     the source's decision;
//   - otherwise the ends differ (one allowed and the other refused, or both
//     allowed in different roots): EXDEV with rule "rename:cross-root", so mv
//     and libraries fall back to copy + unlink, each checked on its own (the
//     refused end then answers EROFS or EACCES).
func (p *Policy) DecideRename(src, dst string) Decision {
	return p.decidePair(OpRename, src, dst, denyRenameXDev)
}

// DecideLink answers a hard link of src at dst (both canonical physical
// paths). Both ends are decided as OpLink: a hard link needs write access at
// the new name and at the source's physical path, or a file from a read-only
// area could be linked into a writable one and written through. The ends
// combine as in DecideRename, with rule "link:cross-root" for EXDEV.
func (p *Policy) DecideLink(src, dst string) Decision {
	return p.decidePair(OpLink, src, dst, denyLinkXDev)
}

func (p *Policy) decidePair(op Op, src, dst string, xdev Decision) Decision {
	ds, as, fs := p.decide(op, src)
	dd, ad, fd := p.decide(op, dst)
	return p.pairGit(op, src, dst, as, ad, combine(ds, dd, as, ad, fs, fd, xdev))
}

// pairGit applies the repository rule's rename transitions (git.go) to an
// allowed rename.
func (p *Policy) pairGit(op Op, src, dst string, as, ad *area, d Decision) Decision {
	if op != OpRename || !d.Allow {
		return d
	}
	if gd, ok := p.gitRename(src, dst, as, ad); !ok {
		return gd
	}
	return d
}

// combine is the rule of DecideRename for two ends' decisions, areas and
// finality.
func combine(ds, dd Decision, as, ad *area, fs, fd bool, xdev Decision) Decision {
	switch {
	case fs:
		return ds
	case fd:
		return dd
	case ds.Allow && dd.Allow:
		if as != ad {
			return xdev
		}
		return ds
	case !ds.Allow && !dd.Allow && ds.Errno == dd.Errno:
		return ds
	default:
		return xdev
	}
}

// decide is Decide, also returning the area that decided (nil when the path
// was refused before an area was found) and whether the decision is final
// for a rename or link whatever the other end is: a refusal for the path's
// shape, a none root, a device, a protected key or its ancestor.
func (p *Policy) decide(op Op, path string) (Decision, *area, bool) {
	gs := p.prot.cur.Load()
	d, a, final := p.decideIn(gs, op, path)
	if op == OpRead || !d.Allow {
		return d, a, final
	}
	if gd, ok := p.gitDecide(gs, op, path, a); !ok {
		return gd, a, true
	}
	return d, a, final
}

// decideIn is decide against the guard set gs.
func (p *Policy) decideIn(gs *guardSet, op Op, path string) (Decision, *area, bool) {
	if len(path) == 0 || path[0] != '/' {
		return denyNotAbsolute, nil, true
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	if !canonical(path) {
		return denyNotCanon, nil, true
	}
	var a *area
	var g *guard
	var above bool
	// A name on the way to a protected key may not be removed, moved, or
	// made into anything but a directory: a symlinked or gitdir-pointer .git
	// made after Compile would lead around the protection. (A root itself
	// cannot be created; only names strictly inside one are checked for
	// the creating ops.)
	creates := op == OpSymlink || op == OpCreate || op == OpLink || op == OpMknod || op == OpMknodDevice
	checkAncestor := op == OpRename || op == OpUnlink || op == OpRmdir || creates
	if p.useIndex {
		a, g, above = p.lookupIndex(gs, path, checkAncestor)
	} else {
		a, g, above = p.lookupScan(gs, path, checkAncestor)
	}
	if above && creates && len(path) <= len(a.path) {
		g = nil
	}
	switch {
	case a.access == AccessNone:
		return a.write, a, true
	case op == OpRead:
		return a.read, a, false
	case op == OpMknodDevice && p.spec.Mode != ModeFullAccess:
		return denyDevice, a, true
	case g != nil:
		// Final: a rename or link that creates, replaces or moves a
		// protected name is a write to it (EACCES), not a cross-root move;
		// EXDEV would only send mv and git into a copy that fails later with
		// a less clear error.
		return g.deny, a, true
	default:
		return a.write, a, false
	}
}

// lookupScan finds the most specific area and a guard that applies, scanning
// every area and guard; best for a handful of roots. A guard the path is
// under is preferred to one the path is an ancestor of; above reports the
// latter.
func (p *Policy) lookupScan(gs *guardSet, path string, checkAncestor bool) (a *area, g *guard, above bool) {
	a = &p.outside
	for i := range p.areas {
		if identity.Within(path, p.areas[i].path) {
			a = &p.areas[i]
			break
		}
	}
	for _, g := range gs.inner {
		if identity.Within(path, g.key) {
			return a, g, false
		}
	}
	if checkAncestor {
		for i := range gs.guards {
			if identity.Within(gs.guards[i].key, path) {
				return a, &gs.guards[i], true
			}
		}
	}
	return a, nil, false
}

// lookupIndex finds the same answer as lookupScan with one map lookup per
// ancestor of path (the path itself first) whose length is the length of an
// index key.
func (p *Policy) lookupIndex(gs *guardSet, path string, checkAncestor bool) (a *area, g *guard, above bool) {
	for _, n := range p.alens { // longest first
		if onBoundary(path, n) {
			if x := p.aindex[path[:n]]; x != nil {
				a = x
				break
			}
		}
	}
	if a == nil {
		a = &p.outside
	}
	for _, n := range gs.glens { // longest first
		if onBoundary(path, n) {
			if x := gs.gindex[path[:n]]; x != nil {
				return a, x, false
			}
		}
	}
	if checkAncestor {
		g = gs.above[path]
		above = g != nil
	}
	return a, g, above
}

// onBoundary reports whether path[:n] is path or one of its ancestors.
func onBoundary(path string, n int) bool {
	return n <= len(path) && (n == len(path) || n == 1 || path[n] == '/')
}

// canonical reports whether an absolute path has no empty, "." or ".."
// component and no trailing "/" ("/" itself is fine).
func canonical(path string) bool {
	if path == "/" {
		return true
	}
	if path[len(path)-1] == '/' || strings.Contains(path, "//") {
		return false
	}
	for rest := path; ; {
		i := strings.Index(rest, "/.")
		if i < 0 {
			return true
		}
		rest = rest[i+2:]
		if rest == "" || rest[0] == '/' || (rest[0] == '.' && (len(rest) == 1 || rest[1] == '/')) {
			return false
		}
	}
}
