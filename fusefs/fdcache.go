package fusefs

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/transport"
)

// Descriptors as a bounded cache (DESIGN.md, "Round 4": descriptors as a
// cache). A node is bound to its backing object by the object's file handle
// (name_to_handle_at(2)) and mount ID, taken when the node is made; the
// O_PATH descriptor is an entry in one daemon-wide cache of at most
// cacheCap() open descriptors, least recently used first out. An entry is
// pinned while an operation runs on it (node.pin, node.unpin) and is never
// closed under a running system call. A node whose descriptor was closed is
// opened again on its next use: a non-directory first by its name in its
// parent directory (one name relative to the parent's descriptor, kept only
// when the file handle of what opened is the node's own, so the descriptor's
// path is the object's real one), else, and a directory always, by
// open_by_handle_at(2) on a descriptor of the node's mount. A handle that no
// longer opens an object (removed, or its inode number reused: the
// generation in the handle differs) makes the node stale: ESTALE for every
// request on it, as after a takeover.
//
// The rule that keeps one session from taking the daemon's descriptors
// (share):
//   - The cache holds at most cacheCap() descriptors: the soft
//     RLIMIT_NOFILE less a quarter of it (at least 64) left for the API's
//     connections, /dev/fuse, state memfds, inotify and open files.
//   - When it is full, a session that holds its fair part (the capacity
//     divided by the number of sessions holding descriptors) or more closes
//     its own least recently used one; a session below it closes one of the
//     session that holds the most. A walk of a huge tree thus recycles its
//     own descriptors and leaves everyone else's in place.
//   - Descriptors that cannot be closed and opened again count against the
//     session's fixed share (fixedCap): nodes of a file system without file
//     handles (without export support, or an unprivileged server, which
//     cannot use open_by_handle_at(2)) and open file and directory handles.
//     Beyond it the session's own request fails with EMFILE; other sessions
//     and the API go on.
//   - When the process meets EMFILE anyway (descriptors held elsewhere), the
//     cache closes an eighth of its entries and lowers its capacity to what
//     remains (shed), and the failed open is tried once more.

// fdCache is the daemon-wide cache of node descriptors. mu guards every
// descriptor's fd, pins and list links, and every share.
type fdCache struct {
	mu     sync.Mutex
	cap    int // 0 until first use (cacheCap)
	open   int // descriptors open, pinned, fixed or in the lists
	shares map[*share]bool
	// reopens and evictions count cache misses and closes (stats, tests).
	reopens, evictions atomic.Uint64
	shedLog            sync.Once
}

var cache = &fdCache{shares: map[*share]bool{}}

// share is one session's part of the cache: the session's evictable
// descriptors, least recently used last, and its counts. Every mount of a
// session (its mount and its host view) uses the same share.
type share struct {
	name       string
	head, tail *descriptor // most recently used first
	open       int         // descriptors of this share open
	fixed      int         // of which never evicted (no handle, file handles)
	refs       int         // mounts using this share
	watches    int         // inotify watches placed for this session's directories
}

var sharesByName = map[string]*share{} // guarded by cache.mu

// shareFor returns the share of session (a fresh one for "": a mount of no
// session), counting one more mount using it.
func shareFor(session string) *share {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if session != "" {
		if sh := sharesByName[session]; sh != nil {
			sh.refs++
			return sh
		}
	}
	sh := &share{name: session, refs: 1}
	if session != "" {
		sharesByName[session] = sh
	}
	return sh
}

