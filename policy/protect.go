package policy

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// Protection that follows the host (DESIGN.md, "Protected subpaths").
//
// The protected set is computed from the file system: the guard keys (the
// lexical R/S and its target key, the gitdir a pointer file names), the
// (dev, ino) of every object at or below a key that exists, and the names on
// the way to a key in the directories that hold them. A host can change any
// of that after Compile (`mv .git .git.real; ln -s decoy .git`, a gitdir
// pointer written later, `ln .git/config alias`), so the set carries the
// lstat(2) results it was computed from (its witnesses): a decision that
// could allow a write first lstats the witnesses again, a handful of
// syscalls, and recomputes the set when any of them changed.
//
// Protection is monotone for the life of a Policy: a key, an inode or a name
// once protected stays protected after a recompute (the host may swap .git
// back and forth; a name written while it was not live would become a live
// hook on the next swap). A recycled inode number is told from the protected
// object by its birth time (statx(2) STATX_BTIME) where the file system
// keeps one.

// maxGuards bounds the guard keys (current and remembered) of one set, and
// maxScan the objects recorded below protected directories.
const (
	maxGuards = 1024
	maxScan   = 4096
)

// protection is the host-dependent part of a Policy, shared by its copies.
type protection struct {
	mu  sync.Mutex // serializes recomputes
	cur atomic.Pointer[guardSet]
}

// guardSet is one computed protected set; immutable once stored.
type guardSet struct {
	guards []guard           // current keys (in the order of Spec.Protected), then remembered ones
	inner  []*guard          // guards, longest key first
	gindex map[string]*guard // guards by key
	glens  []int             // the lengths of the gindex keys, longest first
	above  map[string]*guard // strict ancestors of guard keys: the first guard below
	ids    map[identity.FileID]idGuard
	names  map[dirName]nameGuard
	wit    []witness
	// linked are the gitdirs and common dirs of the writable roots'
	// top-level repositories (a symlinked .git, a "gitdir:" pointer, a
	// worktree's commondir), wherever they lie: the repository rule
	// treats them as git directories (git.go).
	linked []string
}

// idGuard protects one object by its identity.
type idGuard struct {
	g     *guard
	dir   bool                // names inside it are protected too
	btime unix.StatxTimestamp // zero when the file system keeps none
}

// dirName is a name in a directory known by its identity.
type dirName struct {
	dir  identity.FileID
	name string
}

// nameGuard protects a name on the way to a guard key (above) or at it.
type nameGuard struct {
	g     *guard
	above bool
	btime unix.StatxTimestamp // of the directory
}

// witness is one lstat(2) result the set was computed from.
type witness struct {
	path   string
	exists bool
	mode   uint32
	id     identity.FileID
	ctime  unix.Timespec // compared only when withCtime
	withCt bool
}

func (w *witness) same() bool {
	var st unix.Stat_t
	err := unix.Lstat(w.path, &st)
	if err != nil {
		return !w.exists
	}
	if !w.exists || st.Mode&unix.S_IFMT != w.mode || st.Dev != w.id.Dev || st.Ino != w.id.Ino {
		return false
	}
	return !w.withCt || st.Ctim == w.ctime
}

// valid reports whether every witness still holds.
func (gs *guardSet) valid() bool {
	for i := range gs.wit {
		if !gs.wit[i].same() {
			return false
		}
	}
	return true
}

// refresh returns the current guard set, recomputed first when a witness
// changed on the host.
func (p *Policy) refresh() *guardSet {
	gs := p.prot.cur.Load()
	if gs.valid() {
		return gs
	}
	p.prot.mu.Lock()
	defer p.prot.mu.Unlock()
	if now := p.prot.cur.Load(); now != gs {
		return now // another caller recomputed meanwhile
	}
	gs = p.computeGuards(gs, nil)
	p.prot.cur.Store(gs)
	return gs
}

// Object names the object an operation acts on by identity, for the checks
// that follow the host. Self is the (dev, ino) of the existing object the
// operation changes (open for write, setattr, xattrs, fallocate, the source
// of a link); Dir is the directory holding Name, for operations on a name
// (create, mkdir, mknod, symlink, link, unlink, rmdir, rename). A zero
// FileID means unknown and is not checked.
type Object struct {
	Self identity.FileID
	Dir  identity.FileID
	Name string
}

