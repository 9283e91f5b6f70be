package fusefs

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// mount is the state one mount's nodes share.
type mount struct {
	linkRules
	dev     uint64 // device of root; inode numbers on it are passed through
	pol     atomic.Pointer[policy.Policy]
	log     *slog.Logger
	session string
	stats   counters
	watch   *watcher // nil when host changes are not watched
	// passthrough is set when the server may register backing files
	// (FUSE passthrough needs CAP_SYS_ADMIN: root); fuseSrv registers
	// them, and pendingBacking carries a backing ID from node.Open to the
	// reply (backingReply), keyed by the request's cancel channel.
	passthrough bool
	// dontMask is set when the connection negotiated FUSE_DONT_MASK: the
	// kernel then sends modes unmasked with the caller's umask beside
	// them, and the server makes objects with both (umask.go).
	dontMask       bool
	noBacking      atomic.Bool // set when the kernel refused a registration with EPERM
	fuseSrv        atomic.Pointer[fuse.Server]
	pendingBacking sync.Map
	// xattrTTL is how long an absent extended attribute name is
	// remembered (xattrAbsent): the attribute timeout with the watcher, 0
	// (never) without it.
	xattrTTL time.Duration
	// host is set on a host view (MountHostView): hidden places, session
	// links, mount-type checks.
	host *hostView
	// cross is set on a session mount (Mount): the mounts inside the root
	// its lookups crossed, decided at their source (crossmount.go).
	cross *crossings
	// backing is Config.Backing, canonical, when it differs from root:
	// where() maps a descriptor's path below it to the same path below
	// root. before is Config.BeforeWrite.
	backing string
	before  func(path string)
	// lower is Config.Lower's: the project objects of an overlay
	// (overlay.go); nil when the backing objects are their own identity.
	lower *lowerLayer
	// ring is set when requests come over io_uring (mountRaw).
	ring *transport.URing
	// sh is the session's share of the descriptor cache, mfds the
	// descriptors of backing mounts that nodes are opened again on
	// (fdcache.go).
	sh   *share
	mfds mountFds

	// state records what a successor needs to serve this connection on,
	// when it is kept in the store keptIn (keep.go); nil otherwise.
	state  atomic.Pointer[transport.State]
	keptIn transport.Store
	// resent are the requests the predecessor of an adopted connection
	// had begun (transport.Live.Intended); read-only once serving.
	resent map[uint64]bool

	// Inode numbers of objects on other devices than the root's,
	// allocated one-to-one (DESIGN.md, "Host view": inode numbers).
	inoMu   sync.Mutex
	inos    map[devIno]uint64
	nextIno uint64
}

// devIno identifies a backing object.
type devIno struct{ dev, ino uint64 }

// node is one backing object. It holds an O_PATH descriptor bound to the
// object from the moment it was looked up (libfuse passthrough_hp style):
// every operation runs on it or, for names in a directory, on the directory's
// descriptor with a single name and AT_SYMLINK_NOFOLLOW, so no path string is
// ever re-walked.
type node struct {
	fs.Inode
	m *mount

	// desc binds the node to its object: its file handle, and its O_PATH
	// descriptor, an entry of the daemon-wide cache (fdcache.go) used under
	// pin/unpin. It is released for good by release once the kernel is
	// surely done with the node, or by a cleanup when the node is garbage
	// collected, which covers nodes go-fuse drops in favour of an
	// already-known inode with the same number.
	desc *descriptor

	// origin is the physical path at creation; used once the node has no
	// parent left in the tree (an unlinked open file).
	origin string
	// linkText is set on a host view's session link (HostViewConfig.Links):
	// a symlink that exists only in the view, with no backing object (fd -1).
	linkText string
	// stored is the backing symlink's text, read once (storedText).
	stored atomic.Pointer[string]

	// A directory is watched from the first time the kernel looks into it
	// (ensureWatched): only then can it cache entries below it, and only
	// then is the node surely the one go-fuse registered. wd is the inotify
	// watch; unwatched is set when none could be placed, and its entries then
	// get short timeouts.
	watchOnce sync.Once
	wd        int32
	watched   bool
	unwatched bool

	closeOnce sync.Once

	// ptOK caches passthroughOK: 0 not known yet, 1 yes, 2 no.
	ptOK atomic.Int32
	// backing is the node's FUSE passthrough registration (backing.go).
	backing backing
	// xattrs holds the extended attribute names known to be absent.
	xattrs xattrAbsent
	// projID caches, in a layered mount, the project identity of the
	// node's overlay object (fileID), once known: an origin never changes.
	projID atomic.Pointer[identity.FileID]
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeOnKernelRefer  = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
)