// dropShare undoes one shareFor once a mount is gone; with the session's
// last mount its cached descriptors are closed at once (nodes the garbage
// collector has not found yet would otherwise hold them).
func dropShare(sh *share) {
	c := cache
	var fds []int
	c.mu.Lock()
	sh.refs--
	if sh.refs == 0 {
		if sharesByName[sh.name] == sh {
			delete(sharesByName, sh.name)
		}
		for d := sh.tail; d != nil; d = sh.tail {
			sh.unlink(d)
			fds = append(fds, int(d.fd.Swap(-1)))
			c.countClosedLocked(d)
		}
	}
	c.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// minCacheCap is the least capacity of the cache, whatever the limit.
const minCacheCap = 32

// cacheCap returns the capacity, computing it from RLIMIT_NOFILE on first
// use; c.mu held.
func (c *fdCache) capLocked() int {
	if c.cap == 0 {
		c.cap = capFor(softNofile())
	}
	return c.cap
}

// capFor is the capacity for a soft descriptor limit lim: lim less a
// quarter of it, at least 64 kept for the rest of the process.
func capFor(lim uint64) int {
	reserve := max(lim/4, 64)
	if lim <= reserve+minCacheCap {
		return minCacheCap
	}
	return int(lim - reserve)
}

func softNofile() uint64 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 1024
	}
	return lim.Cur
}

// fixedCapLocked is how many descriptors one session may hold that cannot
// be evicted: the capacity divided by the number of sessions holding
// descriptors, up to 4 (so a lone mount may use it all, and with many
// sessions each may fix a quarter).
func (c *fdCache) fixedCapLocked() int {
	n := len(c.shares)
	return c.capLocked() / min(max(n, 1), 4)
}

// descriptor is a node's binding to its backing object: the file handle
// and the O_PATH descriptor cached for it. Its fields but the handle are
// guarded by cache.mu; fd is also read without it by the holder of a pin.
type descriptor struct {
	fd    atomic.Int32 // -1 while closed
	pins  int
	gone  bool // released for good: never opened again
	stale bool // the handle opens no object, or another one
	fixed bool // no handle: never evicted, counted in share.fixed
	// shared: the descriptor belongs to others as well (every host view's
	// root is the one hostRootFd): closing the node leaves it open. Set
	// before the node is published.
	shared bool
	// detached is set when the descriptor was opened by handle and the
	// kernel could not connect it to a path (a disconnected dentry,
	// /proc/self/fd shows "/"): node.where then uses the tree's path.
	detached   bool
	sh         *share
	prev, next *descriptor

	// The identity, set once when the node is made: file handle, its
	// type, the mount ID, and whether the object is a directory.
	htype   int32
	handle  []byte
	mountID int
	dir     bool
	mfd     *mountFd    // a descriptor of the node's mount for open_by_handle_at
	mfdPut  atomic.Bool // set once mfd.put was called

	// backing, once the fd is registered for passthrough, is unregistered
	// when the node goes (the kernel holds its own reference to the file).
	backing atomic.Pointer[backingRef]
}

// mountFd is a descriptor (not O_PATH: open_by_handle_at(2) refuses one)
// of a backing mount, shared by the nodes on it; it pins that mount, so its
// mount ID cannot name another mount while a node refers to it. It is
// counted by the nodes using it (refs, guarded by owner.mu) and closed with
// the last of them, so a mount the session no longer looks into is not
// kept busy (the root's is held by the mount itself).
type mountFd struct {
	fd    int
	id    int
	refs  int
	owner *mountFds
}

// put drops one node's use of m, closing it with the last.
func (m *mountFd) put() {
	f := m.owner
	f.mu.Lock()
	defer f.mu.Unlock()
	m.refs--
	if m.refs == 0 && f.fds[m.id] == m {
		delete(f.fds, m.id)
		unix.Close(m.fd)
	}
}

// newDescriptor makes the descriptor of a node whose O_PATH descriptor fd
// was just opened, in share sh, with the identity given (htype -1: none,
// then the descriptor is fixed). It is counted open at once.
func newDescriptor(sh *share, fd int, htype int32, handle []byte, mountID int, dir bool, mfd *mountFd) *descriptor {
	d := &descriptor{sh: sh, htype: htype, handle: handle, mountID: mountID, dir: dir, mfd: mfd}
	d.fd.Store(int32(fd))
	if fd < 0 {
		d.gone = true
		return d
	}
	c := cache
	c.mu.Lock()
	c.open++
	sh.open++
	if sh.open == 1 {
		c.shares[sh] = true
	}
	if htype < 0 || mfd == nil {
		d.fixed = true
		sh.fixed++
	} else {
		sh.pushFront(d)
	}
	c.mu.Unlock()
	c.trim(sh)
	return d
}

