package fusefs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/transport"
)

// Connections that outlive the process (DESIGN.md, "Round 4"). With
// Config.Keep, a mount's /dev/fuse descriptor and its state (transport.State)
// are put in a descriptor store as soon as the kernel has answered INIT and
// before the first request is served; from then on every node the kernel is
// told of (by its node ID, which is the inode number: fs.Options
// ExternalNodeID) with every change of the kernel's lookup count of it
// (each reply naming it, each FORGET), every open handle and its release,
// every passthrough backing ID and every allocated inode number is appended
// to the state. A successor (Config.Adopt) serves the same connection: it
// finds each node again by its file handle (open_by_handle_at(2), so a
// recycled inode number is ESTALE, never another file), registers nodes
// (with those counts) and handles under the numbers the kernel holds, asks the kernel to send again
// what the predecessor read but never answered (FUSE_NOTIFY_RESEND), and
// serves. Processes in the mount see a pause.
//
// A request the predecessor had carried out but not answered when it was
// killed is sent again (FUSE_NOTIFY_RESEND); each name-changing request is
// marked in the state's intent ring before it is carried out, and a resent
// one so marked answers its "already done" result as the success it was
// (keepReply.again). Locks taken through the mount (flock, POSIX and OFD:
// each is the handle's descriptor's OFD or flock lock on the backing file)
// are recorded with their handle and set again on the reopened descriptor
// (restoreLocks); they are free between the predecessor's end and that,
// for processes outside the mount only. What does not survive: the
// position of a directory listing in progress without the watcher (it
// restarts from the first entry).

// keepState returns the mount's state, nil when it is not kept.
func (m *mount) keepState() *transport.State { return m.state.Load() }

// keepNode records that the kernel is being told of n (inode sa) at
// physical path p: the file handle a successor finds it again by.
func (m *mount) keepNode(n *node, sa fs.StableAttr, p string) {
	st := m.keepState()
	if st == nil {
		return
	}
	rec := &transport.Node{Ino: sa.Ino, Mode: sa.Mode, Path: p, Type: -1}
	if n.linkText == "" {
		d := n.desc
		if d.htype < 0 {
			// No handle (a file system without export support):
			// this node cannot be found again after a restart.
			return
		}
		rec.Type, rec.Handle, rec.MountID = d.htype, d.handle, d.mountID
	}
	// A backing ID registered before the kernel was told of the node (a
	// CREATE opens, and passes through, before its reply) was recorded
	// before this record, where a successor's replay cannot give it to
	// the node: recorded again after it. Under the backing's lock, so
	// that a registration racing this is recorded after it either way.
	b := &n.backing
	b.mu.Lock()
	defer b.mu.Unlock()
	st.AddNode(rec)
	if b.id != 0 {
		st.SetBacking(sa.Ino, b.id)
	}
}

// keepCount records a change of the kernel's lookup count of node ino
// (go-fuse's fs.Options.OnLookupCount), so that a successor restores every
// node with the kernel's count: a FORGET may drop a single lookup, and a
// successor that did not know the count would drop the node while the
// kernel still refers to it. Counts by node ID commute, so no order
// between a forgotten node's records and those of a new node for the same
// inode number matters.
func (m *mount) keepCount(ino uint64, delta int64) {
	st := m.keepState()
	if st == nil {
		return
	}
	if countRecord != nil {
		countRecord(ino, delta, func() { st.Count(ino, delta) })
		return
	}
	st.Count(ino, delta)
}

// countRecord, when set (tests only), is called in place of recording a
// lookup count change, with the call that records it (keep_test.go delays
// one).
var countRecord func(ino uint64, delta int64, record func())

// keepReply records open file handles and their releases from the replies
// of the raw file system it wraps (the handle number is chosen by go-fuse's
// bridge, below node.Open).
type keepReply struct {
	fuse.RawFileSystem
	m *mount
}

