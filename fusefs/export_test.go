package fusefs

import "golang.org/x/sys/unix"

// UnmountSiblingHostViewWith is UnmountSiblingHostView with its unmount
// call replaced, for tests of the race with the session's own server.
var UnmountSiblingHostViewWith = unmountSiblingHostView

// QueueOverflow makes the process's inotify hub act as on IN_Q_OVERFLOW.
func QueueOverflow() {
	hubMu.Lock()
	h := sharedHub
	hubMu.Unlock()
	if h != nil {
		h.handle(-1, unix.IN_Q_OVERFLOW, "")
	}
}

// SetCarriedOut sets the hook called when a request that changes a name
// has been carried out and is not answered yet (keep_test.go kills the
// server there).
func SetCarriedOut(f func(op, name string)) { carriedOut = f }

// SetBeforeDone sets the hook called when a name-changing request's system
// call returned and its success is not yet recorded (keep_test.go kills the
// server there).
func SetBeforeDone(f func(op, name string)) { beforeDone = f }

// SetCountRecord sets the hook called in place of recording a change of a
// node's lookup count in the state, with the call that records it
// (keep_test.go delays a FORGET's past a LOOKUP of the same name).
func SetCountRecord(f func(ino uint64, delta int64, record func())) { countRecord = f }

func init() { checkPins = true }

// SetDescriptorCacheCap sets the node descriptor cache's capacity (trimming
// it at once) and returns a function that puts the old one back.
func SetDescriptorCacheCap(n int) func() {
	cache.mu.Lock()
	old := cache.capLocked()
	cache.cap = n
	cache.mu.Unlock()
	cache.trim(nil)
	return func() {
		cache.mu.Lock()
		cache.cap = old
		cache.mu.Unlock()
	}
}

// SessionDescriptors returns how many node descriptors session holds open
// in the cache and how many of them are fixed (not evictable).
func SessionDescriptors(session string) (open, fixed int) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if sh := sharesByName[session]; sh != nil {
		return sh.open, sh.fixed
	}
	return 0, 0
}

// FixedShare is the number of fixed descriptors a session may hold now.
func FixedShare() int {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	return cache.fixedCapLocked()
}

// SetWatchShare sets the number of inotify watches a session may hold and
// returns a function that puts the default back.
func SetWatchShare(n int) func() {
	watchShareOverride.Store(int64(n))
	return func() { watchShareOverride.Store(0) }
}

// SessionWatches returns the inotify watches session holds.
func SessionWatches(session string) int {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if sh := sharesByName[session]; sh != nil {
		return sh.watches
	}
	return 0
}

// MaskHandoffs returns how many creates were handed to a pool thread for
// the caller's umask (umask.go).
func MaskHandoffs() int64 { return maskHandoffs.Load() }