// Inotify watches are a per-user limit of the whole machine
// (fs.inotify.max_user_watches), and every directory a session's processes
// make the server look into costs the daemon's user one (issue 20: uid
// 65534 on an --allow-other mount costs root one per directory it looks
// up). A session may hold at most watchShare() of them: an eighth of the
// limit, at least 256. Beyond it a directory is not watched and its entries
// get the short timeouts of an unwatched mount (DefaultTimeout: host
// changes there show within a second instead of at once), as when the
// kernel refuses a watch.

// watchShareOverride, when set (tests), replaces watchShare's value.
var watchShareOverride atomic.Int64

var watchShareOnce = sync.OnceValue(func() int {
	n := 8192
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			n = v
		}
	}
	return max(n/8, 256)
})

// watchShare is how many inotify watches one session may hold.
func watchShare() int {
	if v := watchShareOverride.Load(); v > 0 {
		return int(v)
	}
	return watchShareOnce()
}

// takeWatch counts a watch about to be placed for sh; false when sh holds
// its share already.
func (sh *share) takeWatch() bool {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if sh.watches >= watchShare() {
		return false
	}
	sh.watches++
	return true
}

// putWatch undoes takeWatch once the watch is removed (or not placed).
func (sh *share) putWatch() {
	cache.mu.Lock()
	sh.watches--
	cache.mu.Unlock()
}

// takeFile counts a file or directory descriptor about to be opened for
// an open handle of sh (counted open and fixed until putFile); EMFILE when
// sh holds its fixed share already (fixedCapLocked).
func (sh *share) takeFile() syscall.Errno {
	c := cache
	c.mu.Lock()
	if sh.fixed >= c.fixedCapLocked() {
		c.mu.Unlock()
		return syscall.EMFILE
	}
	c.open++
	sh.open++
	sh.fixed++
	if sh.open == 1 {
		c.shares[sh] = true
	}
	c.mu.Unlock()
	c.trim(sh)
	return 0
}

// putFile undoes takeFile, once the handle's descriptor is closed (or its
// open failed).
func (sh *share) putFile() {
	c := cache
	c.mu.Lock()
	c.open--
	sh.open--
	sh.fixed--
	if sh.open == 0 {
		delete(c.shares, sh)
	}
	c.mu.Unlock()
}

// overFixed reports whether sh already holds its fixed share, for a
// caller about to make a fixed descriptor (EMFILE then).
func (sh *share) overFixed() bool {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	return sh.fixed >= cache.fixedCapLocked()
}

// pushFront puts d at the head of sh's list (most recently used); c.mu held.
func (sh *share) pushFront(d *descriptor) {
	d.prev, d.next = nil, sh.head
	if sh.head != nil {
		sh.head.prev = d
	}
	sh.head = d
	if sh.tail == nil {
		sh.tail = d
	}
}