func (r *keepReply) opened(st fuse.Status, fh uint64, ino uint64, flags uint32, dir bool) fuse.Status {
	if s := r.m.keepState(); s != nil && st.Ok() && fh != 0 {
		s.Open(transport.File{Fh: uint32(fh), Ino: ino, Flags: flags, Dir: dir})
	}
	return st
}

func (r *keepReply) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.opened(r.RawFileSystem.Open(cancel, in, out), out.Fh, in.NodeId, in.Flags, false)
}

func (r *keepReply) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.opened(r.RawFileSystem.OpenDir(cancel, in, out), out.Fh, in.NodeId, in.Flags, true)
}

func (r *keepReply) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	_, again := r.again(&in.InHeader)
	st := r.RawFileSystem.Create(cancel, in, name, out)
	undone("create", name)
	r.succeeded(&in.InHeader, st)
	done("create", name)
	if again && st == fuse.Status(syscall.EEXIST) && in.Flags&syscall.O_EXCL != 0 {
		// The predecessor made it: open what it made.
		in2 := *in
		in2.Flags &^= syscall.O_EXCL | syscall.O_TRUNC
		in2.Unique &^= transport.UniqueResend
		st = r.RawFileSystem.Create(cancel, &in2, name, out)
	}
	return r.opened(st, out.Fh, out.NodeId, in.Flags, false)
}

func (r *keepReply) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return r.opened(r.RawFileSystem.Tmpfile(cancel, in, out), out.Fh, out.NodeId, in.Flags, false)
}

func (r *keepReply) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	r.RawFileSystem.Release(cancel, in)
	if s := r.m.keepState(); s != nil {
		s.Release(uint32(in.Fh))
	}
}

// SetLk and SetLkw record a lock request granted through a handle, so
// that a successor sets the handle's locks again on the descriptor it
// reopens (restoreLocks).
func (r *keepReply) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return r.locked(r.RawFileSystem.SetLk(cancel, in), in)
}

func (r *keepReply) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return r.locked(r.RawFileSystem.SetLkw(cancel, in), in)
}

func (r *keepReply) locked(st fuse.Status, in *fuse.LkIn) fuse.Status {
	if s := r.m.keepState(); s != nil && st.Ok() {
		s.Lock(uint32(in.Fh), transport.Lock{Flock: in.LkFlags&fuse.FUSE_LK_FLOCK != 0, Typ: in.Lk.Typ, Start: in.Lk.Start, End: in.Lk.End})
	}
	return st
}

func (r *keepReply) ReleaseDir(in *fuse.ReleaseIn) {
	r.RawFileSystem.ReleaseDir(in)
	if s := r.m.keepState(); s != nil {
		s.Release(uint32(in.Fh))
	}
}

// carriedOut, when set (tests only), is called when a name-changing
// request has been carried out and is not answered yet.
var carriedOut func(op, name string)

// beforeDone, when set (tests only), is called when a name-changing
// request's system call has returned and its success is not yet recorded
// (keep_test.go kills the server there).
var beforeDone func(op, name string)

// undone calls beforeDone.
func undone(op, name string) {
	if beforeDone != nil {
		beforeDone(op, name)
	}
}

// done calls carriedOut.
func done(op, name string) {
	if carriedOut != nil {
		carriedOut(op, name)
	}
}

// again records that the request h is about to change the file system
// (transport.State.Intend) and reports, for a request the kernel sends
// again after a takeover, whether the predecessor had begun it (begun) and
// whether it carried it out with success (carried, State.Done). A result
// that says "already done" (EEXIST of a mkdir, ENOENT of an unlink) is
// then the predecessor's work, answered as the success it was, so a kill
// -9 of the server fails no mkdir, rm or mv that it had carried out but
// not answered. A request begun but not marked done may have been killed
// before its system call or after it: each operation decides below
// whether the state found tells (a directory where a mkdir was asked, a
// link to the same inode, an unlinked name), or keeps the repetition's
// result (an O_EXCL create, whose exclusivity no state found can prove).
func (r *keepReply) again(h *fuse.InHeader) (begun, carried bool) {
	base := h.Unique &^ transport.UniqueResend
	r.m.keepState().Intend(base)
	if h.Unique&transport.UniqueResend == 0 {
		return false, false
	}
	carried, begun = r.m.resent[base]
	return begun, carried
}

