package fusefs

import (
	"sync"
	"syscall"
	"time"
)

// xattrAbsent remembers, per node, extended attribute names the backing
// inode answered ENODATA for, so the next GETXATTR of such a name is answered
// without a syscall. The kernel never caches security.* attributes and asks
// for security.selinux on every ls -l entry (coreutils' lgetxattr for the
// SELinux context), so without this each one costs a getxattr(2) through
// /proc/self/fd.
//
// Only ENODATA, the backing store's own answer, is replayed, and only while
// it cannot have changed unseen: the cache is used only with the watcher, for
// no longer than the mount's attribute timeout, and it is dropped when the
// node's attributes may have changed: setxattr, removexattr or setattr
// through the mount, and the watcher's IN_ATTRIB / IN_MODIFY for the node
// (xattr changes on the host raise IN_ATTRIB: fsnotify_xattr). A generation
// count keeps an answer read before a drop from being stored after it.
type xattrAbsent struct {
	mu    sync.Mutex
	gen   uint64
	until time.Time // names are valid before this
	names []string
}

// xattrAbsentMax bounds the names kept per node: callers choose the names,
// and memory must not grow with what they probe.
const xattrAbsentMax = 4

// absent reports whether name is known to be absent.
func (c *xattrAbsent) absent(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.names) == 0 {
		return false
	}
	if !time.Now().Before(c.until) {
		c.names = nil
		return false
	}
	for _, n := range c.names {
		if n == name {
			return true
		}
	}
	return false
}

// generation is read before asking the backing store.
func (c *xattrAbsent) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// note records that name was absent, if nothing was dropped since gen.
func (c *xattrAbsent) note(gen uint64, name string, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || ttl <= 0 {
		return
	}
	now := time.Now()
	if len(c.names) == 0 || !now.Before(c.until) {
		c.names = c.names[:0]
		c.until = now.Add(ttl)
	}
	if len(c.names) < xattrAbsentMax {
		c.names = append(c.names, name)
	}
}

// drop forgets every name.
func (c *xattrAbsent) drop() {
	c.mu.Lock()
	c.gen++
	c.names = nil
	c.mu.Unlock()
}

// getxattrCached answers ENODATA for a name the backing inode is known not to
// have, and otherwise asks it with get, remembering an ENODATA answer.
func (n *node) getxattrCached(attr string, get func() (int, error)) (uint32, syscall.Errno) {
	ttl := n.m.xattrTTL
	if ttl <= 0 {
		sz, err := get()
		return uint32(sz), toErrno(err)
	}
	if n.xattrs.absent(attr) {
		return 0, syscall.ENODATA
	}
	gen := n.xattrs.generation()
	sz, err := get()
	errno := toErrno(err)
	if errno == syscall.ENODATA {
		// Below a directory the watcher could not watch, the kernel
		// caches attributes for DefaultTimeout only (shortenTTL).
		if _, p := n.Parent(); p == nil {
			ttl = min(ttl, DefaultTimeout)
		} else if pn, ok := p.Operations().(*node); !ok || pn.unwatched {
			ttl = min(ttl, DefaultTimeout)
		}
		n.xattrs.note(gen, attr, ttl)
	}
	return uint32(sz), errno
}
