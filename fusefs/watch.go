package fusefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// The watcher makes long kernel cache timeouts safe. It holds an inotify(7)
// watch (on the process's one instance, inotifyHub) on every directory the
// kernel knows through the mount and turns each
// host-side change in it into a FUSE notification: a changed name invalidates
// the kernel's dentry (NOTIFY_INVAL_ENTRY), a changed file its attributes and,
// for data, its page cache (NOTIFY_INVAL_INODE). Changes made through the
// mount produce events too; they cost one extra LOOKUP or GETATTR later and
// are not filtered.
//
// A directory that cannot be watched (inotify limits) gets short timeouts on
// its entries; a queue overflow invalidates everything the kernel caches.

// IN_MODIFY covers writes; IN_CLOSE_WRITE is left out, since it would cost
// an invalidation for every file closed after writing through the mount.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR

// inotifyHub is the process's one inotify instance, shared by the watchers
// of all its mounts. Instances are a per-user limit (fs.inotify.
// max_user_instances, 128 by default) counted across the whole machine: a
// daemon serving a hundred sessions with one instance each would exhaust it
// for itself and for every other program of its user. A directory watched
// by several mounts has one watch descriptor; each event goes to every node
// watching it, each node notifying its own mount's kernel.
type inotifyHub struct {
	fd   int
	file *os.File // owns fd

	mu       sync.Mutex
	byWd     map[int32][]*node
	syncs    map[int32]*watcher // barrier directories (watcher.barrier)
	watchers map[*watcher]bool  // open watchers, for a queue overflow
}

var (
	hubMu     sync.Mutex
	sharedHub *inotifyHub // made by the first watcher; never closed
)

// hub returns the process's inotify instance, making it (and starting its
// reader) the first time; a failure (the instance limit) is retried by the
// next call.
func hub() (*inotifyHub, error) {
	hubMu.Lock()
	defer hubMu.Unlock()
	if sharedHub != nil {
		return sharedHub, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	sharedHub = &inotifyHub{fd: fd, file: os.NewFile(uintptr(fd), "inotify"),
		byWd: map[int32][]*node{}, syncs: map[int32]*watcher{}, watchers: map[*watcher]bool{}}
	go sharedHub.run()
	return sharedHub, nil
}

// watcher is one mount's share of the hub: its watches, the changes it is
// about to make itself, its barrier.
type watcher struct {
	h    *inotifyHub
	root *node // set by start

	// Under h.mu.
	closed bool
	wds    map[int32]bool // watch descriptors this mount's nodes hold (or held)

	// Changes made through the mount, announced before their syscall so the
	// event they cause is not turned into an invalidation: the kernel keeps
	// its own cache right for those, and an invalidation racing the
	// operation would drop the fresh dentry (one more LOOKUP per file).
	// Per mount: another mount watching the same directory did not see the
	// change and is invalidated as for a host change.
	expectMu sync.Mutex
	expected map[expectKey]time.Time

	// Barriers (Server.SyncHostChanges): a private directory whose events,
	// queued behind every earlier event of the instance, tell when those
	// have been handled.
	syncOnce sync.Once
	syncDir  string
	syncWd   int32
	syncErr  error
	syncSeq  atomic.Uint64
	waiters  map[string]chan struct{} // under h.mu
}

func newWatcher() (*watcher, error) {
	h, err := hub()
	if err != nil {
		return nil, err
	}
	return &watcher{h: h, wds: map[int32]bool{}}, nil
}

// start begins turning events into notifications for the mount rooted at
// root (served from now on).
func (w *watcher) start(root *node) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if !w.closed {
		w.root = root
		w.h.watchers[w] = true
	}
}

// add watches directory node n; false when the watch could not be placed.
func (w *watcher) add(n *node) bool {
	h := w.h
	wd, err := unix.InotifyAddWatch(h.fd, procPath(n.fd()), watchMask)
	if err != nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n.wd = int32(wd)
	if w.closed {
		// The mount is gone: nothing to notify. The watch goes unless
		// another mount's node holds it.
		if len(h.byWd[n.wd]) == 0 {
			delete(h.byWd, n.wd)
			unix.InotifyRmWatch(h.fd, uint32(wd))
		}
		return true
	}
	h.byWd[n.wd] = append(h.byWd[n.wd], n)
	w.wds[n.wd] = true
	return true
}

