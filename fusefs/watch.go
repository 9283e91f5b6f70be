package fusefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// The watcher makes long kernel cache timeouts safe. It holds an inotify(7)
// watch on every directory the kernel knows through the mount and turns each
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

type watcher struct {
	fd   int
	file *os.File // owns fd; Close unblocks the reader

	mu   sync.Mutex
	byWd map[int32][]*node
	root *node

	// Changes made through the mount, announced before their syscall so the
	// event they cause is not turned into an invalidation: the kernel keeps
	// its own cache right for those, and an invalidation racing the
	// operation would drop the fresh dentry (one more LOOKUP per file).
	expectMu sync.Mutex
	expected map[expectKey]time.Time

	// Barriers (Server.SyncHostChanges): a private directory whose events,
	// queued behind every earlier event of this inotify instance, tell when
	// those have been handled.
	syncOnce sync.Once
	syncDir  string
	syncWd   int32
	syncErr  error
	syncSeq  atomic.Uint64
	waiters  map[string]chan struct{}
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &watcher{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), byWd: map[int32][]*node{}}, nil
}

// add watches directory node n; false when the watch could not be placed.
func (w *watcher) add(n *node) bool {
	wd, err := unix.InotifyAddWatch(w.fd, procPath(n.fd), watchMask)
	if err != nil {
		return false
	}
	w.mu.Lock()
	n.wd = int32(wd)
	w.byWd[n.wd] = append(w.byWd[n.wd], n)
	w.mu.Unlock()
	return true
}

// remove forgets directory node n; the watch goes with its last node.
func (w *watcher) remove(n *node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns := w.byWd[n.wd]
	for i, x := range ns {
		if x == n {
			ns = append(ns[:i], ns[i+1:]...)
			break
		}
	}
	if len(ns) == 0 {
		delete(w.byWd, n.wd)
		unix.InotifyRmWatch(w.fd, uint32(n.wd))
		return
	}
	w.byWd[n.wd] = ns
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

func (w *watcher) close() {
	w.file.Close()
	if w.syncDir != "" {
		os.RemoveAll(w.syncDir)
	}
}

// barrier returns once every event queued before it has been handled.
func (w *watcher) barrier(timeout time.Duration) error {
	w.syncOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wsfs-sync-")
		if err != nil {
			w.syncErr = err
			return
		}
		wd, err := unix.InotifyAddWatch(w.fd, dir, unix.IN_CREATE|unix.IN_ONLYDIR)
		if err != nil {
			os.Remove(dir)
			w.syncErr = err
			return
		}
		w.mu.Lock()
		w.syncDir, w.syncWd = dir, int32(wd)
		w.waiters = map[string]chan struct{}{}
		w.mu.Unlock()
	})
	if w.syncErr != nil {
		return w.syncErr
	}
	name := strconv.FormatUint(w.syncSeq.Add(1), 10)
	done := make(chan struct{})
	w.mu.Lock()
	w.waiters[name] = done
	w.mu.Unlock()
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
	w.mu.Lock()
	delete(w.waiters, name)
	w.mu.Unlock()
	return err
}

// run reads events until the watcher is closed.
func (w *watcher) run() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			w.handle(ev.Wd, ev.Mask, string(name))
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func (w *watcher) handle(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		invalidateTree(&w.root.Inode)
		return
	}
	w.mu.Lock()
	if wd == w.syncWd && w.waiters != nil {
		if ch, ok := w.waiters[name]; ok && mask&unix.IN_CREATE != 0 {
			delete(w.waiters, name)
			close(ch)
		}
		w.mu.Unlock()
		return
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(w.byWd, wd)
		w.mu.Unlock()
		return
	}
	dirs := append([]*node(nil), w.byWd[wd]...)
	w.mu.Unlock()
	if entry := mask & (unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO); entry != 0 && w.consume(wd, name, entry) {
		return
	}
	for _, d := range dirs {
		if name == "" {
			d.xattrs.drop()
			d.NotifyContent(-1, 0)
			continue
		}
		if mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 && !d.agrees(name) {
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

// invalidateTree drops every entry and attribute the kernel caches below n.
func invalidateTree(n *fs.Inode) {
	if nn, ok := n.Operations().(*node); ok {
		nn.xattrs.drop()
	}
	n.NotifyContent(-1, 0)
	for name, ch := range n.Children() {
		n.NotifyEntry(name)
		if ch.IsDir() {
			invalidateTree(ch)
		}
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
	ch := n.GetChild(name)
	var ust unix.Stat_t
	err := unix.Fstatat(n.fd, name, &ust, unix.AT_SYMLINK_NOFOLLOW)
	if ch == nil {
		return err == unix.ENOENT
	}
	if err != nil {
		return false
	}
	st := statFromUnix(&ust)
	return n.m.stable(&st) == ch.StableAttr()
}
