package fusefs

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileHandle is an open backing file. go-fuse's LoopbackFile does the data
// path (read, write, locks, lseek, fsync); this type adds access to the
// descriptor and drops FLUSH. It offers no descriptor for passthrough: the
// node's own registration is used (backing.go).
//
// A read-only open under passthrough is deferred: the kernel reads through a
// backing file it opens itself, so the server opens a descriptor of its own
// only for a request that needs one (a lock, fsync, lseek, ioctl). A tar of
// a tree then costs no open(2)/close(2) in the server per file.
type fileHandle struct {
	n     *node
	flags int // open(2) flags for the deferred open

	mu    sync.Mutex
	lf    *fs.LoopbackFile // nil until opened
	fd    int              // -1 until opened
	errno syscall.Errno    // the deferred open's failure, answered ever after
	ref   *handleRef       // given back at Release
}

var (
	_ fs.FileReader    = (*fileHandle)(nil)
	_ fs.FileWriter    = (*fileHandle)(nil)
	_ fs.FileWritever  = (*fileHandle)(nil)
	_ fs.FileReleaser  = (*fileHandle)(nil)
	_ fs.FileFlusher   = (*fileHandle)(nil)
	_ fs.FileFsyncer   = (*fileHandle)(nil)
	_ fs.FileGetlker   = (*fileHandle)(nil)
	_ fs.FileSetlker   = (*fileHandle)(nil)
	_ fs.FileSetlkwer  = (*fileHandle)(nil)
	_ fs.FileLseeker   = (*fileHandle)(nil)
	_ fs.FileAllocater = (*fileHandle)(nil)
	_ fs.FileIoctler   = (*fileHandle)(nil)
	_ fs.FileStatxer   = (*fileHandle)(nil)
)

// handleRef is what an open handle holds of its node and session: a pin
// of the node's descriptor (an open file's node is never closed and opened
// again: fstat(2) of a file removed on the host goes on working, as on
// ext4) and one descriptor of the session's fixed share (share.takeFile).
// put gives both back once, at RELEASE or, for a handle the kernel never
// released (a connection aborted), when the handle is collected.
type handleRef struct {
	n    *node
	done atomic.Bool
}

// takeHandle counts a handle of n (pinned by the caller) in the session's
// share and pins n for it; EMFILE beyond the session's fixed share.
func takeHandle(n *node) (*handleRef, syscall.Errno) {
	if errno := n.m.sh.takeFile(); errno != 0 {
		return nil, errno
	}
	if errno := n.pin(); errno != 0 {
		n.m.sh.putFile()
		return nil, errno
	}
	return &handleRef{n: n}, 0
}

func (r *handleRef) put() {
	if r != nil && r.done.CompareAndSwap(false, true) {
		r.n.unpin()
		r.n.m.sh.putFile()
	}
}

// newFileHandle wraps fd, a descriptor opened for node n, with its count
// ref (takeHandle).
func newFileHandle(n *node, fd int, ref *handleRef) *fileHandle {
	h := &fileHandle{n: n, fd: fd, lf: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), ref: ref}
	runtime.AddCleanup(h, (*handleRef).put, ref)
	return h
}

// openFile opens node n (pinned) with flags for a new file handle:
// EMFILE when the session holds its share of fixed descriptors.
func openFile(n *node, flags int) (*fileHandle, syscall.Errno) {
	ref, errno := takeHandle(n)
	if errno != 0 {
		return nil, errno
	}
	fd, err := retryFd(func() (int, error) { return reopen(n.fd(), flags) })
	if err != nil {
		ref.put()
		return nil, toErrno(err)
	}
	return newFileHandle(n, fd, ref), 0
}

// deferredFileHandle is a handle for n (pinned) whose descriptor is
// opened with flags on first use.
func deferredFileHandle(n *node, flags int) (*fileHandle, syscall.Errno) {
	ref, errno := takeHandle(n)
	if errno != 0 {
		return nil, errno
	}
	h := &fileHandle{n: n, fd: -1, flags: flags, ref: ref}
	runtime.AddCleanup(h, (*handleRef).put, ref)
	return h, 0
}

// file returns the opened descriptor, opening it now for a deferred handle
// (the node is pinned by the handle).
func (h *fileHandle) file() (*fs.LoopbackFile, int, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lf == nil && h.errno == 0 {
		fd, err := retryFd(func() (int, error) { return reopen(h.n.fd(), h.flags) })
		switch {
		case err == unix.EMFILE || err == unix.ENFILE:
			return nil, -1, toErrno(err) // not remembered: a later use may succeed
		case err != nil:
			h.errno = toErrno(err)
		default:
			h.fd, h.lf = fd, fs.NewLoopbackFile(fd).(*fs.LoopbackFile)
		}
	}
	return h.lf, h.fd, h.errno
}

// openedFd is the handle's descriptor, or -1 while a deferred open has not
// happened.
func (h *fileHandle) openedFd() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fd
}

// Flush answers ENOSYS once so the kernel stops sending FLUSH on every
// close(2) (fc->no_flush): the kernel writes dirty pages back itself before
// it would send one, and locks are released on RELEASE, as LoopbackFile's
// OFD locks are.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno { return syscall.ENOSYS }