// succeeded records that request h succeeded (transport.State.Done).
func (r *keepReply) succeeded(h *fuse.InHeader, st fuse.Status) {
	if st.Ok() {
		r.m.keepState().Done(h.Unique &^ transport.UniqueResend)
	}
}

// exists reports whether name is in directory node dir now.
func (r *keepReply) exists(cancel <-chan struct{}, dir uint64, name string) bool {
	var out fuse.EntryOut
	if !r.RawFileSystem.Lookup(cancel, &fuse.InHeader{NodeId: dir}, name, &out).Ok() {
		return false
	}
	r.RawFileSystem.Forget(out.NodeId, 1)
	return true
}

// entryOf answers a repeated create of name in h's directory with the
// entry now there, when it is of type mode (0: any).
func (r *keepReply) entryOf(cancel <-chan struct{}, h *fuse.InHeader, name string, mode uint32, out *fuse.EntryOut) fuse.Status {
	hh := *h
	hh.Unique &^= transport.UniqueResend
	st := r.RawFileSystem.Lookup(cancel, &hh, name, out)
	if st.Ok() && mode != 0 && out.Attr.Mode&syscall.S_IFMT != mode {
		// Not what this request made: forget the lookup just given.
		r.RawFileSystem.Forget(out.NodeId, 1)
		return fuse.Status(syscall.EEXIST)
	}
	return st
}

func (r *keepReply) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	again, _ := r.again(&in.InHeader) // a directory there is what was asked
	st := r.RawFileSystem.Mkdir(cancel, in, name, out)
	undone("mkdir", name)
	r.succeeded(&in.InHeader, st)
	done("mkdir", name)
	if again && st == fuse.Status(syscall.EEXIST) {
		return r.entryOf(cancel, &in.InHeader, name, syscall.S_IFDIR, out)
	}
	return st
}

func (r *keepReply) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	again, _ := r.again(&in.InHeader) // an object of the type asked
	st := r.RawFileSystem.Mknod(cancel, in, name, out)
	r.succeeded(&in.InHeader, st)
	if again && st == fuse.Status(syscall.EEXIST) {
		return r.entryOf(cancel, &in.InHeader, name, in.Mode&syscall.S_IFMT, out)
	}
	return st
}

func (r *keepReply) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	_, again := r.again(h) // the link found may have another text
	st := r.RawFileSystem.Symlink(cancel, h, target, name, out)
	r.succeeded(h, st)
	if again && st == fuse.Status(syscall.EEXIST) {
		return r.entryOf(cancel, h, name, syscall.S_IFLNK, out)
	}
	return st
}

func (r *keepReply) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	begun, carried := r.again(&in.InHeader)
	st := r.RawFileSystem.Link(cancel, in, name, out)
	undone("link", name)
	r.succeeded(&in.InHeader, st)
	if begun && st == fuse.Status(syscall.EEXIST) {
		st = r.entryOf(cancel, &in.InHeader, name, 0, out)
		if st.Ok() && !carried && out.NodeId != in.Oldnodeid {
			// Another object there: not this link.
			r.RawFileSystem.Forget(out.NodeId, 1)
			return fuse.Status(syscall.EEXIST)
		}
	}
	return st
}

func (r *keepReply) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	again, _ := r.again(h) // the name is gone, as asked
	st := r.RawFileSystem.Unlink(cancel, h, name)
	undone("unlink", name)
	r.succeeded(h, st)
	done("unlink", name)
	if again && st == fuse.Status(syscall.ENOENT) {
		return fuse.OK
	}
	return st
}

func (r *keepReply) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	again, _ := r.again(h) // the name is gone, as asked
	st := r.RawFileSystem.Rmdir(cancel, h, name)
	r.succeeded(h, st)
	if again && st == fuse.Status(syscall.ENOENT) {
		return fuse.OK
	}
	return st
}

