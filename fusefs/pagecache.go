package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Small read-only files from the kernel's page cache (DESIGN.md,
// "Performance").
//
// A file read through FUSE passthrough costs a GETATTR after every read:
// the kernel marks the FUSE inode's atime stale after each passthrough read
// (fs/fuse/passthrough.c, fuse_file_accessed → fuse_invalidate_atime; the
// mount's noatime does not stop it), and the next stat(2) or fstat(2), which
// tar and compilers make after reading, must ask the server. A file opened in
// the kernel's cached io mode with FOPEN_KEEP_CACHE is read from the FUSE
// inode's own page cache: after the first read nothing reaches the server
// and nothing marks atime stale (fuse_invalidate_atime runs only for reads
// the server answers). So a read-only open of a small, singly linked file
// below a watched directory is served in cached mode, and keeps the pages
// the kernel holds while nothing can have changed them:
//
//   - on the host, the watcher drops the pages on IN_MODIFY (watch.go);
//     a file with more than one link could be written through a name in a
//     directory nobody watches, so it is passed through instead;
//   - through the mount, every write open bumps the node's data generation,
//     and the next cached open without FOPEN_KEEP_CACHE makes the kernel drop
//     its pages (fuse_finish_open → invalidate_inode_pages2);
//   - whatever both miss (a shared mmap written on the host, which raises no
//     inotify event) is dropped when the attributes are next fetched and
//     show another mtime or size (FUSE_AUTO_INVAL_DATA), at most the
//     attribute timeout later.
//
// The kernel refuses to mix io modes on one inode: an open that asks for
// passthrough while a cached open is live, or the reverse, fails with EIO
// (fs/fuse/iomode.c, fuse_file_io_open). The server therefore counts the
// live opens of each mode per node: while a cached open lives every open is
// cached (a write open then writes through the page cache with WRITE
// requests), while a passthrough open lives every open is passed through.
// The kernel leaves a mode when a file's last reference goes, before it
// sends RELEASE, so the server's counts are never below the kernel's and
// its choice never conflicts with the kernel's mode.

// cachedReadMax is the largest file (bytes) a read-only open serves from
// the kernel's page cache; larger files are passed through, which reads
// them without READ round trips and without a second copy in memory.
const cachedReadMax = 1 << 20

// ioMode is how the kernel does a file handle's I/O.
type ioMode uint8

const (
	ioCached      ioMode = iota + 1 // the FUSE inode's page cache, READ/WRITE to the server
	ioPassthrough                   // the backing file (FOPEN_PASSTHROUGH)
)

// opens counts a node's live file handles by io mode and tracks whether the
// kernel's cached pages can be kept; guarded by mu.
type opens struct {
	mu          sync.Mutex
	cached      int
	passthrough int
	// gen counts write opens through the mount; kept is gen as of the
	// last cached open that let the kernel drop its pages (0 never), so
	// pages are kept only while kept == gen.
	gen, kept uint64
	// told is the size and mtime the server last gave the kernel for the
	// node (noteAttr); valid when toldOK.
	toldSize  int64
	toldMtime unix.Timespec
	toldOK    bool
}

// noteAttr records the size and mtime of attributes sent to the kernel for
// n (LOOKUP, GETATTR, SETATTR, CREATE, LINK replies).
func (n *node) noteAttr(st *syscall.Stat_t) {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	o := &n.opens
	o.mu.Lock()
	o.toldSize, o.toldMtime, o.toldOK = st.Size, unix.Timespec(st.Mtim), true
	o.mu.Unlock()
}

// openIO decides the io mode of a new handle of n, opened for writing or
// not, and whether the kernel may keep its cached pages (FOPEN_KEEP_CACHE).
// For a passthrough handle the backing ID has been offered for the reply
// (offerBacking). The handle's mode is counted until releaseIO.
func (n *node) openIO(ctx context.Context, write bool) (mode ioMode, keep bool) {
	var st unix.Stat_t
	cacheable := !write && n.cacheableRead(&st)
	o := &n.opens
	o.mu.Lock()
	defer o.mu.Unlock()
	if write {
		o.gen++
	}
	if cacheable && (!o.toldOK || o.toldSize != st.Size || o.toldMtime != st.Mtim) {
		// Changed on the host since the kernel last heard of it: the
		// kernel's i_size would cut reads short. Passed through, the
		// read sees the backing file as it is now.
		cacheable = false
	}
	if o.passthrough == 0 && (o.cached > 0 || cacheable) {
		o.cached++
		if !cacheable {
			return ioCached, false
		}
		keep = o.kept != 0 && o.kept == o.gen
		o.kept = o.gen
		if o.kept == 0 {
			// Never 0 after a cached open: 0 means "never dropped".
			o.gen, o.kept = 1, 1
		}
		return ioCached, keep
	}
	if id := n.passthroughID(); id != 0 && n.m.offerBacking(ctx, id) {
		o.passthrough++
		return ioPassthrough, false
	}
	o.cached++
	return ioCached, false
}

// releaseIO ends the count of a handle opened in mode.
func (n *node) releaseIO(mode ioMode) {
	o := &n.opens
	o.mu.Lock()
	switch mode {
	case ioCached:
		o.cached--
	case ioPassthrough:
		o.passthrough--
	}
	o.mu.Unlock()
}

// cacheableRead reports whether a read-only open of n may be served from
// the kernel's page cache: the mount watches host changes, the node's
// parent directory is watched, and the file is regular, singly linked and
// at most cachedReadMax bytes (one fstat(2) of the node's descriptor, left
// in st).
func (n *node) cacheableRead(st *unix.Stat_t) bool {
	if n.m.watch == nil || n.fd < 0 {
		return false
	}
	_, p := n.Parent()
	if p == nil {
		return false
	}
	pn, ok := p.Operations().(*node)
	if !ok {
		return false
	}
	pn.ensureWatched()
	if !pn.watched {
		return false
	}
	if unix.Fstat(n.fd, st) != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Nlink == 1 && st.Size <= cachedReadMax
}

// keepCacheFlag is the OPEN reply flag for keep.
func keepCacheFlag(keep bool) uint32 {
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}
