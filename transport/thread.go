package transport

import (
	"sync"

	"golang.org/x/sys/unix"
)

// ownFS holds the thread ids of the queue threads that have a file system
// context of their own (privateFS), while they run.
var ownFS sync.Map // int -> struct{}

// OnQueueThread reports whether the caller runs on a queue thread of a
// ring (URing): a thread locked to its goroutine for good (it exits with
// it), which serves its requests inline and has a file system context of
// its own (unshare(2) CLONE_FS: umask, working directory, root). A
// handler there may set the thread's umask for one system call and put it
// back with no hand-off to another thread: no other goroutine runs on the
// thread, and no other thread sees the change. It costs one gettid(2).
func OnQueueThread() bool {
	_, ok := ownFS.Load(unix.Gettid())
	return ok
}

// privateFS gives the calling thread, locked to its goroutine for good, a
// file system context of its own (a copy of the process's) and records it
// for OnQueueThread. The function returned forgets it; the queue calls it
// before its thread exits, so the thread id, which a later thread may get
// again, never names a thread that shares the process's context. When
// unshare is refused nothing is recorded (handlers then hand such work to
// threads of their own, as off the ring).
func privateFS() (forget func()) {
	if unix.Unshare(unix.CLONE_FS) != nil {
		return func() {}
	}
	tid := unix.Gettid()
	ownFS.Store(tid, struct{}{})
	return func() { ownFS.Delete(tid) }
}
