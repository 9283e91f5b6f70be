package fusefs

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/transport"
)

// The caller's umask (DESIGN.md, "Owners"; issue 20 item 15). The server
// negotiates FUSE_DONT_MASK, so the kernel sends the mode of a create,
// mkdir, mknod or O_TMPFILE open as the caller passed it, with the
// caller's umask beside it (fuse.Context.Umask), and leaves masking to the
// server. The server makes the object with exactly that mode and that
// umask on the backing file system, so the backing kernel applies the rule
// a local file system applies (acl(5), umask(2)): under a directory with a
// default ACL the ACL replaces the umask (the new object inherits it and its
// mode is the requested mode masked by the ACL); otherwise the umask masks
// the mode. Masking in the server instead would need a look at the
// parent's ACL first, which a concurrent setfacl can change in between.
//
// The umask is a process attribute shared by every thread (fs_struct);
// the server's own stays 0 (Mount). An object is made with the caller's
// umask on a thread of a small pool whose threads have a file system
// context of their own (unshare(CLONE_FS)), locked to their goroutine, so
// no other work runs there: each sets the umask, and the caller's
// identity when it differs from the server's (owner.go), makes the object
// and puts both back. A thread that could not put its identity back ends
// with its goroutine. A request served on a ring's queue thread, which has
// a file system context of its own already (transport.OnQueueThread), sets
// the umask there itself when the identity is the server's: a hand-off to
// a pool thread and back costs two thread switches and futex wake-ups per
// create. Where unshare is refused, the server masks the mode itself (mode
// &^ umask: right except under a default ACL) and says so in the log once.

// umask returns the permission bits of the umask the request in ctx
// carries for the server to apply: 0 when none (the request creates
// nothing) or when the connection did not negotiate FUSE_DONT_MASK (the
// kernel has applied it to the mode already).
func (m *mount) umask(ctx context.Context) uint32 {
	if !m.dontMask {
		return 0
	}
	if fc, ok := ctx.(*fuse.Context); ok {
		return fc.Umask & 0o777
	}
	return 0
}

// maskThread is one pool thread: a goroutine locked to a thread with its
// own file system context, running the jobs sent to it.
type maskThread struct {
	jobs chan func() (keep bool)
}

// maskIdle is how many idle pool threads are kept; more are made when
// creates run concurrently, and those end when they are done.
const maskIdle = 4

var maskPool struct {
	sync.Mutex
	idle []*maskThread
	// noUnshare is set once unshare(CLONE_FS) was refused: the mode is then
	// masked by the server.
	noUnshare bool
}

// startMaskThread starts a pool thread; nil when unshare(CLONE_FS) is
// refused.
func startMaskThread() *maskThread {
	t := &maskThread{jobs: make(chan func() bool)}
	ok := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			ok <- false
			runtime.UnlockOSThread()
			return
		}
		unix.Umask(0)
		ok <- true
		for job := range t.jobs {
			if !job() {
				return // locked: the thread ends with this goroutine
			}
		}
	}()
	if !<-ok {
		return nil
	}
	return t
}

// withUmask runs create with the process umask umask and, when c is not
// nil, with c's filesystem identity and groups (setThreadIdentity).
// create is passed the bits it must clear from the mode itself: 0, or umask
// on the fallback path (no thread of its own).
func withUmask(umask uint32, c *fuse.Caller, groups []int, create func(mask uint32) error) error {
	if c == nil && transport.OnQueueThread() {
		// A ring's queue thread has a file system context of its own:
		// the umask is set right here for this create, with no hand-off
		// to a pool thread and back.
		old := unix.Umask(int(umask))
		err := create(0)
		unix.Umask(old)
		return err
	}
	maskPool.Lock()
	var t *maskThread
	if n := len(maskPool.idle); n > 0 {
		t = maskPool.idle[n-1]
		maskPool.idle = maskPool.idle[:n-1]
	}
	fallback := maskPool.noUnshare
	maskPool.Unlock()
	if t == nil && !fallback {
		if t = startMaskThread(); t == nil {
			maskPool.Lock()
			maskPool.noUnshare = true
			maskPool.Unlock()
			umaskLogOnce.Do(func() {
				slog.Warn("unshare(CLONE_FS) refused: new objects are masked with the caller's umask by the server, " +
					"also under a directory with a default ACL (which natively replaces the umask)")
			})
		}
	}
	if t == nil {
		// The server masks the mode itself: create clears umask's bits.
		if c == nil {
			return create(umask)
		}
		return createAs(c, groups, 0, func(uint32) error { return create(umask) })
	}
	var err error
	kept := true
	done := make(chan struct{})
	maskHandoffs.Add(1)
	t.jobs <- func() bool {
		defer close(done)
		if c != nil {
			if err = setThreadIdentity(c.Uid, c.Gid, groups); err != nil {
				kept = setThreadIdentity(self.uid, self.gid, self.groups) == nil
				return kept
			}
		}
		unix.Umask(int(umask))
		err = create(0)
		unix.Umask(0)
		if c != nil {
			kept = setThreadIdentity(self.uid, self.gid, self.groups) == nil
		}
		return kept
	}
	<-done
	if !kept {
		return err
	}
	maskPool.Lock()
	if len(maskPool.idle) < maskIdle {
		maskPool.idle = append(maskPool.idle, t)
		t = nil
	}
	maskPool.Unlock()
	if t != nil {
		close(t.jobs)
	}
	return err
}

var umaskLogOnce sync.Once

// maskHandoffs counts the creates handed to a pool thread (tests).
var maskHandoffs atomic.Int64
