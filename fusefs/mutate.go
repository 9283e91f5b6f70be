package fusefs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// Every mutation asks the policy first, then makes one *at call on this
// directory's descriptor with a single name, never following a final
// symlink.

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	n.m.stats.op(opCreate)
	if errno := n.pin(); errno != 0 {
		return nil, nil, 0, errno
	}
	defer n.unpin()
	p, errno := n.checkChild(ctx, policy.OpCreate, "create", name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// O_NOFOLLOW: a symlink planted on the host under this name is not
	// followed (go-fuse's loopback create follows it).
	if errno := n.m.sh.takeFile(); errno != 0 { // the handle's, before anything is made
		return nil, nil, 0, errno
	}
	var fd int
	err := asCaller(ctx, n.fd(), n.m.umask(ctx), func(mask uint32) (err error) {
		fd, err = retryFd(func() (int, error) {
			return unix.Openat(n.fd(), name, int(flags)|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode&^mask)
		})
		return err
	})
	if err != nil {
		n.m.sh.putFile()
		return nil, nil, 0, toErrno(err)
	}
	pfd, st, err := createdPath(n.fd(), name, fd)
	if err != nil {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, toErrno(err)
	}
	child, errno := n.addChild(ctx, pfd, &st, p, out)
	if errno != 0 {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, errno
	}
	cn := child.Operations().(*node)
	if errno := cn.pin(); errno != 0 {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, errno
	}
	if killRequested(ctx) { // an existing file opened with O_TRUNC
		if errno := cn.killSuidgid(ctx); errno != 0 {
			cn.unpin()
			unix.Close(fd)
			n.m.sh.putFile()
			return nil, nil, 0, errno
		}
	}
	h := newFileHandle(cn, fd, &handleRef{n: cn}) // counted above, pinned now
	if id := cn.passthroughID(); id != 0 {
		n.m.offerBacking(ctx, id)
	}
	return child, h, 0, 0
}

// createdPath returns an O_PATH descriptor for the file fd that was just
// created as name in dirfd, and its attributes. It opens the name again in
// dirfd (one name, looked up in the dcache) and keeps that descriptor only
// when it names the very object fd does (same device and inode); a name
// replaced on the host in between falls back to pathOf. The common case
// costs no walk through /proc (BenchmarkCreatedPath).
func createdPath(dirfd int, name string, fd int) (int, syscall.Stat_t, error) {
	var fst unix.Stat_t
	if unix.Fstat(fd, &fst) == nil {
		if pfd, st, err := openPathStat(dirfd, name); err == nil {
			if st.Dev == fst.Dev && st.Ino == fst.Ino {
				return pfd, st, nil
			}
			unix.Close(pfd)
		}
	}
	return pathOf(fd)
}

// pathOf returns an O_PATH descriptor for the object an open descriptor
// names, and its attributes: the node of a file just created, bound to the
// very object the create made (no second walk of the name).
func pathOf(fd int) (int, syscall.Stat_t, error) {
	var st syscall.Stat_t
	pfd, err := reopen(fd, unix.O_PATH)
	if err != nil {
		return -1, st, err
	}
	if err := fstat(pfd, &st); err != nil {
		unix.Close(pfd)
		return -1, st, err
	}
	return pfd, st, nil
}