func (r *keepReply) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	begun, carried := r.again(&in.InHeader)
	st := r.RawFileSystem.Rename(cancel, in, oldName, newName)
	undone("rename", oldName)
	r.succeeded(&in.InHeader, st)
	done("rename", oldName)
	if begun && st == fuse.Status(syscall.ENOENT) && (carried || r.exists(cancel, in.Newdir, newName)) {
		// The old name is gone and the new one is there.
		return fuse.OK
	}
	return st
}

// keep puts the connection of srv in store with a fresh state holding live
// (nil for a new mount), and starts recording into it. A store that refuses
// leaves the mount served but not kept, logged.
func (m *mount) keep(store transport.Store, srv *fuse.Server, kind, mountpoint string, rootFd int, live *transport.Live) {
	_, _, rootMnt, err := transport.FileHandle(rootFd)
	if err != nil {
		m.log.Warn("connection not kept: the root has no file handles", m.sessionAttr("mountpoint", mountpoint, "err", err)...)
		return
	}
	meta := transport.Meta{Kind: kind, Mountpoint: mountpoint, Root: m.root, Session: m.session,
		Init: *srv.KernelSettings(), InitOut: srv.InitOut(), RootMountID: rootMnt, Ring: m.ring.Geometry()}
	st, err := transport.NewState(meta)
	if err == nil && live != nil {
		st.WriteLive(live)
	}
	if err == nil {
		err = transport.Keep(store, srv.DeviceFD(), st, mountpoint, m.ring.MemFd())
	}
	if err != nil {
		st.Close()
		m.log.Warn("connection not kept: it ends with this process", m.sessionAttr("mountpoint", mountpoint, "store", store.Kind(), "err", err)...)
		return
	}
	// Compacted while it serves, not only at the next restart
	// (transport/compact.go): the store's name holds the new memfd.
	name := transport.ConnName(mountpoint) + ".state"
	st.SetCompactor(func(fd int) error { return store.Put(name, fd) })
	m.keptIn = store
	m.state.Store(st)
}

// unkeep removes the connection from its store, once it is unmounted.
func (m *mount) unkeep(mountpoint string) {
	st := m.state.Swap(nil)
	if st == nil || m.keptIn == nil {
		return
	}
	st.SetCompactor(nil) // no compaction puts it back
	if err := transport.Forget(m.keptIn, mountpoint); err != nil {
		m.log.Warn("kept connection not removed from its store", m.sessionAttr("mountpoint", mountpoint, "err", err)...)
	}
	st.Close()
}

