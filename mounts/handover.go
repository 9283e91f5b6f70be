package mounts

// The handover: a takeover whose successor fails before it serves leaves
// the running daemon serving (DESIGN.md, "Round 4": "if the new one fails
// before serving, the old one resumes"). The two daemons agree through
// <state>/takeover.json:
//
//  1. the successor writes its pid and start time there, then sends the
//     running daemon SIGTERM (takeOver);
//  2. the running daemon, seeing a live successor named, stops at a
//     request boundary (every server suspended, its jails and watchers
//     running on), writes its own pid to <state>/takeover.suspended and
//     releases the state directory's lock, but stays (Handover);
//  3. the successor, holding the lock, finishes everything that can fail
//     (its socket, its metrics listener, the store) and then commits
//     (CommitTakeover): <state>/takeover.committed is written (a file of
//     its own: a successor started late rewrites takeover.json, never
//     this), the predecessor is woken
//     (SIGUSR1) and exits 0, and once it is gone (its readers no longer
//     read requests) the successor serves (Recover);
//  4. a successor that exits before it commits wakes the predecessor by
//     its exit (a pidfd): the predecessor takes the lock back and serves
//     on; requests that arrived meanwhile are sent again
//     (FUSE_NOTIFY_RESEND). Processes see a pause, as for a takeover.
//
// A daemon of an earlier version, on either side, does not take part: it
// detaches and exits at SIGTERM as before, or never writes the file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// handoverName is the handover file in the state directory; commitName
// is the successor's commit, a file of its own (holding its pid) so that a
// late successor that names itself in handoverName meanwhile cannot undo
// it.
const (
	handoverName = "takeover.json"
	commitName   = "takeover.committed"
	// suspendName holds the pid and start time of the running daemon
	// once it has stopped serving and let go of the lock, waiting for the
	// commit or its successor's end; a file of its own for the same
	// reason.
	suspendName = "takeover.suspended"
)

// handover is the content of the handover file.
type handover struct {
	// Successor and Start name the daemon taking over: its pid and start
	// time (/proc/PID/stat field 22), which a process reusing the pid
	// does not share.
	Successor int    `json:"successor"`
	Start     uint64 `json:"start"`
}

func readHandover(state string) (handover, bool) {
	var h handover
	data, err := os.ReadFile(filepath.Join(state, handoverName))
	if err != nil || json.Unmarshal(data, &h) != nil || h.Successor <= 0 {
		return handover{}, false
	}
	return h, true
}

// suspended returns the pid in suspendName when that process still runs
// with the start time recorded beside it (a file a crash left never names
// a process that reused the pid), 0 otherwise. A file of a pid alone, as a
// build before the start time writes it (a daemon being upgraded), names
// that pid while it runs.
func suspended(state string) int {
	data, err := os.ReadFile(filepath.Join(state, suspendName))
	if err != nil {
		return 0
	}
	var pid int
	var start uint64
	n, _ := fmt.Sscan(string(data), &pid, &start)
	if n == 0 || pid <= 0 {
		return 0
	}
	now, err := procStart(pid)
	if err != nil || (n == 2 && now != start) {
		return 0
	}
	return pid
}

// committed reports whether a successor committed (commitName exists).
func committed(state string) bool {
	_, err := os.Lstat(filepath.Join(state, commitName))
	return err == nil
}

func writeHandover(state string, h handover) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return writeFileAtomic(state, handoverName, append(data, '\n'), 0o600)
}

// openProcess returns a pidfd on process pid when it still runs with start
// time start, else -1.
func openProcess(pid int, start uint64) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	if now, err := procStart(pid); err != nil || now != start || exited(fd) {
		unix.Close(fd)
		return -1
	}
	return fd
}

// predecessor is the daemon a successor took the lock from while it waits
// suspended (takeOver found it so): CommitTakeover wakes it.
type predecessor struct {
	pid   int
	start []string // procStat, for finished
}

// CommitTakeover is the successor's commit (step 3 above): call it once
// nothing can fail any more before serving, before Recover. The suspended
// predecessor, if any, is told (committed, SIGUSR1) and awaited, up to
// lockWait, then killed (it only waits to exit; a successor must not serve
// while its readers read). Without a suspended predecessor it does
// nothing.
func (m *Manager) CommitTakeover() {
	p := m.pred
	m.pred = nil
	if p == nil {
		// Ours, left when the running daemon was of an earlier version.
		if h, ok := readHandover(m.stateDir); ok && h.Successor == os.Getpid() {
			os.Remove(filepath.Join(m.stateDir, handoverName))
		}
		// Left by daemons that died in a handover: never to be read as
		// this one's (a later pid may be theirs).
		os.Remove(filepath.Join(m.stateDir, commitName))
		os.Remove(filepath.Join(m.stateDir, suspendName))
		return
	}
	if err := writeFileAtomic(m.stateDir, commitName, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600); err != nil {
		m.log.Warn("takeover: commit not written; the previous daemon is ended", "pid", p.pid, "err", err)
	}
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err == nil && finished(p.pid, p.start) {
		unix.Close(fd)
		fd, err = -1, unix.ESRCH
	}
	if err == nil {
		defer unix.Close(fd)
		unix.PidfdSendSignal(fd, unix.SIGUSR1, nil, 0)
		deadline := time.Now().Add(lockWait)
		for !finished(p.pid, p.start) {
			if time.Now().After(deadline) {
				m.log.Warn("takeover: the previous daemon did not exit; killed", "pid", p.pid)
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				deadline = time.Now().Add(lockWait)
			}
			pidfdWait(fd, time.Until(deadline))
		}
	}
	for _, n := range []string{handoverName, commitName, suspendName} {
		os.Remove(filepath.Join(m.stateDir, n))
	}
	m.log.Info("takeover committed: the previous daemon has exited", "pid", p.pid)
}

