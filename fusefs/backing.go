package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE passthrough with one backing file per node (Linux >= 6.9, root).
//
// go-fuse's bridge registers a backing descriptor when an inode's first file
// opens and unregisters it when its last one closes: two ioctls on
// /dev/fuse, and a server-side open(2)/close(2), per open of a file nobody
// else holds open, e.g. every file of a tar. Here each node registers its
// O_PATH descriptor once (fuse_backing_open takes any descriptor, fget_raw;
// the kernel opens the backing file itself at each FUSE open from its path,
// with the FUSE file's flags and the server's credentials:
// fs/fuse/passthrough.c, fuse_passthrough_open → backing_file_open), and
// every passthrough open of that node names the same backing ID, so no two
// backing files ever meet on one inode (fuse_inode_uncached_io_start answers
// EBUSY to that). The ID is unregistered when the node's descriptor is
// released (the kernel has forgotten the inode, so no file of it is open);
// closing the descriptor when the cache evicts it does not end the
// registration, as the kernel holds the file itself.
//
// The ID reaches the OPEN/CREATE reply through backingReply, a wrapper of
// go-fuse's raw file system: node.Open files it under the request's cancel
// channel (fuse.Context.Cancel, one per request in flight) and the wrapper
// takes it out when the bridge has answered. File handles never offer a
// descriptor to the bridge (no FilePassthroughFder), so it registers none.

// backing is a node's registration; guarded by mu.
type backing struct {
	mu     sync.Mutex
	id     int32 // 0: none yet
	failed bool  // registration refused: no passthrough for this node
}

// passthroughID returns the node's backing ID, registering its descriptor
// on first use; 0 when the node's file cannot be passed through.
func (n *node) passthroughID() int32 {
	srv := n.m.fuseSrv.Load()
	if srv == nil || !n.m.passthrough || n.m.noBacking.Load() {
		return 0
	}
	if n.pin() != 0 {
		return 0
	}
	defer n.unpin()
	if !n.passthroughOK() {
		return 0
	}
	b := &n.backing
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.id != 0 || b.failed {
		return b.id
	}
	id, errno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(n.fd())})
	if errno != 0 {
		// EPERM: passthrough not negotiated (no node will have it);
		// ELOOP: this file's file system is stacked too deep.
		b.failed = true
		if errno == syscall.EPERM && n.m.noBacking.CompareAndSwap(false, true) {
			n.m.log.Info("FUSE passthrough refused by the kernel; the server serves file data", n.m.sessionAttr("err", errno)...)
		}
		return 0
	}
	b.id = id
	n.desc.backing.Store(&backingRef{srv: srv, id: id})
	if st := n.m.keepState(); st != nil {
		st.SetBacking(n.StableAttr().Ino, id)
	}
	return id
}

// backingRef is what descriptor.close unregisters.
type backingRef struct {
	srv *fuse.Server
	id  int32
}

// offerBacking files id for the reply to the request ctx belongs to; false
// when ctx carries no request (then the open goes without passthrough).
func (m *mount) offerBacking(ctx context.Context, id int32) bool {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Cancel == nil {
		return false
	}
	m.pendingBacking.Store(fc.Cancel, id)
	return true
}

// backingReply sets the backing ID node.Open, Create or Tmpfile offered
// into the reply (FOPEN_PASSTHROUGH; no FOPEN_KEEP_CACHE, as go-fuse does).
type backingReply struct {
	fuse.RawFileSystem
	m *mount
}

func (r *backingReply) apply(cancel <-chan struct{}, st fuse.Status, out *fuse.OpenOut) fuse.Status {
	v, ok := r.m.pendingBacking.LoadAndDelete(cancel)
	if ok && st.Ok() {
		out.BackingID = v.(int32)
		out.OpenFlags |= fuse.FOPEN_PASSTHROUGH
		out.OpenFlags &^= fuse.FOPEN_KEEP_CACHE
	}
	return st
}

func (r *backingReply) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.apply(cancel, r.RawFileSystem.Open(cancel, in, out), out)
}

func (r *backingReply) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return r.apply(cancel, r.RawFileSystem.Create(cancel, in, name, out), &out.OpenOut)
}

func (r *backingReply) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return r.apply(cancel, r.RawFileSystem.Tmpfile(cancel, in, out), &out.OpenOut)
}