// DecideAt is Decide for an operation on a known object: the path decision
// of Decide, and for a write it allows, the protection that follows the host.
// The protected set is revalidated first (the lstat(2) of a handful of
// witnesses; recomputed when one changed), then:
//   - obj.Self is a protected object (a hard link to a protected file, a
//     protected directory renamed on the host): EACCES "protected:<entry>";
//   - obj.Dir is a protected directory: EACCES, every write of a name in it;
//   - obj.Name in obj.Dir is a protected name or one on the way to a
//     protected key: as for paths (EACCES for every write at a protected
//     name; for rename, unlink, rmdir and non-directory creates at a name on
//     the way).
//
// The rule for hard links: a write to an existing object is decided at the
// physical path the caller names (the name it was reached by) and by the
// object's identity. Every name of a protected inode is therefore refused,
// whichever name was looked up first; any other inode gets the decision of
// the area its path lies in, and since areas do not overlap between names
// of one mount except through protection, that is the same for every name.
//
// Unlike Decide, DecideAt makes system calls: lstat(2) of the witnesses for
// a write the path rules allow, statx(2) to tell a protected inode from a
// recycled number.
func (p *Policy) DecideAt(op Op, physicalPath string, obj Object) Decision {
	d, _, _ := p.decideAt(op, physicalPath, obj)
	return d
}

// DecideRenameAt is DecideRename with the objects of both ends (their
// directories and names), checked as DecideAt checks them.
func (p *Policy) DecideRenameAt(src, dst string, so, do Object) Decision {
	return p.decidePairAt(OpRename, src, dst, so, do, denyRenameXDev)
}

// DecideLinkAt is DecideLink with the objects of both ends: so.Self is the
// inode being linked (a protected inode may get no new name), do the new
// name's directory and name.
func (p *Policy) DecideLinkAt(src, dst string, so, do Object) Decision {
	return p.decidePairAt(OpLink, src, dst, so, do, denyLinkXDev)
}

func (p *Policy) decidePairAt(op Op, src, dst string, so, do Object, xdev Decision) Decision {
	ds, as, fs := p.decideAt(op, src, so)
	dd, ad, fd := p.decideAt(op, dst, do)
	return p.pairGit(op, src, dst, as, ad, combine(ds, dd, as, ad, fs, fd, xdev))
}

func (p *Policy) decideAt(op Op, path string, obj Object) (Decision, *area, bool) {
	if op == OpRead {
		return p.decide(op, path)
	}
	if d, a, final := p.decideIn(p.prot.cur.Load(), op, path); !d.Allow {
		return d, a, final
	}
	gs := p.refresh()
	d, a, final := p.decideIn(gs, op, path)
	if !d.Allow {
		return d, a, final
	}
	if gd, ok := p.gitDecide(gs, op, path, a); !ok {
		return gd, a, true
	}
	if g := gs.objectGuard(op, path, obj); g != nil {
		return g.deny, a, true
	}
	return d, a, false
}

// objectGuard returns the guard that protects obj against op, if any.
func (gs *guardSet) objectGuard(op Op, path string, obj Object) *guard {
	var zero identity.FileID
	if obj.Self != zero {
		if ig, ok := gs.ids[obj.Self]; ok && sameBirth(path, obj.Self, ig.btime) {
			return ig.g
		}
	}
	if obj.Dir == zero {
		return nil
	}
	dir := parentOf(path)
	if ig, ok := gs.ids[obj.Dir]; ok && ig.dir && sameBirth(dir, obj.Dir, ig.btime) {
		return ig.g
	}
	if ng, ok := gs.names[dirName{obj.Dir, obj.Name}]; ok && sameBirth(dir, obj.Dir, ng.btime) {
		if !ng.above {
			return ng.g
		}
		switch op {
		case OpRename, OpUnlink, OpRmdir, OpSymlink, OpCreate, OpLink, OpMknod:
			return ng.g
		}
	}
	return nil
}

// sameBirth reports whether the object at path, when it is id, was born at
// btime; it answers true whenever that cannot be told (no birth time kept,
// path names another object now), so a doubt protects.
func sameBirth(path string, id identity.FileID, btime unix.StatxTimestamp) bool {
	if btime == (unix.StatxTimestamp{}) {
		return true
	}
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &stx) != nil ||
		stx.Ino != id.Ino || unix.Mkdev(stx.Dev_major, stx.Dev_minor) != id.Dev || stx.Mask&unix.STATX_BTIME == 0 {
		return true
	}
	return stx.Btime == btime
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// ObserveLink tells the policy that the server is about to present (or
// follow) the symlink at physical path linkPath with the given text. When
// the link lies on the way to a protected key (a .git swapped for a symlink
// on the host) or is one, the keys reached through this very text are
// protected before the kernel can walk it, even if the host changes the link
// again before the next decision. Other paths cost one map lookup.
func (p *Policy) ObserveLink(linkPath, text string) {
	gs := p.prot.cur.Load()
	if gs.gindex[linkPath] == nil && gs.above[linkPath] == nil {
		return
	}
	base := text
	if !filepath.IsAbs(text) {
		base = filepath.Join(parentOf(linkPath), text)
	}
	var extra []guard
	for _, g := range gs.guards {
		if !identity.Within(g.key, linkPath) {
			continue
		}
		k, err := identity.TargetKey(base + g.key[len(linkPath):])
		if err != nil {
			continue
		}
		if gs.gindex[k] == nil {
			extra = append(extra, guard{key: k, deny: g.deny})
		}
	}
	p.prot.mu.Lock()
	defer p.prot.mu.Unlock()
	if len(extra) == 0 && p.prot.cur.Load().valid() {
		return
	}
	p.prot.cur.Store(p.computeGuards(p.prot.cur.Load(), extra))
}

