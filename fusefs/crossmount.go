package fusefs

// Mounts inside a session mount's root (DESIGN.md, "The mount": mounts
// inside the root). A lookup that crosses into another mount (a bind mount
// of another directory, a tmpfs, a device) serves what that mount shows,
// but the policy decides there at the object's real location: the host
// path of the mount's source (mountSources, the host view's rule), not the
// path inside the root. A mount with no other host path (a tmpfs, an
// overlay, a device mounted only there) is part of the project: decided
// at its path inside the root, as the mount around it decides it.

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// crossings are the mounts inside a session mount's root that its lookups
// crossed into, each with the host paths of its source. The mount table is
// read only when a lookup crosses into a mount not known yet (one read per
// mount, cached by its unique id), and by Server.Decide.
type crossings struct {
	root string // the mount's physical root
	mu   sync.Mutex
	byID map[uint64]*crossed // by unique mount id (STATX_MNT_ID_UNIQUE)
	// list is the snapshot read without the lock: one entry per mount
	// point, nil or empty while no lookup crossed a mount.
	list atomic.Pointer[[]*crossed]
	// mapped is set while one of them has a source: only then is a path
	// decided elsewhere than where it is (a tmpfs alone changes nothing).
	mapped atomic.Bool
	// hide holds the places hidden as in the host view (DefaultHidden,
	// Config.Hidden, the other sessions' places in Config.Shared): a
	// mount whose source lies there is hidden (EACCES "hostview:hidden").
	hide *hostView
}

// crossed is one mount inside the root.
type crossed struct {
	id    uint64   // unique mount id; 0 when learned from the mount table
	point string   // its mount point, the physical path inside the root
	srcs  []string // host paths of its source (mountSources); none: part of the project
}

// newCrossings returns the crossings of a mount of root that hides what
// the host view hides (DefaultHidden, hidden, shared's places of owners
// other than owner).
func newCrossings(root string, hidden []string, shared *PlaceIndex, owner string) *crossings {
	h := &hostView{shared: shared, owner: owner, links: map[string]string{}, defHide: DefaultHidden}
	list := append([]string(nil), hidden...)
	h.hidden.Store(&list)
	return &crossings{root: root, byID: map[uint64]*crossed{}, hide: h}
}

// active reports whether a mount inside the root with a source is known:
// only then can a path be decided elsewhere than where it is.
func (cs *crossings) active() bool {
	return cs != nil && cs.mapped.Load()
}

// known reports whether any mount inside the root is known.
func (cs *crossings) known() bool {
	if cs == nil {
		return false
	}
	l := cs.list.Load()
	return l != nil && len(*l) > 0
}

// entries returns the list published last.
func (cs *crossings) entries() []*crossed {
	if l := cs.list.Load(); l != nil {
		return *l
	}
	return nil
}

// store publishes next as the list (cs.mu held).
func (cs *crossings) store(next []*crossed) {
	mapped := false
	for _, c := range next {
		mapped = mapped || len(c.srcs) > 0
	}
	cs.list.Store(&next)
	cs.mapped.Store(mapped)
}

// innermost returns the known mount whose point holds p, the innermost one,
// with strict one whose point is not p itself; nil when none.
func (cs *crossings) innermost(p string, strict bool) *crossed {
	var best *crossed
	for _, c := range cs.entries() {
		if (strict && c.point == p) || !identity.Within(p, c.point) {
			continue
		}
		if best == nil || len(c.point) > len(best.point) {
			best = c
		}
	}
	return best
}

// sources returns the host paths at which the policy decides the physical
// path p inside the root: nil when p is decided at p (no known mount holds
// it, or the mounts holding it have no other host path). Several paths when
// the mount's file system is visible at several places: the most
// restrictive decision among them is the answer (decideSources).
func (cs *crossings) sources(p string) []string {
	if !cs.active() {
		return nil
	}
	c := cs.innermost(p, false)
	if c == nil {
		return nil
	}
	return cs.from(c, p)
}