// remove forgets directory node n; the watch goes with its last node.
func (w *watcher) remove(n *node) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(n.wd, func(x *node) bool { return x == n })
}

// dropLocked removes the nodes of watch wd that match from the hub and the
// watch itself when none is left. The watch is only removed when a node
// was, so a descriptor the kernel has already retired (IN_IGNORED) and may
// reuse is never touched.
func (h *inotifyHub) dropLocked(wd int32, match func(*node) bool) {
	ns := h.byWd[wd]
	kept := ns[:0:0]
	for _, x := range ns {
		if !match(x) {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(ns) {
		return
	}
	if len(kept) == 0 {
		delete(h.byWd, wd)
		unix.InotifyRmWatch(h.fd, uint32(wd))
		return
	}
	h.byWd[wd] = kept
}

// expectKey names one entry event: a watch, a name, an inotify mask bit.
type expectKey struct {
	wd   int32
	name string
	mask uint32
}

// expectTTL bounds how long an announced event is waited for; an operation
// that failed or created nothing leaves its announcement behind that long.
// Skipping a stray IN_CREATE is harmless: a positive dentry the kernel kept
// was invalidated by the IN_DELETE or IN_MOVED_FROM that came first.
const expectTTL = 2 * time.Second

// expect announces that this server is about to cause event mask for name
// in directory node d.
func (w *watcher) expect(d *node, name string, mask uint32) {
	if !d.watched {
		return
	}
	now := time.Now()
	w.expectMu.Lock()
	if w.expected == nil {
		w.expected = map[expectKey]time.Time{}
	}
	if len(w.expected) >= 4096 {
		for k, t := range w.expected {
			if now.Sub(t) > expectTTL {
				delete(w.expected, k)
			}
		}
	}
	w.expected[expectKey{d.wd, name, mask}] = now
	w.expectMu.Unlock()
}

// consume reports whether an event was announced (and forgets it).
func (w *watcher) consume(wd int32, name string, mask uint32) bool {
	k := expectKey{wd, name, mask}
	w.expectMu.Lock()
	defer w.expectMu.Unlock()
	t, ok := w.expected[k]
	if ok {
		delete(w.expected, k)
	}
	return ok && time.Since(t) <= expectTTL
}

// close ends the mount's share: its nodes leave the hub (and the watches
// only they held go), its barrier directory is removed.
func (w *watcher) close() {
	h := w.h
	h.mu.Lock()
	if w.closed {
		h.mu.Unlock()
		return
	}
	w.closed = true
	delete(h.watchers, w)
	for wd := range w.wds {
		h.dropLocked(wd, func(x *node) bool { return x.m.watch == w })
	}
	w.wds = nil
	syncDir := w.syncDir
	if syncDir != "" {
		delete(h.syncs, w.syncWd)
		unix.InotifyRmWatch(h.fd, uint32(w.syncWd))
	}
	h.mu.Unlock()
	if syncDir != "" {
		os.RemoveAll(syncDir)
	}
}

// barrier returns once every event queued before it has been handled.
func (w *watcher) barrier(timeout time.Duration) error {
	h := w.h
	w.syncOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wsfs-sync-")
		if err != nil {
			w.syncErr = err
			return
		}
		wd, err := unix.InotifyAddWatch(h.fd, dir, unix.IN_CREATE|unix.IN_ONLYDIR)
		if err != nil {
			os.Remove(dir)
			w.syncErr = err
			return
		}
		h.mu.Lock()
		if w.closed {
			h.mu.Unlock()
			unix.InotifyRmWatch(h.fd, uint32(wd))
			os.Remove(dir)
			w.syncErr = errors.New("host changes: the mount is gone")
			return
		}
		w.syncDir, w.syncWd = dir, int32(wd)
		w.waiters = map[string]chan struct{}{}
		h.syncs[w.syncWd] = w
		h.mu.Unlock()
	})
	if w.syncErr != nil {
		return w.syncErr
	}
	name := strconv.FormatUint(w.syncSeq.Add(1), 10)
	done := make(chan struct{})
	h.mu.Lock()
	w.waiters[name] = done
	h.mu.Unlock()
	p := filepath.Join(w.syncDir, name)
	err := os.Mkdir(p, 0o700)
	if err == nil {
		os.Remove(p)
		select {
		case <-done:
			return nil
		case <-time.After(timeout):
			err = errors.New("host changes not handled within " + timeout.String())
		}
	}
	h.mu.Lock()
	delete(w.waiters, name)
	h.mu.Unlock()
	return err
}