// unlink takes d out of sh's list; c.mu held.
func (sh *share) unlink(d *descriptor) {
	if d.prev != nil {
		d.prev.next = d.next
	} else if sh.head == d {
		sh.head = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else if sh.tail == d {
		sh.tail = d.prev
	}
	d.prev, d.next = nil, nil
}

// inList reports whether d is in its share's list; c.mu held.
func (d *descriptor) inList() bool {
	return d.prev != nil || d.next != nil || d.sh.head == d
}

// countClosedLocked accounts for an open descriptor of d's share being
// closed; c.mu held.
func (c *fdCache) countClosedLocked(d *descriptor) {
	c.open--
	d.sh.open--
	if d.fixed {
		d.sh.fixed--
	}
	if d.sh.open == 0 {
		delete(c.shares, d.sh)
	}
}

// victimLocked picks the descriptor to close when sh needs room: sh's own
// least recently used one when sh holds its fair part or more, else that
// of the share holding the most; nil when nothing can be closed. c.mu held.
func (c *fdCache) victimLocked(sh *share) *descriptor {
	fair := c.capLocked() / max(len(c.shares), 1)
	if sh != nil && sh.open >= fair && sh.tail != nil {
		return sh.tail
	}
	var big *share
	for s := range c.shares {
		if s.tail != nil && (big == nil || s.open-s.fixed > big.open-big.fixed) {
			big = s
		}
	}
	if big == nil {
		return nil
	}
	return big.tail
}

// trim closes descriptors until the cache is within its capacity, choosing
// them for sh (victimLocked).
func (c *fdCache) trim(sh *share) { c.evict(sh, 0) }

// trimTo closes at least n descriptors (as many as can be), and more if
// the cache is still above its capacity.
func (c *fdCache) trimTo(n int) { c.evict(nil, n) }

func (c *fdCache) evict(sh *share, atLeast int) {
	var fds []int
	c.mu.Lock()
	for c.open > c.capLocked() || len(fds) < atLeast {
		d := c.victimLocked(sh)
		if d == nil {
			break
		}
		d.sh.unlink(d)
		fds = append(fds, int(d.fd.Swap(-1)))
		c.countClosedLocked(d)
	}
	c.mu.Unlock()
	for _, fd := range fds {
		unix.Close(fd)
	}
	c.evictions.Add(uint64(len(fds)))
}

// shed answers EMFILE met by the process: an eighth of the cache's open
// descriptors (at least 16) are closed and, when the cache holds half its
// capacity or more (it is what fills the table), the capacity is lowered
// to what is left (never below minCacheCap). It reports whether any
// descriptor was closed.
func (c *fdCache) shed() bool {
	c.mu.Lock()
	n := max(c.open/8, 16)
	shrunk := false
	if c.open*2 >= c.capLocked() {
		c.cap, shrunk = max(c.open-n, minCacheCap), true
	}
	c.mu.Unlock()
	before := c.evictions.Load()
	c.trimTo(n)
	closed := c.evictions.Load() > before
	if shrunk {
		c.shedLog.Do(func() {
			slog.Warn("descriptor limit met: node descriptor cache shrunk", "capacity", c.cap, "rlimit_nofile", softNofile())
		})
	}
	return closed
}

// ShedDescriptors closes some of the cached node descriptors after the
// process met EMFILE or ENFILE (the API's accept(2), for one), so the
// caller can try again; it reports whether any descriptor was closed. The
// cache's capacity is lowered to what remains open.
func ShedDescriptors() bool { return cache.shed() }

// CacheStats are the node descriptor cache's counters: Open descriptors
// now, its Capacity, and since the process started the Reopens (a node
// used while its descriptor was closed) and Evictions.
type CacheStats struct {
	Open, Capacity     int
	Reopens, Evictions uint64
}

// DescriptorCache returns the cache's counters.
func DescriptorCache() CacheStats {
	c := cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Open: c.open, Capacity: c.capLocked(), Reopens: c.reopens.Load(), Evictions: c.evictions.Load()}
}

// retryFd runs open, and once more after shedding cached descriptors when
// it failed with EMFILE or ENFILE.
func retryFd(open func() (int, error)) (int, error) {
	fd, err := open()
	if (err == unix.EMFILE || err == unix.ENFILE) && cache.shed() {
		fd, err = open()
	}
	return fd, err
}