func (m *mount) policy() *policy.Policy { return m.pol.Load() }

// decide asks the policy about op at the physical path p and object obj
// (judge), and before an allowed write calls Config.BeforeWrite.
func (m *mount) decide(op policy.Op, p string, obj policy.Object) policy.Decision {
	d := m.judge(op, p, obj)
	if d.Allow && op.IsWrite() && m.before != nil {
		m.before(p)
	}
	return d
}

// judge is decide without its effect: a host view first applies its own
// rules (hidden places, session links), a path in a mount inside the root
// is decided at its source (crossmount.go), the rest by the policy.
func (m *mount) judge(op policy.Op, p string, obj policy.Object) policy.Decision {
	if m.host != nil {
		if d, ok := m.host.gate(m.policy(), op, p); !ok {
			return d
		}
	}
	var d policy.Decision
	if srcs := m.cross.sources(p); srcs != nil {
		// In a mount inside the root: decided where its objects are. In
		// a host view p is a host path as well: the stricter of the two.
		d = m.cross.decideSources(m.policy(), op, srcs, obj)
		if m.host != nil {
			if at := m.policy().DecideAt(op, p, obj); severity(at) > severity(d) {
				d = at
			}
		}
	} else {
		d = m.policy().DecideAt(op, p, obj)
	}
	return d
}

// decidePair is decide for the two ends of a rename (link false) or a
// hard link (link true).
func (m *mount) decidePair(link bool, src, dst string, so, do policy.Object) policy.Decision {
	if m.host != nil {
		for _, p := range [2]string{src, dst} {
			if d, ok := m.host.gate(m.policy(), policy.OpRename, p); !ok {
				return d
			}
		}
	}
	var d policy.Decision
	ss, ds := m.cross.sources(src), m.cross.sources(dst)
	switch {
	case ss != nil || ds != nil:
		d = m.cross.decidePair(m.policy(), link, src, dst, ss, ds, so, do)
	case link:
		d = m.policy().DecideLinkAt(src, dst, so, do)
	default:
		d = m.policy().DecideRenameAt(src, dst, so, do)
	}
	if d.Allow && m.before != nil {
		m.before(src)
		m.before(dst)
	}
	return d
}

// join appends a single name to a clean absolute directory path.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// newNode wraps fd, an O_PATH descriptor just opened of an object of type
// mode (S_IFMT bits), -1 for a node without a backing object. It takes the
// object's file handle, so the descriptor can be closed and the object
// opened again (fdcache.go); without one (a file system without export
// support, an unprivileged server) the descriptor is fixed, and EMFILE
// (fd closed) when the session holds its fixed share already.
func (m *mount) newNode(fd int, origin string, mode uint32) (*node, syscall.Errno) {
	htype, h, mnt := int32(-1), []byte(nil), 0
	if fd >= 0 {
		if fh, id, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil {
			htype, h, mnt = fh.Type(), fh.Bytes(), id
		}
	}
	return m.newNodeWith(fd, origin, mode, htype, h, mnt, false)
}

// newNodeWith is newNode for a file handle known (htype -1: none); fixed
// keeps the descriptor open whatever the handle (the root's).
func (m *mount) newNodeWith(fd int, origin string, mode uint32, htype int32, h []byte, mnt int, fixed bool) (*node, syscall.Errno) {
	dir := mode&syscall.S_IFMT == syscall.S_IFDIR
	var mfd *mountFd
	if fd >= 0 && htype >= 0 && !fixed {
		mfd = m.mfds.get(mnt, fd, dir)
	}
	if fd >= 0 && mfd == nil && !fixed && m.sh.overFixed() {
		unix.Close(fd)
		return nil, syscall.EMFILE
	}
	d := newDescriptor(m.sh, fd, htype, h, mnt, dir, mfd)
	n := &node{m: m, desc: d, origin: origin}
	runtime.AddCleanup(n, (*descriptor).collect, d)
	return n, 0
}

