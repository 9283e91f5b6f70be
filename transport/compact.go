package transport

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Live compaction. The state is an append-only log: every lookup and
// FORGET appends a lookup-count record, so a connection served for weeks
// would hold a log many times the size of what it describes (memory:
// the memfd is RAM). Once a log with a compactor (SetCompactor) has grown
// past compactMin and compactRatio times its last compacted size, the
// next record starts a compaction: the live set is written to a new memfd
// (header and intent ring copied as they are), the compactor puts it in
// the descriptor store in place of the old one, and the state goes on in
// the new file. Records are held back meanwhile (the state's mutex), so
// the store holds, at every moment, either the old log or the new one with
// everything the old one said: a process killed at any point leaves a
// state its successor can use.

// compactMin is the least log size (bytes after the header) that is
// compacted: below it a log costs less than the compaction. A variable for
// the tests.
var compactMin int64 = 16 << 20

const (
	// compactRatio is how many times its last compacted size a log grows
	// before it is compacted again, so that compaction work stays
	// proportional to what is appended (amortized O(1) per record).
	compactRatio = 4
)

// SetCompactor makes the state compact itself while it is in use (see
// above): put stores the new memfd (a descriptor the state keeps owning)
// in place of the old one, and must do so atomically (Holder.Put does;
// systemd's store removes the old one first). An error from put leaves the
// old log in use, and no compaction is tried again before the log doubles.
// A nil put ends compaction: one running waits for the mutex and does
// nothing (call it before the state leaves the store).
func (s *State) SetCompactor(put func(fd int) error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compactor = put
	s.compactAt = max(compactMin, compactRatio*(s.off-stateHeaderSize)) + stateHeaderSize
}

// maybeCompact starts a compaction when one is due (s.mu held).
func (s *State) maybeCompact() {
	if s.compactor == nil || s.compacting || s.off < s.compactAt {
		return
	}
	s.compacting = true
	s.compactWG.Add(1)
	go func() {
		defer s.compactWG.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.compacting = false
		if err := s.compactLocked(); err != nil {
			// Not again before the log doubles.
			s.compactAt = 2 * s.off
		}
	}()
}

// Compactions returns how many live compactions the state has done.
func (s *State) Compactions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compactions
}

// compactLocked writes the live set to a new memfd, puts it in the store
// and continues in it (s.mu held).
func (s *State) compactLocked() error {
	if s.compactor == nil {
		return nil // let go of meanwhile (SetCompactor(nil): unmounted)
	}
	live, _, err := s.replay()
	if err != nil {
		return err
	}
	if len(s.mem) < stateHeaderSize {
		return fmt.Errorf("connection state: no mapping to compact")
	}
	fd, err := unix.MemfdCreate("wsfs-conn", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("connection state: memfd_create: %w", err)
	}
	ns := &State{fd: fd, off: stateHeaderSize}
	ns.mu.Lock()
	ok := ns.grow(0)
	ns.mu.Unlock()
	if !ok {
		unix.Close(fd)
		return fmt.Errorf("connection state: map the compacted state")
	}
	// Meta and the intent ring as they are: intents of the requests in
	// flight stay valid.
	copy(ns.mem, s.mem[:stateHeaderSize])
	ns.WriteLive(live)
	if err := s.compactor(ns.fd); err != nil {
		ns.Close()
		return err
	}
	closed := s.fd < 0 // the serving process kept no descriptor (CloseFd)
	unix.Munmap(s.mem)
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
	s.fd, s.mem, s.off = ns.fd, ns.mem, ns.off
	if closed {
		if rfd, err := s.reopen(); err == nil { // only when it can come back
			unix.Close(rfd)
			unix.Close(s.fd)
			s.fd = -1
		}
	}
	s.compactAt = max(compactMin, compactRatio*(s.off-stateHeaderSize)) + stateHeaderSize
	s.compactions++
	return nil
}