// run reads events for as long as the process lives.
func (h *inotifyHub) run() {
	buf := make([]byte, 64<<10)
	for {
		n, err := h.file.Read(buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			h.handle(ev.Wd, ev.Mask, string(name))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func (h *inotifyHub) handle(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		h.mu.Lock()
		var roots []*node
		for w := range h.watchers {
			roots = append(roots, w.root)
		}
		h.mu.Unlock()
		for _, r := range roots {
			invalidateTree(&r.Inode)
		}
		return
	}
	h.mu.Lock()
	if w, ok := h.syncs[wd]; ok {
		if ch, ok := w.waiters[name]; ok && mask&unix.IN_CREATE != 0 {
			delete(w.waiters, name)
			close(ch)
		}
		h.mu.Unlock()
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(h.byWd, wd)
		h.mu.Unlock()
		return
	}
	// Only nodes of served mounts: one not yet started has no FUSE server
	// to notify.
	var dirs []*node
	for _, d := range h.byWd[wd] {
		if h.watchers[d.m.watch] {
			dirs = append(dirs, d)
		}
	}
	h.mu.Unlock()
	entry := mask & (unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO)
	// Whether each mount announced the event itself, asked once per mount.
	var asked []*watcher
	var announced []bool
	for _, d := range dirs {
		if entry != 0 {
			w := d.m.watch
			i := slices.Index(asked, w)
			if i < 0 {
				asked = append(asked, w)
				announced = append(announced, w.consume(wd, name, entry))
				i = len(asked) - 1
			}
			if announced[i] {
				continue
			}
		}
		if name == "" {
			d.xattrs.drop()
			d.NotifyContent(-1, 0)
			continue
		}
		if entry != 0 && !d.agrees(name) {
			d.NotifyEntry(name)
			d.NotifyContent(0, 0) // the cached listing (FOPEN_CACHE_DIR)
		}
		if mask&(unix.IN_MODIFY|unix.IN_ATTRIB) != 0 {
			if ch := d.GetChild(name); ch != nil {
				if cn, ok := ch.Operations().(*node); ok {
					cn.xattrs.drop()
				}
				if mask&unix.IN_ATTRIB != 0 {
					ch.NotifyContent(-1, 0) // attributes only
				} else {
					ch.NotifyContent(0, 0) // attributes and cached data
				}
			}
		}
	}
}

// invalidateTree drops every entry, attribute and cached page the kernel
// holds below n: after a queue overflow any of them may be stale. A file's
// attributes go too, not only its entry: a process holding the file open
// asks the inode, not the name (a directory's cached listing goes with its
// attributes: FUSE_AUTO_INVAL_DATA compares the refetched mtime).
func invalidateTree(n *fs.Inode) {
	if nn, ok := n.Operations().(*node); ok {
		nn.xattrs.drop()
	}
	if n.IsDir() {
		n.NotifyContent(-1, 0)
	} else {
		n.NotifyContent(0, 0)
	}
	for name, ch := range n.Children() {
		n.NotifyEntry(name)
		invalidateTree(ch)
	}
}

// DefaultWatchedTimeout is the entry, attr and negative timeout when the
// watcher is on and Config leaves them 0: host-side changes arrive as
// notifications, so the kernel may cache for long.
const DefaultWatchedTimeout = time.Minute

// agrees reports whether the tree's entry for name already matches the
// backing directory: a name made or removed through the mount. Invalidating
// it anyway would only drop a fresh dentry and cost a LOOKUP.
func (n *node) agrees(name string) bool {
	if n.pin() != 0 {
		return false
	}
	defer n.unpin()
	ch := n.GetChild(name)
	var ust unix.Stat_t
	err := unix.Fstatat(n.fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW)
	if ch == nil {
		return err == unix.ENOENT
	}
	if err != nil {
		return false
	}
	st := statFromUnix(&ust)
	return n.m.stable(&st) == ch.StableAttr()
}