// computeGuards computes the protected set from the file system: the guards
// of every writable explicit root, then extra, then prev's guards, inodes and
// names (remembered), with the witnesses of the current keys.
func (p *Policy) computeGuards(prev *guardSet, extra []guard) *guardSet {
	c := &compiler{spec: p.spec, seen: map[string]bool{}}
	roots := p.spec.WritableRoots()
	for _, r := range roots {
		c.protect(r)
	}
	// Places outside the roots: by identity; their witnesses start at
	// their own directory, never at /, whose directories on the way (a
	// busy /tmp, the parent's project root) would make every write
	// recompute the set.
	outside := map[string]bool{}
	for _, po := range p.spec.ProtectedOutside {
		n := len(c.guards)
		c.guardPath(po, po)
		for _, g := range c.guards[n:] {
			outside[g.key] = true
		}
	}
	for _, g := range extra {
		c.addGuard(g)
	}
	live := len(c.guards) // the keys the witnesses watch
	if prev != nil {
		for _, g := range prev.guards {
			c.addGuard(g)
		}
	}
	gs := &guardSet{
		guards: c.guards,
		ids:    map[identity.FileID]idGuard{},
		names:  map[dirName]nameGuard{},
	}
	gs.buildIndex()

	// The witnesses: below the root, the first name on the way to each
	// key, then every directory on the way and the key itself, each with
	// its ctime. A directory's ctime changes whenever an entry in it is
	// created, removed or renamed, so the names below it need no lstat of
	// their own; the root itself is not watched (a busy project root would
	// recompute the set at every file created there).
	seen := map[string]*witness{}
	stat := func(path string) *witness {
		if w := seen[path]; w != nil {
			return w
		}
		w := &witness{path: path, withCt: true}
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			w.exists, w.mode, w.ctime = true, st.Mode&unix.S_IFMT, st.Ctim
			w.id = identity.FileID{Dev: st.Dev, Ino: st.Ino}
		}
		seen[path] = w
		return w
	}
	watched := map[string]bool{}
	watch := func(w *witness) {
		if !watched[w.path] {
			watched[w.path] = true
			gs.wit = append(gs.wit, *w)
		}
	}
	scanned := 0
	for i := 0; i < live; i++ {
		g := &gs.guards[i]
		from := "/"
		for _, r := range roots {
			if identity.Within(g.key, r) {
				from = r
				break
			}
		}
		if from == "/" && outside[g.key] {
			from = parentOf(g.key)
		}
		parent := stat(from)
		if outside[g.key] && (!parent.exists || parent.mode != unix.S_IFDIR) {
			// Its directory is not there yet: when it is made, the
			// set is computed again and the place watched from there.
			watch(parent)
		}
		first := true
		for rest := strings.TrimPrefix(g.key[len(from):], "/"); rest != "" && parent.exists && parent.mode == unix.S_IFDIR; first = false {
			name, tail, _ := strings.Cut(rest, "/")
			rest = tail
			path := filepath.Join(parent.path, name)
			w := stat(path)
			if first || rest == "" || (w.exists && w.mode == unix.S_IFDIR) {
				watch(w)
			}
			ng := nameGuard{g: g, above: rest != "", btime: birth(parent.path)}
			if old, ok := gs.names[dirName{parent.id, name}]; !ok || (old.above && !ng.above) {
				gs.names[dirName{parent.id, name}] = ng
			}
			parent = w
		}
		if parent.path == g.key && parent.exists {
			scanned = gs.record(g, g.key, parent.mode == unix.S_IFDIR, scanned)
		}
	}
	// The repository rule decides git's names by path (git.go); the
	// top-level repository of each writable root and of each
	// ProtectedRepos directory, and every repository enclosing one (a
	// root below a repository's top: the git the user runs there reads
	// that one's config and hooks), is also protected by
	// identity, so a hard link the host makes to its config or a hook is
	// refused under every name, inside the roots too. Its gitdir, common
	// dir and hooks directories are witnesses: git replaces config by a
	// rename, which changes the gitdir's ctime, and the new inode is
	// recorded then.
	var tops []string
	for _, r := range append(slices.Clone(roots), p.spec.ProtectedRepos...) {
		if !slices.Contains(tops, r) {
			tops = append(tops, r)
		}
		for _, t := range gitTops(r) {
			if t.dir != r && !slices.Contains(tops, t.dir) {
				tops = append(tops, t.dir)
			}
		}
	}
	for _, r := range tops {
		gitdir := dotGit(r)
		w := stat(gitdir)
		watch(w)
		if !w.exists {
			continue
		}
		if w.mode != unix.S_IFDIR && w.mode != unix.S_IFLNK {
			g, ok := gitdirOf(r)
			if !ok {
				continue
			}
			gitdir = g
		}
		dirs := []string{gitdir}
		if common, ok := commondirOf(gitdir); ok && common != gitdir {
			dirs = append(dirs, common)
		}
		for _, d := range dirs {
			if k, err := identity.TargetKey(d); err == nil {
				d = k
			}
			gs.linked = append(gs.linked, d)
			dw := stat(d)
			watch(dw)
			watch(stat(d + "/hooks"))
			for _, name := range GitNames {
				x := stat(d + "/" + name)
				g := &guard{key: x.path, deny: Decision{Errno: syscall.EACCES, Rule: "protected:git:.git/" + name}}
				if dw.exists {
					gs.names[dirName{dw.id, name}] = nameGuard{g: g, btime: birth(d)}
				}
				if x.exists {
					scanned = gs.record(g, x.path, x.mode == unix.S_IFDIR, scanned)
				}
			}
		}
	}
	if prev != nil {
		for id, ig := range prev.ids {
			if _, ok := gs.ids[id]; !ok {
				gs.ids[id] = idGuard{g: gs.remembered(ig.g), dir: ig.dir, btime: ig.btime}
			}
		}
		for k, ng := range prev.names {
			if _, ok := gs.names[k]; !ok {
				gs.names[k] = nameGuard{g: gs.remembered(ng.g), above: ng.above, btime: ng.btime}
			}
		}
	}
	return gs
}