// restore registers, before srv serves, every node and open handle of the
// adopted connection c under the numbers the kernel holds, and returns what
// was restored (for the new state). A node whose object cannot be found
// again by its file handle, or whose handle now opens another object, is
// restored as a stale node: every request on it answers ESTALE, as NFS does
// for a file removed under a client.
func (m *mount) restore(c *transport.Conn, root *node, rootFd int) (*transport.Live, int, int) {
	out := &transport.Live{Nodes: map[uint64]*transport.Node{}, Files: map[uint32]*transport.File{}}
	m.resent = c.Live.Intended
	m.inoMu.Lock()
	for _, a := range c.Live.Inos {
		if m.inos == nil {
			m.inos = make(map[devIno]uint64)
		}
		m.inos[devIno{a.Dev, a.Ino}] = a.Alloc
		m.nextIno = max(m.nextIno, a.Alloc&^(1<<63))
		out.Inos = append(out.Inos, a)
	}
	m.inoMu.Unlock()
	// The kernel may hold references the predecessor did not record
	// (a state without lookup counts), or more lookups than this server
	// will answer (go-fuse's AdoptKernelRefs).
	root.AdoptKernelRefs()
	// open_by_handle_at(2) takes its mount from a descriptor that is not
	// O_PATH (EBADF otherwise): the mount's own (mountFds, fdcache.go),
	// which nodes restored here also reopen on.
	m.mfds.get(c.Meta.RootMountID, rootFd, true)
	ctx := context.Background()
	inodes := map[uint64]*fs.Inode{1: &root.Inode}
	stale := 0
	var staleInos []uint64
	defer func() {
		// The kernel may still cache pages and attributes of a stale
		// node's number, which a new object may get: dropped now.
		if srv := m.fuseSrv.Load(); srv != nil {
			for _, ino := range staleInos {
				srv.InodeNotify(ino, 0, -1)
			}
		}
	}()
	for ino, rec := range c.Live.Nodes {
		if ino == 1 {
			continue
		}
		var ops fs.InodeEmbedder
		sa := fs.StableAttr{Ino: ino, Mode: rec.Mode}
		if rec.Type == -1 {
			if m.host != nil && m.host.linkIno[rec.Path] == ino {
				ln, _ := m.newNode(-1, rec.Path, syscall.S_IFLNK)
				ln.linkText = m.host.links[rec.Path]
				ops = ln
			}
		} else if fd, err := m.openRecorded(rec); err != nil {
			m.log.Debug("kept node not found again", m.sessionAttr("ino", ino, "path", rec.Path, "err", err)...)
		} else {
			var st syscall.Stat_t
			if fstat(fd, &st) != nil || m.stable(&st) != sa {
				unix.Close(fd)
			} else if n, errno := m.newNodeWith(fd, rec.Path, st.Mode, rec.Type, rec.Handle, rec.MountID, false); errno == 0 {
				if rec.Backing != 0 {
					if srv := m.fuseSrv.Load(); srv != nil {
						n.backing.id = rec.Backing
						n.desc.backing.Store(&backingRef{srv: srv, id: rec.Backing})
					}
				}
				ops = n
			}
		}
		if ops == nil {
			// Its own generation: an object that gets this recycled
			// inode number later is another node, which evicts this
			// one (go-fuse's registerNew), never this one.
			ops, sa.Gen = &staleNode{}, staleGen
			staleInos = append(staleInos, ino)
			stale++
		}
		// Stale ones too: the kernel refers to them until it forgets
		// them, also after the next takeover.
		out.Nodes[ino] = rec
		ch := root.NewInode(ctx, ops, sa)
		got, err := root.RestoreChildCount("", ch, rec.Lookups)
		if err != nil {
			continue
		}
		inodes[ino] = got
		if n, ok := got.Operations().(*node); ok && sa.Mode == syscall.S_IFDIR && n.pin() == 0 {
			n.ensureWatched()
			n.unpin()
		}
	}
	for fh, f := range c.Live.Files {
		in := inodes[f.Ino]
		if in == nil {
			continue
		}
		var h fs.FileHandle = staleFile{}
		if n, ok := in.Operations().(*node); ok {
			if fh, err := n.reopenHandle(f); err == nil {
				h = fh
			}
		}
		if in.RestoreFile(fh, h, f.Flags) == nil {
			if _, ok := h.(staleFile); !ok {
				f.Locks = m.restoreLocks(h, f)
				out.Files[fh] = f
			}
		}
	}
	return out, len(c.Live.Nodes) - stale, stale
}

// restoreLocks sets the locks the predecessor's descriptor of handle f held
// (its lock requests, in order) on h, the reopened handle, without waiting,
// and returns the requests it could grant. They were released when the
// predecessor's descriptors closed, so a process outside the mount (no
// process in it is served meanwhile) may have taken one since: that one is
// logged and lost, as NFS loses a lock its server could not reclaim.
func (m *mount) restoreLocks(h fs.FileHandle, f *transport.File) []transport.Lock {
	if len(f.Locks) == 0 {
		return nil
	}
	lk, ok := h.(fs.FileSetlker)
	if !ok {
		return nil
	}
	var got []transport.Lock
	for _, l := range f.Locks {
		var flags uint32
		if l.Flock {
			flags = fuse.FUSE_LK_FLOCK
		}
		if errno := lk.Setlk(context.Background(), 0, &fuse.FileLock{Start: l.Start, End: l.End, Typ: l.Typ}, flags); errno != 0 {
			m.log.Warn("kept lock not set again: another process took it while no daemon ran", m.sessionAttr("ino", f.Ino, "fh", f.Fh, "flock", l.Flock, "start", l.Start, "end", l.End, "err", errno)...)
			continue
		}
		got = append(got, l)
	}
	return got
}