// from returns the paths that decide p, which lies in the mount c.
func (cs *crossings) from(c *crossed, p string) []string {
	bases := c.srcs
	if len(bases) == 0 {
		// No other host path: where it is mounted, as the mount around
		// its point decides it.
		outer := cs.innermost(c.point, true)
		if outer == nil {
			return nil
		}
		if bases = cs.from(outer, c.point); bases == nil {
			return nil
		}
	}
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = identity.Rebase(p, c.point, b)
	}
	return out
}

// mountIDs returns the unique and the reusable (mountinfo's) id of the
// mount that the descriptor fd lies in, without a request to a FUSE server
// (AT_STATX_DONT_SYNC). unique is 0 when the kernel cannot say.
func mountIDs(fd int) (unique, id uint64, err error) {
	var stx unix.Statx_t
	const flags = unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_DONT_SYNC
	if err := unix.Statx(fd, "", flags, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, 0, unix.ENODATA
	}
	id = stx.Mnt_id
	if unix.Statx(fd, "", flags, unix.STATX_MNT_ID_UNIQUE, &stx) == nil && stx.Mask&unix.STATX_MNT_ID_UNIQUE != 0 {
		unique = stx.Mnt_id
	}
	return unique, id, nil
}

// denyMountUnknown refuses a mount inside the root whose source could not
// be looked for (the mount table unreadable, the mount gone from it
// between the open and the read): it may be a bind of a none root.
var denyMountUnknown = policy.Decision{Errno: syscall.EACCES, Rule: "mount:unknown"}

// crossInto opens name in dirfd (physical path p), a mount point inside the
// root, as openPathStat does, and learns the mount it enters: its source
// from the mount table the first time that mount is seen. A mount whose
// source cannot be looked for is refused (a *denial, denyMountUnknown) and
// the descriptor closed.
func (cs *crossings) crossInto(dirfd int, name, p string) (int, syscall.Stat_t, error) {
	fd, st, err := openPathStat(dirfd, name)
	if err != nil {
		return fd, st, err
	}
	refuse := func() (int, syscall.Stat_t, error) {
		unix.Close(fd)
		return -1, syscall.Stat_t{}, &denial{denyMountUnknown}
	}
	unique, id, ierr := mountIDs(fd)
	if ierr != nil {
		return refuse()
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.byID[unique]; unique != 0 && c != nil && c.point == p {
		return fd, st, nil
	}
	data, rerr := os.ReadFile("/proc/self/mountinfo")
	if rerr != nil {
		return refuse()
	}
	all := identity.ParseMountinfo(string(data))
	table := make(map[string]MountEntry, len(all))
	for _, e := range all { // parseMountinfo's table, from the same parse
		table[e.Point] = MountEntry{Dev: e.Dev, FSType: e.FSType, Root: e.Root, Source: e.Source}
	}
	for _, e := range all {
		if uint64(e.ID) == id {
			c := &crossed{id: unique, point: p,
				srcs: mountSources(table, e.Point, MountEntry{Dev: e.Dev, FSType: e.FSType, Root: e.Root, Source: e.Source})}
			if unique != 0 {
				cs.byID[unique] = c
			}
			cs.put(c)
			return fd, st, nil
		}
	}
	return refuse()
}

// learnTable registers, from the mount table, every mount strictly inside
// the root for which want(point) holds, replacing what is known at those
// points: Server.Decide asks before any lookup may have crossed, and an
// adopted connection's restored nodes never were looked up.
func (cs *crossings) learnTable(want func(point string) bool) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	table := parseMountinfo(string(data))
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for mp, e := range table {
		if mp == cs.root || !identity.Within(mp, cs.root) || !want(mp) {
			continue
		}
		cs.put(&crossed{point: mp, srcs: mountSources(table, mp, e)})
	}
	// What is known there but no longer mounted is the project again.
	var next []*crossed
	for _, c := range cs.entries() {
		if _, ok := table[c.point]; ok || !want(c.point) {
			next = append(next, c)
		} else if c.id != 0 {
			delete(cs.byID, c.id)
		}
	}
	cs.store(next)
}