// remembered returns gs's guard for the key of g, an earlier set's guard;
// g itself once maxGuards left the key out.
func (gs *guardSet) remembered(g *guard) *guard {
	if x := gs.gindex[g.key]; x != nil {
		return x
	}
	return g
}

// record protects the object at path by identity, and everything below it
// when it is a directory (up to maxScan objects in all); it returns the new
// count of scanned objects.
func (gs *guardSet) record(g *guard, path string, dir bool, scanned int) int {
	var stx unix.Statx_t
	if scanned >= maxScan || unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_TYPE|unix.STATX_BTIME, &stx) != nil {
		return scanned
	}
	scanned++
	id := identity.FileID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino}
	ig := idGuard{g: g, dir: dir}
	if stx.Mask&unix.STATX_BTIME != 0 {
		ig.btime = stx.Btime
	}
	if _, ok := gs.ids[id]; !ok {
		gs.ids[id] = ig
	}
	if !dir {
		return scanned
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return scanned
	}
	buf := make([]byte, 8192)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	unix.Close(fd)
	for _, name := range names {
		var st unix.Stat_t
		child := filepath.Join(path, name)
		if unix.Lstat(child, &st) != nil {
			continue
		}
		scanned = gs.record(g, child, st.Mode&unix.S_IFMT == unix.S_IFDIR, scanned)
	}
	return scanned
}

// birth returns the birth time of the object at path, zero when unknown.
func birth(path string) unix.StatxTimestamp {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return unix.StatxTimestamp{}
	}
	return stx.Btime
}

// buildIndex builds the lookup structures of the guards.
func (gs *guardSet) buildIndex() {
	gs.gindex = map[string]*guard{}
	gs.above = map[string]*guard{}
	for i := range gs.guards {
		g := &gs.guards[i]
		// Innermost first, so both lookups report the innermost guard a
		// path is under; gs.guards keeps the spec's order for the
		// ancestor rule.
		gs.inner = append(gs.inner, g)
		if gs.gindex[g.key] == nil {
			gs.gindex[g.key] = g
		}
		// Each proper ancestor of the key (clean and absolute: cut at its
		// last "/", no copy), up to the first one a guard added before
		// reached: that guard added the rest already, so the index is
		// built in time linear in the keys' total length.
		for q := g.key; q != "/"; {
			i := strings.LastIndexByte(q, '/')
			if q = q[:i]; i == 0 {
				q = "/"
			}
			if gs.above[q] != nil {
				break
			}
			gs.above[q] = g
		}
	}
	sort.SliceStable(gs.inner, func(i, j int) bool { return len(gs.inner[i].key) > len(gs.inner[j].key) })
	gs.glens = keyLengths(gs.gindex)
}