// pidfdWait waits up to d for the process of pidfd fd to exit.
func pidfdWait(fd int, d time.Duration) {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	unix.Poll(p, int(max(d, 0).Milliseconds())+1)
}

// Handover is Detach for a takeover (step 2 above; SIGTERM): when the
// handover file names a live successor, every server is suspended, the
// lock released, and Handover waits until the successor commits (then it
// finishes as Detach does and returns true: exit 0) or exits before it
// (then the lock is taken back, every server resumed, and it returns
// false: serve the API again). wake delivers SIGUSR1, the commit's signal.
// Without a live successor named, or without a store, it is Detach.
func (m *Manager) Handover(wake <-chan os.Signal) (bool, error) {
	h, ok := readHandover(m.stateDir)
	succ := -1
	if ok && m.store != nil && h.Successor != os.Getpid() {
		succ = openProcess(h.Successor, h.Start)
	}
	if succ < 0 {
		return true, m.Detach(context.Background())
	}
	// A commit left by a successor that died after it (the crash case)
	// is not this handover's.
	os.Remove(filepath.Join(m.stateDir, commitName))
	srvs := m.servers()
	late := 0
	for _, srv := range srvs {
		if !srv.Suspend(detachWait) {
			late++
		}
	}
	if err := writeFileAtomic(m.stateDir, suspendName, fmt.Appendf(nil, "%d %d\n", os.Getpid(), procStartOr0(os.Getpid())), 0o600); err != nil {
		unix.Close(succ)
		m.log.Warn("takeover: handover not written; detaching", "err", err)
		return true, m.Detach(context.Background())
	}
	unix.Flock(int(m.lock.Fd()), unix.LOCK_UN)
	m.log.Info("handing over: serving stopped, waiting for the successor to serve", "successor", h.Successor, "still_running", late)
	// watch returns a channel closed when the process of pidfd fd exits
	// (its own duplicate of fd: the caller closes fd when it likes).
	watch := func(fd int) <-chan struct{} {
		c := make(chan struct{})
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			close(c) // as if it had exited: the lock decides below
			return c
		}
		go func() {
			defer unix.Close(dup)
			for !exited(dup) {
				pidfdWait(dup, time.Hour)
			}
			close(c)
		}()
		return c
	}
	exitc := watch(succ)
	for {
		select {
		case <-wake:
			if !committed(m.stateDir) {
				continue
			}
			unix.Close(succ)
			by, _ := os.ReadFile(filepath.Join(m.stateDir, commitName))
			m.log.Info("the successor serves: detaching", "successor", strings.TrimSpace(string(by)))
			return true, m.Detach(context.Background())
		case <-exitc:
		}
		unix.Close(succ)
		if committed(m.stateDir) {
			// Committed, then died: the crash case, the next start's.
			return true, m.Detach(context.Background())
		}
		taken, err := tryLock(m.lock)
		if err != nil {
			return true, errors.Join(fmt.Errorf("take the lock back: %w", err), m.Detach(context.Background()))
		}
		if !taken {
			// Another successor holds it (two started at once): wait
			// for it the same way.
			pid := lockHolder(m.lock.Name())
			if succ = openProcess(pid, procStartOr0(pid)); succ < 0 {
				return true, errors.Join(fmt.Errorf("the lock is held by pid %d", pid), m.Detach(context.Background()))
			}
			exitc = watch(succ)
			continue
		}
		break
	}
	if m.lock.Truncate(0) == nil {
		m.lock.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	}
	for _, n := range []string{handoverName, commitName, suspendName} {
		os.Remove(filepath.Join(m.stateDir, n))
	}
	for _, srv := range srvs {
		if err := srv.Resume(); err != nil {
			m.log.Warn("resume: FUSE_NOTIFY_RESEND", "mountpoint", srv.Mountpoint(), "err", err)
		}
	}
	m.log.Info("the successor exited before it served: serving on", "successor", h.Successor)
	return false, nil
}

// procStartOr0 is procStart, 0 on error.
func procStartOr0(pid int) uint64 {
	s, _ := procStart(pid)
	return s
}
