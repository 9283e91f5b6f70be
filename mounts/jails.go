package mounts

// Jails: the processes `wsfs exec --confine` started on a session. A jail
// binds the session's jail view (jailview.go) or mount, and its host view,
// into its own mount namespace, which would keep
// the FUSE connection (and an old server's mount) alive after the daemon
// unmounts it; so the daemon holds a pidfd per jail and ends the jails
// before it unmounts or removes a session, or stops. A daemon that hands
// over or dies with a connection store leaves them running on kept views
// for the next one (jailkeep.go); without a store its jail reaper ends them
// (jailreaper.go), or else the next daemon, from their records
// (jailrecord.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// jail is one registered jail: the pid of its outermost process (bwrap,
// whose --die-with-parent child and PID namespace die with it) and a pidfd
// on it.
type jail struct {
	pid int
	fd  int
	rec jailRecord // its record in the state directory (jailrecord.go)
}

// jailEndTimeout bounds how long ending a jail waits for it to exit after
// SIGKILL.
const jailEndTimeout = 5 * time.Second

// AddJail registers process pid (the caller of the API, which then execs
// bwrap in place: same pid) as a jail of session id: the daemon opens a
// pidfd on it (pidfd_open(2)) and ends it before the session is unmounted,
// removed, or the daemon stops; it records the jail in the state
// directory (jailrecord.go) and hands it to the jail reaper
// (Config.JailReaper), so that it is ended when the daemon dies too. Jails
// that have exited are forgotten here.
// The session's jail view (links as stored, at <mount-base>/@jail/<id>) is
// mounted with the first jail, for the jail to show at the root's path.
//
// Errors: ErrNotFound, ErrFailed, ErrInvalid (pid 0 or not a live
// process), CodeInternal (the record cannot be written).
func (m *Manager) AddJail(ctx context.Context, id string, pid int) error {
	return m.AddJailPidfd(ctx, id, pid, -1)
}

// AddJailPidfd is AddJail with a pidfd on the process (pidfd >= 0; the
// caller keeps it), such as the API's from the socket's SO_PEERPIDFD: it
// names the very process that connected even when that one has exited
// and another reuses its pid, which pid alone cannot (a request that
// waited in the socket's backlog while no daemon ran). A process that
// has exited is ErrInvalid (ESRCH).
func (m *Manager) AddJailPidfd(ctx context.Context, id string, pid, pidfd int) error {
	if pid <= 0 {
		return errorf(CodeInvalid, "session %q: jail pid %d: must be a process id", id, pid)
	}
	s, err := m.locked(id, true)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	live := s.jails[:0]
	for _, j := range s.jails {
		if exited(j.fd) {
			unix.Close(j.fd)
			m.forgetJail(j)
			continue
		}
		live = append(live, j)
	}
	clear(s.jails[len(live):])
	s.jails = live
	var fd int
	if pidfd >= 0 {
		fd, err = unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
		if err == nil && exited(fd) {
			unix.Close(fd)
			err = unix.ESRCH
		}
	} else {
		fd, err = unix.PidfdOpen(pid, 0)
	}
	if err != nil {
		return errorf(CodeInvalid, "session %q: jail pid %d: %v", id, pid, identity.ErrnoText(err))
	}
	// Recorded before it runs: a daemon killed from now on leaves the
	// record to the next one, which ends the jail (jailrecord.go).
	rec, err := m.recordJail(id, pid, fd)
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ESRCH) {
			return errorf(CodeInvalid, "session %q: jail pid %d: %v", id, pid, identity.ErrnoText(unix.ESRCH))
		}
		return errorf(CodeInternal, "session %q: jail pid %d: record in %s: %v", id, pid, jailRecordsOf(m.stateDir), identity.ErrnoText(err))
	}
	j := jail{pid: pid, fd: fd, rec: rec}
	s.jails = append(s.jails, j)
	m.watchJailExit(j)
	m.registerJail(id, pid, fd)
	// Without a store, ended by the reaper if this daemon dies
	// (jailreaper.go), or else by the next daemon, from the record; with
	// one, taken back by the next daemon (jailkeep.go).
	m.handToReaper(id, pid, fd)
	m.log.Info("jail started", "session", id, "pid", pid)
	m.ensureJailView(s)
	return nil
}

// exited reports whether the process of pidfd fd has exited (the pidfd
// polls readable then).
func exited(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0
}

// endJails kills every jail of s (s.mu held) and removes its record
// (killJail); one that has exited is forgotten.
func (m *Manager) endJails(s *session) {
	for _, j := range s.jails {
		if exited(j.fd) {
			unix.Close(j.fd)
		} else {
			m.killJail(s.rec.ID, j.pid, j.fd)
		}
		m.forgetJail(j)
	}
	s.jails = nil
}

// killJail ends jail pid of session id (killJailTree; fd is its pidfd,
// which killJail closes) and logs it.
func (m *Manager) killJail(id string, pid, fd int) {
	if err := killJailTree(pid, fd); err != nil {
		m.log.Warn("jail: kill", "session", id, "pid", pid, "err", err)
	}
	m.log.Info("jail ended", "session", id, "pid", pid)
}

// killJailTree kills jail pid with SIGKILL through pidfds
// (pidfd_send_signal(2): never another process that reused the pid): the
// registered process (bwrap; its pidfd fd, which killJailTree closes) and
// its children (the jail's PID 1, whose death takes every process of its
// PID namespace with it), then waits, bounded, until each has exited. The
// error is the first signal that failed (but for ESRCH: exited already).
func killJailTree(pid, fd int) error {
	fds := []int{fd}
	for _, c := range children(pid) {
		cfd, err := unix.PidfdOpen(c, 0)
		if err != nil {
			continue
		}
		// Still pid's child once the pidfd is open: not a process that
		// reused the pid of one that exited meanwhile.
		if ppid, err := procParent(c); err != nil || ppid != pid {
			unix.Close(cfd)
			continue
		}
		fds = append(fds, cfd)
	}
	var first error
	// The outer process first would let its child outlive it for a
	// moment (PR_SET_PDEATHSIG); kill the children first.
	for i := len(fds) - 1; i >= 0; i-- {
		if err := unix.PidfdSendSignal(fds[i], unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH && first == nil {
			first = err
		}
	}
	deadline := time.Now().Add(jailEndTimeout)
	for _, fd := range fds {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for time.Now().Before(deadline) {
			n, err := unix.Poll(p, int(time.Until(deadline).Milliseconds())+1)
			if n > 0 || err != nil && err != unix.EINTR {
				break
			}
		}
		unix.Close(fd)
	}
	return first
}

// children returns the pids of pid's children (/proc/PID/task/PID/children,
// proc(5)); none when the file is missing.
func children(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}