// forgetCaches drops what the kernel cached from the predecessor, once a
// taken-over connection serves: every dentry is looked up again before its
// next use (FUSE_NOTIFY_INC_EPOCH) and every restored node's attributes and
// pages are dropped, so what the host changed while no server ran (a file
// made, removed, replaced, appended to) shows at once, not when the
// predecessor's long timeouts run out. Sent after Serve starts: an
// invalidation can wait on a page a request in flight holds.
func (m *mount) forgetCaches(srv *fuse.Server, live *transport.Live) {
	if st := srv.NotifyIncEpoch(); !st.Ok() {
		m.log.Warn("FUSE_NOTIFY_INC_EPOCH refused (Linux 6.16+): names changed on the host while no server ran show when their cached entries time out",
			m.sessionAttr("status", st)...)
	}
	srv.InodeNotify(fuse.FUSE_ROOT_ID, 0, 0)
	for ino := range live.Nodes {
		srv.InodeNotify(ino, 0, 0)
	}
}

// reopenHandle opens again the file handle f on n, without a policy
// decision (it was made at the open) and without the flags that acted at
// the open (O_CREAT, O_EXCL, O_TRUNC).
func (n *node) reopenHandle(f *transport.File) (fs.FileHandle, error) {
	if errno := n.pin(); errno != 0 {
		return nil, errno
	}
	defer n.unpin()
	if f.Dir {
		dh, errno := n.openDir()
		if errno != 0 {
			return nil, errno
		}
		return dh, nil
	}
	oflags := int(f.Flags) &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC | syscall.O_NOCTTY | syscall.O_NOFOLLOW)
	if n.backing.id != 0 && !isWriteOpen(uint32(oflags)) {
		h, errno := deferredFileHandle(n, oflags)
		if errno != 0 {
			return nil, errno
		}
		return h, nil
	}
	h, errno := openFile(n, oflags)
	if errno != 0 {
		return nil, errno
	}
	return h, nil
}

// openRecorded opens the object of rec by its file handle, O_PATH, on the
// mount it was recorded on (found by mount ID in mountinfo, kept in
// m.mfds).
func (m *mount) openRecorded(rec *transport.Node) (int, error) {
	mfd := m.mfds.lookup(rec.MountID)
	if mfd == nil {
		p, err := mountPointOf(rec.MountID)
		if err != nil {
			return -1, err
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if mfd = m.mfds.add(rec.MountID, fd); mfd == nil {
			return -1, syscall.EBADF
		}
	}
	return retryFd(func() (int, error) {
		return transport.OpenHandle(mfd.fd, rec.Type, rec.Handle, unix.O_PATH|unix.O_CLOEXEC)
	})
}

// mountPointOf returns the mountpoint of mount id from this process's
// mountinfo (proc(5)); ENOENT when that mount is gone.
func mountPointOf(id int) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	want := strconv.Itoa(id)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[0] == want {
			return unescapeMountinfo(fields[4]), nil
		}
	}
	return "", fmt.Errorf("mount %d: %w", id, syscall.ENOENT)
}

// unescapeMountinfo undoes the octal escapes of a mountinfo path field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// staleGen is the StableAttr generation of a stale node.
const staleGen = 1

// panicStatus answers a request that go-fuse's bridge could not place (it
// panics on a node ID or file handle it does not know): ESTALE, as NFS
// answers for a handle the server cannot resolve, with one log line. After
// a takeover that is a node the predecessor did not record (a file system
// without file handles); anything else is a bug, logged as one.
func (m *mount) panicStatus(v any) fuse.Status {
	msg := fmt.Sprint(v)
	if strings.HasPrefix(msg, "unknown node") || strings.HasPrefix(msg, "unknown file handle") {
		m.log.Warn("request for an object this server does not know: ESTALE", m.sessionAttr("reason", msg)...)
		return fuse.Status(syscall.ESTALE)
	}
	m.log.Error("panic in a FUSE request: EIO", m.sessionAttr("panic", msg)...)
	return fuse.EIO
}