// lookupNew returns the node for a name this directory just made.
func (n *node) lookupNew(ctx context.Context, name, p string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, st, err := openPathStat(n.fd(), name)
	if err != nil {
		return nil, toErrno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK && n.m.symlinks != SymlinksFollow {
		if text, err := identity.ReadlinkAt(fd, ""); err == nil {
			shown, _ := n.m.present(filepath.Dir(p), text)
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
	}
	return n.addChild(ctx, fd, &st, p, out)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	n.m.stats.op(opMkdir)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	p, errno := n.checkChild(ctx, policy.OpMkdir, "mkdir", name)
	if errno != 0 {
		return nil, errno
	}
	if err := asCaller(ctx, n.fd(), n.m.umask(ctx), func(mask uint32) error { return unix.Mkdirat(n.fd(), name, mode&^mask) }); err != nil {
		return nil, toErrno(err)
	}
	return n.lookupNew(ctx, name, p, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	n.m.stats.op(opMknod)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	op := policy.OpMknod
	if t := mode & syscall.S_IFMT; t == syscall.S_IFCHR || t == syscall.S_IFBLK {
		op = policy.OpMknodDevice
	}
	p, errno := n.checkChild(ctx, op, "mknod", name)
	if errno != 0 {
		return nil, errno
	}
	if err := asCaller(ctx, n.fd(), n.m.umask(ctx), func(mask uint32) error { return unix.Mknodat(n.fd(), name, mode&^mask, int(dev)) }); err != nil {
		return nil, toErrno(err)
	}
	return n.lookupNew(ctx, name, p, out)
}

// Symlink creates a link; creating one is data, whatever it points to (an
// escaping or dangling target included): what a walk through it may do is
// decided where it lands. A text naming a host-view path is stored with the
// physical path.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	m := n.m
	m.stats.op(opSymlink)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	p, errno := n.checkChild(ctx, policy.OpSymlink, "symlink", name)
	if errno != 0 {
		return nil, errno
	}
	if err := asCaller(ctx, n.fd(), n.m.umask(ctx), func(uint32) error { return unix.Symlinkat(m.storedText(target), n.fd(), name) }); err != nil {
		return nil, toErrno(err)
	}
	return n.lookupNew(ctx, name, p, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	m := n.m
	m.stats.op(opLink)
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	src, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if errno := src.pin(); errno != 0 {
		return nil, errno
	}
	defer src.unpin()
	n.ensureWatched()
	p := join(n.where(), name)
	// A hard link needs write access at both ends: otherwise an outside
	// file could be linked in and written through.
	if d := m.decidePair(true, src.where(), p, policy.Object{Self: src.fileID()},
		policy.Object{Dir: n.fileID(), Name: name}); !d.Allow {
		return nil, m.deny(ctx, "link", p, d)
	}
	m.expect(n, name, unix.IN_CREATE)
	err := unix.Linkat(src.fd(), "", n.fd(), name, unix.AT_EMPTY_PATH)
	if err == unix.ENOENT || err == unix.EPERM {
		// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc/self/fd does not
		// (linkat(2)).
		err = unix.Linkat(unix.AT_FDCWD, procPath(src.fd()), n.fd(), name, unix.AT_SYMLINK_FOLLOW)
	}
	if err != nil {
		return nil, toErrno(err)
	}
	var st syscall.Stat_t
	if err := fstat(src.fd(), &st); err != nil {
		return nil, toErrno(err)
	}
	out.Attr.FromStat(&st)
	out.Attr.Ino = src.StableAttr().Ino
	return src.EmbeddedInode(), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	n.m.stats.op(opUnlink)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if _, errno := n.checkChild(ctx, policy.OpUnlink, "unlink", name); errno != 0 {
		return errno
	}
	return toErrno(unix.Unlinkat(n.fd(), name, 0))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	defer policy.SerializeNames(name)() // decision and call, one step (git.go)
	n.m.stats.op(opRmdir)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	if _, errno := n.checkChild(ctx, policy.OpRmdir, "rmdir", name); errno != 0 {
		return errno
	}
	return toErrno(unix.Unlinkat(n.fd(), name, unix.AT_REMOVEDIR))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	defer policy.SerializeNames(name, newName)() // decision and call, one step (git.go)
	m := n.m
	m.stats.op(opRename)
	if errno := n.pin(); errno != 0 {
		return errno
	}
	defer n.unpin()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if errno := np.pin(); errno != 0 {
		return errno
	}
	defer np.unpin()
	n.ensureWatched()
	np.ensureWatched()
	src, dst := join(n.where(), name), join(np.where(), newName)
	so, do := policy.Object{Dir: n.fileID(), Name: name}, policy.Object{Dir: np.fileID(), Name: newName}
	if d := m.decidePair(false, src, dst, so, do); !d.Allow {
		return m.deny(ctx, "rename", src+" -> "+dst, d)
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		// An exchange is two moves: the destination's object lands at
		// the source's name, decided as its own rename.
		if d := m.decidePair(false, dst, src, do, so); !d.Allow {
			return m.deny(ctx, "rename", dst+" -> "+src, d)
		}
	}
	if flags&unix.RENAME_WHITEOUT != 0 {
		// The whiteout left at the source is a 0:0 character device
		// (rename(2)): decided as one.
		if d := m.policy().Decide(policy.OpMknodDevice, src); !d.Allow {
			return m.deny(ctx, "rename", src, d)
		}
	}
	m.expect(n, name, unix.IN_MOVED_FROM)
	m.expect(np, newName, unix.IN_MOVED_TO)
	if flags&unix.RENAME_EXCHANGE != 0 {
		m.expect(np, newName, unix.IN_MOVED_FROM)
		m.expect(n, name, unix.IN_MOVED_TO)
	}
	return toErrno(unix.Renameat2(n.fd(), name, np.fd(), newName, uint(flags)))
}

// Tmpfile answers open(O_TMPFILE): an unnamed file in this directory, which
// the caller may later link into place (open(2)).
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.m.stats.op(opCreate)
	if errno := n.pin(); errno != 0 {
		return nil, nil, 0, errno
	}
	defer n.unpin()
	// The file has no name yet: the directory's own decision applies.
	if errno := n.check(ctx, policy.OpCreate, "tmpfile"); errno != 0 {
		return nil, nil, 0, errno
	}
	p := n.where()
	if errno := n.m.sh.takeFile(); errno != 0 { // the handle's, before anything is made
		return nil, nil, 0, errno
	}
	var fd int
	err := asCaller(ctx, n.fd(), n.m.umask(ctx), func(mask uint32) (err error) {
		fd, err = retryFd(func() (int, error) {
			return unix.Openat(n.fd(), ".", int(flags)|unix.O_TMPFILE|unix.O_CLOEXEC, mode&^mask)
		})
		return err
	})
	if err != nil {
		n.m.sh.putFile()
		return nil, nil, 0, toErrno(err)
	}
	pfd, st, err := pathOf(fd)
	if err != nil {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, toErrno(err)
	}
	out.Attr.FromStat(&st)
	sa := n.m.stable(&st)
	out.Attr.Ino = sa.Ino
	n.shortenTTL(out)
	tn, errno := n.m.newNode(pfd, p, st.Mode)
	if errno != 0 {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, errno
	}
	child := n.NewInode(ctx, tn, sa)
	cn := child.Operations().(*node)
	if errno := cn.pin(); errno != 0 {
		unix.Close(fd)
		n.m.sh.putFile()
		return nil, nil, 0, errno
	}
	h := newFileHandle(cn, fd, &handleRef{n: cn}) // counted above, pinned now
	if id := cn.passthroughID(); id != 0 {
		n.m.offerBacking(ctx, id)
	}
	return child, h, 0, 0
}