// stable is the go-fuse identity of a backing object. Inode numbers on the
// root's device are passed through, so git's index and editors' change
// detection agree between host and mount; objects on other devices get a
// number allocated by this mount, one per (dev, ino), so two objects never
// share one (DESIGN.md, "Host view").
func (m *mount) stable(st *syscall.Stat_t) fs.StableAttr {
	ino := st.Ino
	if st.Dev != m.dev {
		ino = m.allocIno(devIno{st.Dev, st.Ino})
	}
	if ino == 0 || ino == 1 || ino == ^uint64(0) {
		ino ^= 1 << 62 // reserved by FUSE / go-fuse
	}
	return fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: ino}
}

// allocIno returns the number allocated to k, allocating it the first
// time. Allocated numbers have the top bit set; backing numbers on the
// root's device never do (no Linux file system hands those out).
func (m *mount) allocIno(k devIno) uint64 {
	m.inoMu.Lock()
	defer m.inoMu.Unlock()
	if ino, ok := m.inos[k]; ok {
		return ino
	}
	if m.inos == nil {
		m.inos = make(map[devIno]uint64)
	}
	m.nextIno++
	ino := 1<<63 | m.nextIno
	m.inos[k] = ino
	if st := m.keepState(); st != nil {
		st.AllocIno(transport.InoAlloc{Dev: k.dev, Ino: k.ino, Alloc: ino})
	}
	return ino
}

// where returns the node's physical path as the kernel knows it now: the
// path of its descriptor (proc(5), /proc/self/fd). Unlike the tree's path
// it follows renames made on the host, so a directory moved out of the root
// is judged where it is. A deleted object is judged at its last path;
// phys() is the fallback when the kernel cannot name it (PATH_MAX).
func (n *node) where() string {
	if n.desc.detached {
		return n.phys()
	}
	p, err := readlinkOnce(procPath(n.fd()))
	if err != nil || !strings.HasPrefix(p, "/") {
		return n.phys()
	}
	p = strings.TrimSuffix(p, " (deleted)")
	if b := n.m.backing; b != "" {
		if !identity.Within(p, b) {
			// Not below the served tree (the overlay names its objects
			// only below its own mountpoint): the tree's path.
			return n.phys()
		}
		p = identity.Rebase(p, b, n.m.root)
	}
	return p
}

// readlinkOnce is os.Readlink in one readlink(2) into a PATH_MAX buffer:
// os.Readlink starts at 128 bytes and doubles, so a long path cost the
// kernel up to six d_path walks of it (issue 20 item 17). A text that
// fills the buffer is ENAMETOOLONG, as the kernel's own /proc links are
// at PATH_MAX.
func readlinkOnce(p string) (string, error) {
	var buf [unix.PathMax]byte
	for {
		k, err := unix.Readlink(p, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: p, Err: err}
		}
		if k >= len(buf) {
			return "", &os.PathError{Op: "readlink", Path: p, Err: unix.ENAMETOOLONG}
		}
		return string(buf[:k]), nil
	}
}

// phys returns the canonical physical path of the node: the root joined
// with the names on the way up the tree. Hard-linked nodes yield one of
// their physical paths. The path is built in one allocation: joining name
// by name copied the growing path once per level, quadratic in depth
// (issue 20 item 17).
func (n *node) phys() string {
	var names []string
	cur := n
	size := 0
	base := ""
	for {
		if cur.IsRoot() {
			base = cur.m.root
			break
		}
		name, parent := cur.Parent()
		if parent == nil {
			base = cur.origin
			break
		}
		names = append(names, name)
		size += 1 + len(name)
		cur = parent.Operations().(*node)
	}
	if len(names) == 0 {
		return base
	}
	if base == "/" {
		base = ""
	}
	var b strings.Builder
	b.Grow(len(base) + size)
	b.WriteString(base)
	for i := len(names) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(names[i])
	}
	return b.String()
}

// reviveWindow is how long a forgotten node keeps its descriptor.
const reviveWindow = 2 * time.Second