// staleNode stands for a node the kernel still refers to whose object could
// not be found again after a takeover: every operation answers ESTALE.
type staleNode struct{ fs.Inode }

var (
	_ fs.NodeGetattrer = (*staleNode)(nil)
	_ fs.NodeLookuper  = (*staleNode)(nil)
)

func (*staleNode) Getattr(context.Context, fs.FileHandle, *fuse.AttrOut) syscall.Errno {
	return syscall.ESTALE
}
func (*staleNode) Setattr(context.Context, fs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.ESTALE
}
func (*staleNode) Lookup(context.Context, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (*staleNode) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ESTALE
}
func (*staleNode) OpendirHandle(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ESTALE
}
func (*staleNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) { return nil, syscall.ESTALE }
func (*staleNode) Readlink(context.Context) ([]byte, syscall.Errno)      { return nil, syscall.ESTALE }
func (*staleNode) Access(context.Context, uint32) syscall.Errno          { return syscall.ESTALE }
func (*staleNode) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ESTALE
}
func (*staleNode) Listxattr(context.Context, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ESTALE
}
func (*staleNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ESTALE
}
func (*staleNode) Removexattr(context.Context, string) syscall.Errno { return syscall.ESTALE }
func (*staleNode) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.ESTALE
}
func (*staleNode) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (*staleNode) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (*staleNode) Symlink(context.Context, string, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (*staleNode) Link(context.Context, fs.InodeEmbedder, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (*staleNode) Unlink(context.Context, string) syscall.Errno { return syscall.ESTALE }
func (*staleNode) Rmdir(context.Context, string) syscall.Errno  { return syscall.ESTALE }
func (*staleNode) Rename(context.Context, string, fs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.ESTALE
}

// staleFile is an open handle on a stale node: released quietly, ESTALE
// for everything else.
type staleFile struct{}

func (staleFile) Read(context.Context, []byte, int64) (fuse.ReadResult, syscall.Errno) {
	return nil, syscall.ESTALE
}
func (staleFile) Write(context.Context, []byte, int64) (uint32, syscall.Errno) {
	return 0, syscall.ESTALE
}
func (staleFile) Flush(context.Context) syscall.Errno         { return 0 }
func (staleFile) Fsync(context.Context, uint32) syscall.Errno { return syscall.ESTALE }
func (staleFile) Release(context.Context) syscall.Errno       { return 0 }

// checkAdopt is CheckMount for a connection taken over: the root is checked
// as for a mount, the mountpoint only against the connection's record (it
// is that connection's own mount, which nothing may look at before it is
// served).
func checkAdopt(root, mountpoint string, c *transport.Conn) (rootCanon, mpCanon string, err error) {
	if rootCanon, err = identity.Canonical(root); err != nil {
		return "", "", fmt.Errorf("root %q: %s", root, describe(err))
	}
	if fi, err := os.Stat(rootCanon); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("root %q: not a directory", root)
	}
	mpCanon = filepath.Clean(mountpoint)
	if c.Meta.Kind != "mount" || c.Meta.Mountpoint != mpCanon || c.Meta.Root != rootCanon {
		return "", "", fmt.Errorf("take over %q: the connection kept is %s %q of root %q, not root %q",
			mountpoint, c.Meta.Kind, c.Meta.Mountpoint, c.Meta.Root, rootCanon)
	}
	// Unmounted while no server ran (wsfs unmount, umount -l): the
	// connection outlives its mount as long as a descriptor of it is open,
	// but serving it would serve nothing.
	if e, ok, err := MountAt(mpCanon); err == nil && (!ok || e.FSType != "fuse.wsfs") {
		return "", "", fmt.Errorf("take over %q: the connection's mount is gone (unmounted while no server ran)", mountpoint)
	}
	return rootCanon, mpCanon, nil
}