// put replaces the entry at c.point with c (cs.mu held).
func (cs *crossings) put(c *crossed) {
	var next []*crossed
	if l := cs.list.Load(); l != nil {
		for _, o := range *l {
			switch {
			case o.point != c.point:
				next = append(next, o)
			case o.id != 0 && cs.byID[o.id] == o:
				// Replaced: its mount is learned again at its next crossing.
				delete(cs.byID, o.id)
			}
		}
	}
	next = append(next, c)
	cs.store(next)
}

// notMount drops what is known at the point p, where a lookup found no
// mount (unmounted since): p is part of the project again.
func (cs *crossings) notMount(p string) {
	if !cs.known() {
		return
	}
	found := false
	for _, c := range cs.entries() {
		if c.point == p {
			found = true
		}
	}
	if !found {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var next []*crossed
	for _, o := range cs.entries() {
		if o.point != p {
			next = append(next, o)
		} else if o.id != 0 {
			delete(cs.byID, o.id)
		}
	}
	cs.store(next)
}

// points returns the mount points known, for SetPolicy's invalidations.
func (cs *crossings) points() []string {
	if !cs.known() {
		return nil
	}
	var out []string
	for _, c := range cs.entries() {
		out = append(out, c.point)
	}
	return out
}

// decideAt is the decision at q, a host path of a mount's source: a place
// the host view hides is hidden (EACCES "hostview:hidden"), else the
// policy decides as anywhere (a none root EACCES, a read-only root or a
// place outside every root EROFS on write).
func (cs *crossings) decideAt(pol *policy.Policy, op policy.Op, q string, obj policy.Object) policy.Decision {
	if hidden, _ := cs.hide.hiddenIn(pol, q); hidden {
		return denyHidden
	}
	return pol.DecideAt(op, q, obj)
}

// severity orders refusals: an allow, a refusal, an EACCES (hidden, none).
func severity(d policy.Decision) int {
	switch {
	case d.Allow:
		return 0
	case d.Errno == syscall.EACCES:
		return 2
	}
	return 1
}

// decideSources decides op at every path of srcs (sources) and returns the
// most restrictive decision, the first of equal ones.
func (cs *crossings) decideSources(pol *policy.Policy, op policy.Op, srcs []string, obj policy.Object) policy.Decision {
	var worst policy.Decision
	for i, q := range srcs {
		if d := cs.decideAt(pol, op, q, obj); i == 0 || severity(d) > severity(worst) {
			worst = d
		}
	}
	return worst
}

// decidePair is decideSources for the two ends of a rename (link false) or
// a hard link: src and dst are the paths inside the root, ss and ds their
// sources (nil: the path itself).
func (cs *crossings) decidePair(pol *policy.Policy, link bool, src, dst string, ss, ds []string, so, do policy.Object) policy.Decision {
	if ss == nil {
		ss = []string{src}
	}
	if ds == nil {
		ds = []string{dst}
	}
	var worst policy.Decision
	first := true
	for _, s := range ss {
		for _, t := range ds {
			var d policy.Decision
			switch {
			case cs.hiddenAt(pol, s) || cs.hiddenAt(pol, t):
				d = denyHidden
			case link:
				d = pol.DecideLinkAt(s, t, so, do)
			default:
				d = pol.DecideRenameAt(s, t, so, do)
			}
			if first || severity(d) > severity(worst) {
				worst, first = d, false
			}
		}
	}
	return worst
}

// hiddenAt reports whether the host path q is hidden as in the host view.
func (cs *crossings) hiddenAt(pol *policy.Policy, q string) bool {
	hidden, _ := cs.hide.hiddenIn(pol, q)
	return hidden
}

// listFilter returns the filter of a listing of dir, a physical path inside
// the root, when dir lies in a mount with a source: a name hidden at one
// of dir's sources (the place it shows, a passage included: decideAt
// refuses its lookup, EACCES "hostview:hidden") is not listed, as the host
// view lists no hidden name at the source's own path (hostView.listFilter).
// nil, with no work per name, when no hidden place lies strictly inside a
// source (most directories), or dir is decided where it is.
func (cs *crossings) listFilter(pol *policy.Policy, dir string) func(string) bool {
	var below []string
	for _, q := range cs.sources(dir) {
		if cs.hide.hidesBelow(q) {
			below = append(below, q)
		}
	}
	if len(below) == 0 {
		return nil
	}
	return func(name string) bool {
		for _, q := range below {
			if cs.hiddenAt(pol, join(q, name)) {
				return false
			}
		}
		return true
	}
}

// openChild opens name in dirfd (physical path p) as openPathStat does,
// and notices a crossing into another mount (RESOLVE_NO_XDEV: no extra
// system call when there is none), which it learns (crossInto).
func (cs *crossings) openChild(dirfd int, name, p string) (int, syscall.Stat_t, error) {
	if cs == nil {
		return openPathStat(dirfd, name)
	}
	fd, err := retryFd(func() (int, error) {
		return unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	})
	switch {
	case err == unix.EXDEV:
		return cs.crossInto(dirfd, name, p)
	case err == unix.ENOSYS:
		return openPathStat(dirfd, name)
	case err == nil:
		cs.notMount(p)
	}
	return statOpened(fd, err)
}

// checkCrossRead decides a read of the physical path p (lookup, open,
// opendir, readlink) when it lies in a mount inside the root whose source
// decides it (crossRead); 0 otherwise, as reads inside the root are never
// refused.
func (m *mount) checkCrossRead(ctx context.Context, op, p string) syscall.Errno {
	if d, ok := m.crossRead(p); !ok {
		return m.deny(ctx, op, p, d)
	}
	return 0
}

// crossRead is the read decision at the physical path p inside the root
// when a mount there has a source that decides it: false with the
// refusal, true otherwise.
func (m *mount) crossRead(p string) (policy.Decision, bool) {
	srcs := m.cross.sources(p)
	if srcs == nil {
		return policy.Decision{}, true
	}
	d := m.cross.decideSources(m.policy(), policy.OpRead, srcs, policy.Object{})
	return d, d.Allow
}

// lookupRead is what a lookup of the physical path p decides before it
// serves the name (node.Lookup): on a host view the read at p (its own
// rules, then the policy), on a session mount the read at p's sources
// (crossRead). False with the refusal.
func (m *mount) lookupRead(p string) (policy.Decision, bool) {
	if m.host != nil {
		d := m.judge(policy.OpRead, p, policy.Object{})
		return d, d.Allow
	}
	return m.crossRead(p)
}

// way decides the lookups a process makes on its way from the mount's
// root to the physical path p: every name strictly between them, each as
// lookupRead decides it, the first refusal returned with false. A path
// below a nested mount is reached only through the mounts around it, so
// a mount around it that refuses (a bind of a none root holding a bind of
// a read-write one) refuses the path, whatever decides at p itself. On a
// host view the way ends at a session link (what lies below is another
// mount's). True when every lookup passes, or p is not below the root.
func (m *mount) way(p string) (policy.Decision, bool) {
	root := m.root
	if p == root || !identity.Within(p, root) {
		return policy.Decision{}, true
	}
	for i := len(root) + 1; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		q := p[:i]
		if m.host != nil {
			if _, ok := m.host.links[q]; ok {
				return policy.Decision{}, true
			}
		}
		if d, ok := m.lookupRead(q); !ok {
			return d, false
		}
	}
	return policy.Decision{}, true
}