// OnForget releases the node's descriptor and watch after reviveWindow,
// only if it is still forgotten: go-fuse may hand a node that is being
// forgotten to a concurrent LOOKUP (its identity table, or revalidate
// below, found it a moment earlier), and a revived node never runs on a
// closed descriptor. (A successor learns of the forget from the lookup
// counts, keepCount.)
func (n *node) OnForget() {
	if n.IsRoot() {
		return
	}
	time.AfterFunc(reviveWindow, func() {
		//lint:ignore SA1019 OnForget says when the kernel dropped the inode; only Forgotten says whether a LOOKUP revived it since.
		if n.Forgotten() {
			n.release()
		}
	})
}

// OnKernelRef records the node, for a successor, when the kernel takes a
// reference to it that it did not hold (go-fuse's NodeOnKernelRefer: on
// the node go-fuse registered, before the reply), also a node that a
// LOOKUP takes back after a FORGET, or one that replaces another under a
// recycled inode number. Recorded here, not where a lookup makes a node:
// go-fuse may use another node of the same identity instead.
func (n *node) OnKernelRef() {
	if n.m.keepState() == nil {
		return
	}
	n.m.keepNode(n, n.StableAttr(), n.phys())
}

func (n *node) release() {
	n.closeOnce.Do(func() {
		if n.watched {
			n.m.watch.remove(n)
			n.m.sh.putWatch()
		}
		n.desc.close()
	})
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	m.stats.op(opLookup)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	n.ensureWatched()
	var p string
	if m.host != nil {
		// Every name in the host view is decided at its physical path
		// (a none root, a hidden place), the session links shown as such.
		p = join(n.phys(), name)
		if text, ok := m.host.links[p]; ok {
			return n.addLinkNode(ctx, p, text, out), 0
		}
		if d, ok := m.lookupRead(p); !ok {
			return nil, m.deny(ctx, "lookup", p, d)
		}
	}
	if ch := n.revalidate(name, out); ch != nil {
		if m.cross.active() {
			// In a mount inside the root, reads are decided at the
			// source too (a bind of a none root is hidden as the root is).
			if errno := m.checkCrossRead(ctx, "lookup", join(n.phys(), name)); errno != 0 {
				return nil, errno
			}
		}
		return ch, 0
	}
	if p == "" {
		p = join(n.phys(), name)
	}
	var fd int
	var st syscall.Stat_t
	var err error
	if m.host != nil {
		fd, st, err = m.host.openChild(m.policy(), m.cross, n.fd(), name, p)
	} else {
		fd, st, err = m.cross.openChild(n.fd(), name, p)
	}
	if err != nil {
		if d, ok := err.(*denial); ok {
			return nil, m.deny(ctx, "lookup", p, d.d)
		}
		return nil, toErrno(err)
	}
	if m.host == nil && m.cross.active() {
		// Below a mount inside the root, or a mount point just crossed
		// (openChild learned it, or that it is no mount any more):
		// decided at the source.
		if errno := m.checkCrossRead(ctx, "lookup", p); errno != 0 {
			unix.Close(fd)
			return nil, errno
		}
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK && m.symlinks != SymlinksFollow {
		text, err := n.childText(name, fd, &st)
		if err != nil {
			unix.Close(fd)
			return nil, toErrno(err)
		}
		m.policy().ObserveLink(p, text)
		// lstat(2) shows the presented text's length.
		shown, _ := m.present(filepath.Dir(p), text)
		st.Size = int64(len(shown))
		ch, errno := n.addChild(ctx, fd, &st, p, out)
		if errno != 0 {
			return nil, errno
		}
		if cn, ok := ch.Operations().(*node); ok {
			cn.stored.CompareAndSwap(nil, &text)
		}
		return ch, 0
	}
	return n.addChild(ctx, fd, &st, p, out)
}

// storedText returns the text of the backing symlink the node stands for,
// read once: a symlink's text never changes (a new text is a new inode, and
// the node's descriptor pins this one), and every readlink(2) of the backing
// link may move its atime (relatime), which lstat through the mount would
// then show where ext4 shows the time a utimensat(2) set (pjdfstest
// utimensat/05.t).
func (n *node) storedText() (string, error) {
	if t := n.stored.Load(); t != nil {
		return *t, nil
	}
	text, err := identity.ReadlinkAt(n.fd(), "")
	if err == nil {
		n.stored.CompareAndSwap(nil, &text)
	}
	return text, err
}

// childText returns the text of the symlink name, whose O_PATH descriptor fd
// and attributes st a lookup just took: the known child's stored text when
// it is the same inode, else read from fd.
func (n *node) childText(name string, fd int, st *syscall.Stat_t) (string, error) {
	if ch := n.GetChild(name); ch != nil {
		if cn, ok := ch.Operations().(*node); ok && cn.linkText == "" && ch.StableAttr() == n.m.stable(st) {
			if t := cn.stored.Load(); t != nil {
				return *t, nil
			}
		}
	}
	return identity.ReadlinkAt(fd, "")
}

// revalidate answers a repeated lookup of a name whose node the tree already
// has with one fstatat(2): when the name still holds the same inode, the
// node's descriptor (which pins that inode, so its number cannot have been
// reused) stays valid. Symlinks take the full path (their presented text,
// hence size, depends on the host).
func (n *node) revalidate(name string, out *fuse.EntryOut) *fs.Inode {
	ch := n.GetChild(name)
	if ch == nil {
		return nil
	}
	cn, ok := ch.Operations().(*node)
	if !ok || cn.linkText != "" || ch.StableAttr().Mode == syscall.S_IFLNK {
		return nil
	}
	var ust unix.Stat_t
	if unix.Fstatat(n.fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return nil
	}
	st := statFromUnix(&ust)
	sa := n.m.stable(&st)
	if sa != ch.StableAttr() {
		return nil
	}
	out.Attr.FromStat(&st)
	out.Attr.Ino = sa.Ino
	n.shortenTTL(out)
	return ch
}

// shortenTTL gives entries of a directory the watcher could not watch the
// timeouts an unwatched mount has.
func (n *node) shortenTTL(out *fuse.EntryOut) {
	if n.unwatched {
		out.SetEntryTimeout(DefaultTimeout)
		out.SetAttrTimeout(DefaultTimeout)
	}
}

// addChild makes the node for fd (attributes st) at physical path p and
// fills out; EMFILE (fd closed) when the session holds its fixed share of
// descriptors and this one could not be closed and opened again.
func (n *node) addChild(ctx context.Context, fd int, st *syscall.Stat_t, p string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	out.Attr.FromStat(st)
	sa := n.m.stable(st)
	out.Attr.Ino = sa.Ino
	n.shortenTTL(out)
	ch, errno := n.m.newNode(fd, p, st.Mode)
	if errno != 0 {
		return nil, errno
	}
	return n.NewInode(ctx, ch, sa), 0
}

// ensureWatched places the directory's inotify watch the first time the
// kernel looks into it, within the session's share of watches
// (share.takeWatch).
func (n *node) ensureWatched() {
	n.watchOnce.Do(func() {
		switch {
		case n.m.watch == nil:
			n.unwatched = true
		case !n.m.sh.takeWatch():
			// Beyond the session's share of inotify watches (watchShare):
			// short timeouts here, as for a watch the kernel refused.
			n.unwatched = true
		case n.m.watch.add(n):
			n.watched = true
		default:
			n.m.sh.putWatch()
			n.unwatched = true
		}
	})
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.stats.op(opGetattr)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if n.linkText != "" {
		n.m.host.linkAttr(n, &out.Attr)
		return 0
	}
	fd := n.fd()
	if h, ok := f.(*fileHandle); ok {
		if hfd := h.openedFd(); hfd >= 0 {
			fd = hfd
		}
	}
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		return toErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK && n.m.symlinks == SymlinksContain {
		if text, err := n.storedText(); err == nil {
			shown, _ := n.m.present(filepath.Dir(n.where()), text)
			st.Size = int64(len(shown))
		}
	}
	out.FromStat(&st)
	out.Ino = n.StableAttr().Ino
	return 0
}

// fileID is the (dev, ino) of the node's object, the policy's identity of
// it: in a layered mount its origin's in the project (overlay.go); zero
// when it cannot be told (fstat fails; an overlay object with no origin).
func (n *node) fileID() identity.FileID {
	if l := n.m.lower; l != nil {
		if id := n.projID.Load(); id != nil {
			return *id
		}
		id, known := l.originOf(n.fd(), n.desc.htype, n.desc.handle, n.IsRoot())
		if known {
			n.projID.Store(&id)
		}
		return id
	}
	return fdID(n.fd())
}

// check asks the policy about op on the node's own physical path and
// object (a hard link to a protected file is protected by identity).
func (n *node) check(ctx context.Context, op policy.Op, name string) syscall.Errno {
	p := n.where()
	d := n.m.decide(op, p, policy.Object{Self: n.fileID()})
	if d.Allow {
		return 0
	}
	return n.m.deny(ctx, name, p, d)
}

// checkChild asks the policy about op on the name in this directory.
func (n *node) checkChild(ctx context.Context, op policy.Op, opName, name string) (string, syscall.Errno) {
	n.ensureWatched()
	p := join(n.where(), name)
	d := n.m.decide(op, p, policy.Object{Dir: n.fileID(), Name: name})
	if d.Allow {
		switch op {
		case policy.OpCreate, policy.OpMkdir, policy.OpMknod, policy.OpSymlink:
			n.m.expect(n, name, unix.IN_CREATE)
		case policy.OpUnlink, policy.OpRmdir:
			n.m.expect(n, name, unix.IN_DELETE)
		}
		return p, 0
	}
	return p, n.m.deny(ctx, opName, p, d)
}

// expect announces an entry event this server is about to cause.
func (m *mount) expect(dir *node, name string, mask uint32) {
	if m.watch != nil {
		m.watch.expect(dir, name, mask)
	}
}

// deny logs and counts a refusal and returns its errno.
func (m *mount) deny(ctx context.Context, op, p string, d policy.Decision) syscall.Errno {
	m.stats.denied(d.Rule)
	// The caller's credentials: on an --allow-other mount several users
	// share it, so who was refused matters as much as which process.
	pid, uid, gid := uint32(0), uint32(0), uint32(0)
	if c, ok := fuse.FromContext(ctx); ok {
		pid, uid, gid = c.Pid, c.Uid, c.Gid
	}
	kv := []any{"op", op, "path", p, "rule", d.Rule,
		"errno", identity.ErrnoName(d.Errno), "pid", pid, "uid", uid, "gid", gid}
	if srcs := m.cross.sources(p); srcs != nil {
		// In a mount inside the root: where the object is, which decided.
		kv = append(kv, "source", strings.Join(srcs, ","))
	}
	m.log.Info("denied", m.sessionAttr(kv...)...)
	return d.Errno
}

// sessionAttr returns the log attributes kv led by session=<id>, or kv
// alone for a mount of no session (a plain `wsfs mount`): no session="".
func (m *mount) sessionAttr(kv ...any) []any {
	if m.session == "" {
		return kv
	}
	return append([]any{"session", m.session}, kv...)
}

func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	n.m.stats.op(opAccess)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if mask&unix.W_OK != 0 {
		if errno := n.check(ctx, policy.OpWrite, "access"); errno != 0 {
			return errno
		}
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	m := n.m
	m.stats.op(opSetattr)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if errno := n.check(ctx, policy.OpSetattr, "setattr"); errno != 0 {
		return errno
	}
	// A mode change rewrites an ACL's mask, a chown drops
	// security.capability: the backing attributes may change.
	defer n.xattrs.drop()
	isLink := n.StableAttr().Mode == syscall.S_IFLNK
	const changes = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE | fuse.FATTR_ATIME | fuse.FATTR_MTIME
	if !isLink && in.Valid&fuse.FATTR_MODE == 0 && killOnSetattr(ctx, in.Valid, changes) {
		// Before the chown, so that the old group decides (killpriv.go).
		if errno := n.killSuidgid(ctx); errno != 0 {
			return errno
		}
	}
	if mode, ok := in.GetMode(); ok {
		if isLink {
			return syscall.EOPNOTSUPP // Linux has no lchmod
		}
		if err := unix.Chmod(procPath(n.fd()), mode&07777); err != nil {
			return toErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if in.Valid&changes == 0 {
		// Nothing to change: chown(f, -1, -1) (or utimensat with both
		// times UTIME_OMIT), for which ext4 still moves ctime; FUSE sends
		// no FATTR_CTIME without the writeback cache. A chown to -1, -1
		// moves it here too.
		uok, gok, uid, gid = true, true, ^uint32(0), ^uint32(0)
	}
	if uok || gok {
		u, g := -1, -1
		if uok && uid != ^uint32(0) {
			u = int(uid)
		}
		if gok && gid != ^uint32(0) {
			g = int(gid)
		}
		if err := unix.Fchownat(n.fd(), "", u, g, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return toErrno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		var err error
		if h, ok := f.(*fileHandle); ok && h.openedFd() >= 0 {
			err = unix.Ftruncate(h.openedFd(), int64(size))
		} else {
			err = unix.Truncate(procPath(n.fd()), int64(size))
		}
		if err != nil {
			return toErrno(err)
		}
	}
	if in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if in.Valid&fuse.FATTR_ATIME != 0 {
			ts[0] = unix.Timespec{Sec: int64(in.Atime), Nsec: int64(in.Atimensec)}
			if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
				ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if in.Valid&fuse.FATTR_MTIME != 0 {
			ts[1] = unix.Timespec{Sec: int64(in.Mtime), Nsec: int64(in.Mtimensec)}
			if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
				ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if err := unix.UtimesNanoAt(n.fd(), "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return toErrno(err)
		}
	}
	return n.Getattr(ctx, f, out)
}

// isWriteOpen reports whether open(2) flags can modify the file.
func isWriteOpen(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.m.stats.op(opOpen)
	if errno := n.pin(); errno != 0 {
		return nil, 0, errno
	}
	defer n.unpin()
	if errno := n.checkHostRead(ctx, "open"); errno != 0 {
		return nil, 0, errno
	}
	if isWriteOpen(flags) {
		if errno := n.check(ctx, policy.OpOpenWrite, "open"); errno != 0 {
			return nil, 0, errno
		}
	}
	// O_NOFOLLOW was applied by the kernel's own walk (it never sends OPEN
	// for a symlink); kept, it would refuse the /proc/self/fd magic link.
	oflags := int(flags) &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_NOCTTY | syscall.O_NOFOLLOW)
	passed := false
	if id := n.passthroughID(); id != 0 {
		passed = n.m.offerBacking(ctx, id)
	}
	if passed && !isWriteOpen(flags) {
		// Reads go through the kernel's own backing file (fileHandle).
		h, errno := deferredFileHandle(n, oflags)
		if errno != 0 {
			return nil, 0, errno
		}
		return h, 0, 0
	}
	// A write open is made here: O_TRUNC, and errors such as ETXTBSY,
	// happen at open(2), as on ext4.
	h, errno := openFile(n, oflags)
	if errno != 0 {
		return nil, 0, errno
	}
	if killRequested(ctx) { // O_TRUNC by a caller without CAP_FSETID
		if errno := n.killSuidgid(ctx); errno != 0 {
			h.Release(ctx)
			return nil, 0, errno
		}
	}
	return h, 0, 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.m.stats.op(opOpendir)
	if errno := n.pin(); errno != 0 {
		return nil, 0, errno
	}
	defer n.unpin()
	if errno := n.checkHostRead(ctx, "opendir"); errno != 0 {
		return nil, 0, errno
	}
	n.ensureWatched()
	dh, errno := n.openDir()
	if errno != 0 {
		return nil, 0, errno
	}
	// With the watcher on, the kernel may keep listings in its page cache
	// (FOPEN_CACHE_DIR): changes through the mount invalidate them in the
	// kernel itself, changes on the host through the watcher.
	var fuseFlags uint32
	if n.watched {
		fuseFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return dh, fuseFlags, 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	n.m.stats.op(opStatfs)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(n.fd(), &st); err != nil {
		return toErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// Extended attributes go through /proc/self/fd, as O_PATH descriptors refuse
// f*xattr calls. A symlink carries no user attributes on Linux (xattr(7)).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.m.stats.op(opGetxattr)
	if errno := n.pin(); errno != 0 {
		return 0, errno
	}
	defer n.unpin()
	if n.StableAttr().Mode == syscall.S_IFLNK {
		return 0, syscall.ENODATA
	}
	return n.getxattrCached(attr, func() (int, error) { return unix.Getxattr(procPath(n.fd()), attr, dest) })
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.m.stats.op(opListxattr)
	if errno := n.pin(); errno != 0 {
		return 0, errno
	}
	defer n.unpin()
	if n.StableAttr().Mode == syscall.S_IFLNK {
		return 0, 0
	}
	sz, err := unix.Listxattr(procPath(n.fd()), dest)
	return uint32(sz), toErrno(err)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.m.stats.op(opSetxattr)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if errno := n.check(ctx, policy.OpSetxattr, "setxattr"); errno != 0 {
		return errno
	}
	if n.StableAttr().Mode == syscall.S_IFLNK {
		return syscall.EPERM
	}
	defer n.xattrs.drop()
	return toErrno(unix.Setxattr(procPath(n.fd()), attr, data, int(flags)))
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	n.m.stats.op(opRemovexattr)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if errno := n.check(ctx, policy.OpRemovexattr, "removexattr"); errno != 0 {
		return errno
	}
	if n.StableAttr().Mode == syscall.S_IFLNK {
		return syscall.EPERM
	}
	defer n.xattrs.drop()
	return toErrno(unix.Removexattr(procPath(n.fd()), attr))
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	n.m.stats.op(opFallocate)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if errno := n.check(ctx, policy.OpFallocate, "fallocate"); errno != 0 {
		return errno
	}
	h, ok := f.(*fileHandle)
	if !ok {
		return syscall.EBADF
	}
	_, fd, errno := h.file()
	if errno != 0 {
		return errno
	}
	return toErrno(unix.Fallocate(fd, mode, int64(off), int64(size)))
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	n.m.stats.op(opCopyFileRange)
	if errno := n.pin(); errno != 0 {
		return 0, errno
	}
	defer n.unpin()
	dst, ok := out.Operations().(*node)
	if !ok {
		return 0, syscall.EXDEV
	}
	if errno := dst.pin(); errno != 0 {
		return 0, errno
	}
	defer dst.unpin()
	if errno := dst.check(ctx, policy.OpCopyFileRange, "copy_file_range"); errno != 0 {
		return 0, errno
	}
	hin, ok1 := fhIn.(*fileHandle)
	hout, ok2 := fhOut.(*fileHandle)
	if !ok1 || !ok2 {
		return 0, syscall.EBADF
	}
	_, infd, errno := hin.file()
	if errno != 0 {
		return 0, errno
	}
	_, outfd, errno := hout.file()
	if errno != 0 {
		return 0, errno
	}
	in, o := int64(offIn), int64(offOut)
	cnt, err := unix.CopyFileRange(infd, &in, outfd, &o, int(length), int(flags))
	return uint32(cnt), toErrno(err)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	m := n.m
	m.stats.op(opReadlink)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	if n.linkText != "" {
		return linkReply(n.linkText)
	}
	if errno := n.checkHostRead(ctx, "readlink"); errno != 0 {
		return nil, errno
	}
	text, err := n.storedText()
	if err != nil {
		return nil, toErrno(err)
	}
	m.policy().ObserveLink(n.where(), text) // the kernel is about to follow it
	shown, _ := m.present(filepath.Dir(n.where()), text)
	return linkReply(shown)
}

// maxLinkText is the longest READLINK reply the kernel takes: it reads the
// reply into one page and refuses one of PAGE_SIZE bytes or more with EIO
// (fs/fuse/dir.c, fuse_readlink_page); PATH_MAX - 1 on every page size.
const maxLinkText = unix.PathMax - 1

// linkReply is READLINK's answer for the presented text: ENAMETOOLONG when
// it is longer than the kernel takes (a long escaping target behind the
// host view's prefix), so cp -a and readlink report a clear errno, not EIO.
func linkReply(text string) ([]byte, syscall.Errno) {
	if len(text) > maxLinkText {
		return nil, syscall.ENAMETOOLONG
	}
	return []byte(text), 0
}