// pin makes sure the node's descriptor is open and keeps it open until the
// matching unpin. Errors: ESTALE for a node whose object is gone or was
// replaced (or a node already released), else the errno of the reopen.
// A node without a backing object (a session link) pins trivially.
func (n *node) pin() syscall.Errno {
	d := n.desc
	if n.linkText != "" {
		return 0
	}
	c := cache
	c.mu.Lock()
	switch {
	case d.stale || d.gone && d.fd.Load() < 0:
		c.mu.Unlock()
		return syscall.ESTALE
	case d.fd.Load() >= 0:
		if d.pins == 0 && !d.fixed && d.inList() {
			d.sh.unlink(d)
		}
		d.pins++
		c.mu.Unlock()
		return 0
	}
	c.mu.Unlock()
	fd, detached, err := n.reopenDesc()
	if err != nil {
		if err == unix.ESTALE || err == unix.ENOENT {
			c.mu.Lock()
			d.stale = true
			c.mu.Unlock()
			return syscall.ESTALE
		}
		return toErrno(err)
	}
	c.reopens.Add(1)
	c.mu.Lock()
	switch {
	case d.gone || d.stale:
		c.mu.Unlock()
		unix.Close(fd)
		return syscall.ESTALE
	case d.fd.Load() >= 0:
		// Opened again meanwhile by another request: that one serves.
		if d.pins == 0 && d.inList() {
			d.sh.unlink(d)
		}
		d.pins++
		c.mu.Unlock()
		unix.Close(fd)
		return 0
	}
	d.fd.Store(int32(fd))
	d.detached = detached
	d.pins++
	c.open++
	d.sh.open++
	if d.sh.open == 1 {
		c.shares[d.sh] = true
	}
	c.mu.Unlock()
	c.trim(d.sh)
	return 0
}

// unpin ends a pin; the descriptor becomes evictable again (or is closed,
// when the node was released meanwhile).
func (n *node) unpin() {
	if n.linkText != "" {
		return
	}
	d := n.desc
	c := cache
	c.mu.Lock()
	d.pins--
	if d.pins > 0 {
		c.mu.Unlock()
		return
	}
	if d.gone {
		fd := int(d.fd.Swap(-1))
		if fd >= 0 {
			c.countClosedLocked(d)
		}
		c.mu.Unlock()
		if fd >= 0 {
			d.closeFd(fd)
		}
		return
	}
	if !d.fixed && d.fd.Load() >= 0 {
		d.sh.pushFront(d)
	}
	c.mu.Unlock()
}

// fd returns the node's descriptor; the caller holds a pin (pin), so it is
// open. -1 for a node without one.
func (n *node) fd() int {
	if checkPins {
		cache.mu.Lock()
		d := n.desc
		bad := d.pins == 0 && !d.fixed && !d.gone
		cache.mu.Unlock()
		if bad {
			panic("fusefs: node descriptor used without a pin")
		}
	}
	return int(n.desc.fd.Load())
}

// checkPins, set by tests, makes fd panic when used without a pin.
var checkPins bool

// close releases d for good: its descriptor is closed now, or by the last
// unpin when a request still runs on it, and its passthrough registration
// goes with it. Safe to call more than once.
func (d *descriptor) close() {
	c := cache
	c.mu.Lock()
	if d.gone && d.fd.Load() < 0 {
		c.mu.Unlock()
		return
	}
	d.gone = true
	if d.pins > 0 {
		c.mu.Unlock()
		return
	}
	if d.inList() {
		d.sh.unlink(d)
	}
	fd := int(d.fd.Swap(-1))
	if fd >= 0 {
		c.countClosedLocked(d)
	}
	c.mu.Unlock()
	d.closeFd(fd)
}

// collect is close for a node the garbage collector found unreachable: no
// request or handle can use it any more, so pins a handle never gave back
// (a connection aborted without RELEASE) do not keep it open.
func (d *descriptor) collect() {
	cache.mu.Lock()
	d.pins = 0
	cache.mu.Unlock()
	d.close()
}

// closeFd closes fd (if open) and unregisters the passthrough backing once,
// and gives back the node's use of its mount descriptor.
func (d *descriptor) closeFd(fd int) {
	if d.mfd != nil && d.mfdPut.CompareAndSwap(false, true) {
		d.mfd.put()
	}
	if b := d.backing.Swap(nil); b != nil {
		b.srv.UnregisterBackingFd(b.id)
	}
	if fd >= 0 && !d.shared {
		unix.Close(fd)
	}
}