func (h *fileHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	lf, _, errno := h.file()
	if errno != 0 {
		return nil, errno
	}
	return lf.Read(ctx, buf, off)
}

func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	lf, _, errno := h.file()
	if errno != 0 {
		return 0, errno
	}
	w, errno := lf.Write(ctx, data, off)
	if errno == 0 && killRequested(ctx) {
		errno = h.n.killSuidgid(ctx)
	}
	return w, errno
}

func (h *fileHandle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	lf, _, errno := h.file()
	if errno != 0 {
		return 0, errno
	}
	w, errno := lf.Writev(ctx, data, off)
	if errno == 0 && killRequested(ctx) {
		errno = h.n.killSuidgid(ctx)
	}
	return w, errno
}

// Release closes the descriptor, if one was opened.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	lf := h.lf
	h.mu.Unlock()
	defer h.ref.put()
	if lf == nil {
		return 0
	}
	return lf.Release(ctx)
}

func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Fsync(ctx, flags)
}

func (h *fileHandle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Getlk(ctx, owner, lk, flags, out)
}

func (h *fileHandle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Setlk(ctx, owner, lk, flags)
}

func (h *fileHandle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Setlkw(ctx, owner, lk, flags)
}

func (h *fileHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	lf, _, errno := h.file()
	if errno != 0 {
		return 0, errno
	}
	return lf.Lseek(ctx, off, whence)
}

func (h *fileHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Allocate(ctx, off, size, mode)
}

func (h *fileHandle) Ioctl(ctx context.Context, cmd uint32, arg uint64, input, output []byte) (int32, syscall.Errno) {
	lf, _, errno := h.file()
	if errno != 0 {
		return 0, errno
	}
	return lf.Ioctl(ctx, cmd, arg, input, output)
}

func (h *fileHandle) Statx(ctx context.Context, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	lf, _, errno := h.file()
	if errno != 0 {
		return errno
	}
	return lf.Statx(ctx, flags, mask, out)
}

// passthroughOK reports whether FUSE passthrough can take the node's file:
// a regular file on a file system that is not a pseudo or stacked one.
// Neither changes for an inode, so the answer is computed once.
func (n *node) passthroughOK() bool {
	switch n.ptOK.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	ok := passthroughFile(n.fd())
	v := int32(2)
	if ok {
		v = 1
	}
	n.ptOK.Store(v)
	return ok
}

func passthroughFile(fd int) bool {
	var st syscall.Stat_t
	if fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false
	}
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil {
		return false
	}
	switch int64(sfs.Type) {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.FUSE_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC,
		unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.CGROUP_SUPER_MAGIC,
		unix.CGROUP2_SUPER_MAGIC, unix.BPF_FS_MAGIC, unix.EFIVARFS_MAGIC, unix.ECRYPTFS_SUPER_MAGIC,
		unix.PSTOREFS_MAGIC, 0x62656570 /* configfs */ :
		return false
	}
	return true
}

// dirHandle lists a backing directory with stable offsets (go-fuse's
// loopback stream: telldir/seekdir work), without the names the mount
// hides (mount.listFilter).
type dirHandle struct {
	ds   fs.DirStream
	keep func(name string) bool // nil: every name
	ref  *handleRef             // given back at Releasedir
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

// newDirHandle wraps the listing ds of n, with its count ref (openDir).
func (n *node) newDirHandle(ds fs.DirStream, ref *handleRef) *dirHandle {
	d := &dirHandle{ds: ds, ref: ref}
	runtime.AddCleanup(d, (*handleRef).put, ref)
	d.keep = n.m.listFilter(n.phys())
	return d
}

// listFilter returns the filter of a listing of the directory at the
// physical path dir; nil lists every name. A name either rule refuses is
// left out: a host view's own (hostView.listFilter: a hidden name is never
// listed, a passage lists only the names on the way), and, in a mount
// crossed inside the root (a host bind mount of a directory above a hidden
// place, in a host view or a session mount), the same at the mount's
// source (crossings.listFilter), so that a hidden place is listed at no
// path that shows it.
func (m *mount) listFilter(dir string) func(string) bool {
	pol := m.policy()
	var own func(string) bool
	if m.host != nil {
		own = m.host.listFilter(pol, dir)
	}
	atSource := m.cross.listFilter(pol, dir)
	switch {
	case own == nil:
		return atSource
	case atSource == nil:
		return own
	}
	return func(name string) bool { return own(name) && atSource(name) }
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	for {
		e, errno := d.ds.(fs.FileReaddirenter).Readdirent(ctx)
		if e == nil || d.keep == nil || d.keep(e.Name) {
			return e, errno
		}
	}
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.ds.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.ds.(fs.FileReleasedirer).Releasedir(ctx, flags)
	d.ref.put()
}

// openDir opens directory n (pinned) for a listing, its descriptor counted
// in the session's share (EMFILE beyond it).
func (n *node) openDir() (*dirHandle, syscall.Errno) {
	ref, errno := takeHandle(n)
	if errno != 0 {
		return nil, errno
	}
	fd, err := retryFd(func() (int, error) {
		return unix.Openat(n.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		ref.put()
		return nil, toErrno(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		unix.Close(fd)
		ref.put()
		return nil, errno
	}
	return n.newDirHandle(ds, ref), 0
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.ds.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
}