// reopenDesc opens the node's object again, O_PATH: a non-directory by its
// name in its parent when that opens the object with the node's own file
// handle, else by the handle on the node's mount. detached reports a
// descriptor the kernel could not give a path.
func (n *node) reopenDesc() (fd int, detached bool, err error) {
	d := n.desc
	if !d.dir {
		if fd, ok := n.reopenByName(); ok {
			return fd, false, nil
		}
	}
	fd, err = retryFd(func() (int, error) {
		return transport.OpenHandle(d.mfd.fd, d.htype, d.handle, unix.O_PATH|unix.O_CLOEXEC)
	})
	if err != nil {
		return -1, false, err
	}
	if !d.dir {
		p, err := os.Readlink(procPath(fd))
		detached = err != nil || p == "/" || !strings.HasPrefix(p, "/")
	}
	return fd, detached, nil
}

// reopenByName opens the node's tree name in its parent's descriptor and
// keeps it when it is the node's object (same file handle, so the same
// generation: never a recycled inode number).
func (n *node) reopenByName() (int, bool) {
	name, parent := n.Parent()
	if parent == nil {
		return -1, false
	}
	pn, ok := parent.Operations().(*node)
	if !ok || pn.pin() != 0 {
		return -1, false
	}
	defer pn.unpin()
	fd, err := openPath(pn.fd(), name)
	if err != nil {
		return -1, false
	}
	h, mnt, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	d := n.desc
	if err != nil || mnt != d.mountID || h.Type() != d.htype || !bytes.Equal(h.Bytes(), d.handle) {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// mountFds is a mount's descriptors of backing mounts, by mount ID.
type mountFds struct {
	mu  sync.Mutex
	fds map[int]*mountFd
	// none is set when open_by_handle_at(2) is not allowed (an
	// unprivileged server): every node then keeps its descriptor.
	none bool
}

// get returns the descriptor of mount id, counted for one more node (put
// gives it back), opening it from fd (an O_PATH descriptor of a directory
// on that mount) when there is none yet; nil when none can be had (fd is
// not a directory, or handles are not usable).
func (f *mountFds) get(id int, fd int, dir bool) *mountFd {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.none {
		return nil
	}
	if m := f.fds[id]; m != nil {
		m.refs++
		return m
	}
	if !dir {
		return nil
	}
	mfd, err := retryFd(func() (int, error) { return reopen(fd, unix.O_RDONLY|unix.O_DIRECTORY) })
	if err != nil {
		return nil
	}
	if f.fds == nil {
		f.fds = map[int]*mountFd{}
	}
	m := &mountFd{fd: mfd, id: id, refs: 1, owner: f}
	f.fds[id] = m
	return m
}

// lookup returns the descriptor of mount id, nil when there is none.
func (f *mountFds) lookup(id int) *mountFd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fds[id]
}

// add records fd (not O_PATH) as the descriptor of mount id, not counted
// for any node yet (get counts), and returns it; one already there wins
// and fd is closed. nil (fd closed) once the
// mount is gone.
func (f *mountFds) add(id, fd int) *mountFd {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.fds[id]; m != nil {
		unix.Close(fd)
		return m
	}
	if f.none {
		unix.Close(fd)
		return nil
	}
	if f.fds == nil {
		f.fds = map[int]*mountFd{}
	}
	m := &mountFd{fd: fd, id: id, owner: f}
	f.fds[id] = m
	return m
}

// probe checks once, with the root's descriptor, that handles can be
// opened again here (open_by_handle_at(2) needs CAP_DAC_READ_SEARCH); when
// not, every node keeps its descriptor, as before the cache.
func (f *mountFds) probe(rootFd int) {
	h, id, err := unix.NameToHandleAt(rootFd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return
	}
	m := f.get(id, rootFd, true)
	if m == nil {
		return
	}
	fd, err := unix.OpenByHandleAt(m.fd, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		f.mu.Lock()
		f.none = true
		f.mu.Unlock()
		return
	}
	unix.Close(fd)
}

// close closes every mount descriptor, once the mount is gone. Nodes left
// (held by go-fuse until collected) then reopen nothing.
func (f *mountFds) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.none = true
	for id, m := range f.fds {
		unix.Close(m.fd)
		delete(f.fds, id)
	}
}
