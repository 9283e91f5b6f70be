package mounts

// The jail reaper, for a daemon without a connection store (with one the
// jails' views are kept, and the jails outlive the daemon: jailkeep.go).
// A jail's views die with such a daemon, while the jail, the caller's
// process, runs on; the next
// daemon ends it from its record (jailrecord.go), but none may start soon,
// or at all. So wsfs serve starts a reaper process (StartJailReaper: its
// hidden `jail-reaper` verb, RunJailReaper) that the daemon hands a pidfd
// of every jail it registers, over a socket pair; when the daemon's end of
// the socket closes (it exited, however: kill -9, OOM, a panic, a stop),
// the reaper ends every jail it holds that still runs, as a stop would
// (killJailTree), and exits. A daemon that stops ends its jails itself
// first, so then there is nothing left to end.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// JailReaper is the daemon's side of a reaper process: Manager.AddJail
// hands it each jail (Config.JailReaper).
type JailReaper struct {
	// PID is the reaper process's pid.
	PID int

	pidfd int // on the reaper (it is the daemon's child: never reused before the daemon reaps it)
	mu    sync.Mutex
	fd    int // the daemon's end of the SOCK_SEQPACKET pair; -1 once closed
}

// StartJailReaper starts the reaper process: path run with argv (argv[0]
// as ps shows it), in a session of its own (no terminal signal reaches
// it), with the reaper's end of a socket pair as descriptor 3, which it
// passes to RunJailReaper. The daemon's end is close-on-exec, so no other
// child of the daemon keeps the reaper waiting.
func StartJailReaper(path string, argv []string) (*JailReaper, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("jail reaper: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "jail-reaper")
	defer theirs.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("jail reaper: start %s: %w", argv[0], err)
	}
	// Opened before it can be reaped: the pidfd is the reaper's.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		unix.Close(fds[0])
		return nil, fmt.Errorf("jail reaper: pidfd_open(%d): %w", cmd.Process.Pid, err)
	}
	r := &JailReaper{PID: cmd.Process.Pid, pidfd: pidfd, fd: fds[0]}
	// Reaped when it exits, so that no zombie is left while the daemon
	// runs on (it exits only with the daemon, or killed).
	go cmd.Wait()
	return r, nil
}

// handToReaper gives jail pid (pidfd fd) of session id to the reaper,
// started with the first jail. A reaper that died (killed) is replaced,
// and the new one is handed every live jail (Manager.liveJails, this one
// among them); one that is alive but does not take it (stopped: its
// socket is full) is kept, since closing its socket would make it end the
// jails. Failures are logged.
func (m *Manager) handToReaper(id string, pid, fd int) {
	if m.startReaper == nil {
		return
	}
	m.jailMu.Lock()
	defer m.jailMu.Unlock()
	if r := m.reaper; r != nil {
		err := r.hand(pid, fd)
		if err == nil {
			return
		}
		if !exited(r.pidfd) {
			m.log.Warn("jail: hand to the reaper", "session", id, "pid", pid, "reaper", r.PID, "err", err)
			return
		}
		m.log.Warn("jail reaper gone; starting another", "reaper", r.PID)
		r.Close()
		m.reaper = nil
	}
	r, err := m.startReaper()
	if err != nil {
		m.log.Warn("jail reaper: not started; a jail of a killed daemon runs on until the next one starts", "err", err)
		return
	}
	m.reaper = r
	m.log.Info("jail reaper started: it ends the jails if the daemon dies", "pid", r.PID)
	handed := false
	for _, j := range m.liveJails {
		if j.fd == fd || j.pid == pid {
			handed = true
		}
		if exited(j.fd) {
			continue
		}
		if err := r.hand(j.pid, j.fd); err != nil {
			m.log.Warn("jail: hand to the reaper", "session", j.session, "pid", j.pid, "reaper", r.PID, "err", err)
		}
	}
	if !handed { // not in the registry (registerJail failed)
		if err := r.hand(pid, fd); err != nil {
			m.log.Warn("jail: hand to the reaper", "session", id, "pid", pid, "reaper", r.PID, "err", err)
		}
	}
}

// closeReaper closes the reaper (the jails are ended): it exits.
func (m *Manager) closeReaper() {
	m.jailMu.Lock()
	defer m.jailMu.Unlock()
	if m.reaper != nil {
		m.reaper.Close()
		m.reaper = nil
	}
}

// hand gives the reaper jail pid's pidfd fd (a copy travels: SCM_RIGHTS).
func (r *JailReaper) hand(pid, fd int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return errors.New("jail reaper: closed")
	}
	// Never blocking a jail's start on a stopped reaper; never SIGPIPE
	// for one that died.
	return unix.Sendmsg(r.fd, []byte(strconv.Itoa(pid)), unix.UnixRights(fd), nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
}

// Close closes the daemon's end: the reaper ends the jails it holds that
// still run, and exits.
func (r *JailReaper) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	unix.Close(r.pidfd)
	r.fd = -1
	return err
}

// RunJailReaper is the reaper process (wsfs jail-reaper): it receives the
// jails' pids and pidfds on conn (its end of the socket pair
// StartJailReaper made) until the daemon's end closes, then ends every
// jail that still runs (killJailTree) and returns. Jails that exited are
// dropped as new ones arrive.
func RunJailReaper(conn *os.File) error {
	type held struct{ pid, fd int }
	var jails []held
	fd := int(conn.Fd())
	buf := make([]byte, 32)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 && oobn == 0 {
			break // the daemon's end is closed: it exited
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if rights, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, rights...)
				}
			}
		}
		pid, err := strconv.Atoi(string(buf[:n]))
		if err != nil || len(fds) != 1 {
			for _, f := range fds {
				unix.Close(f)
			}
			continue
		}
		live := jails[:0]
		for _, j := range jails {
			if exited(j.fd) {
				unix.Close(j.fd)
				continue
			}
			live = append(live, j)
		}
		jails = append(live, held{pid, fds[0]})
	}
	for _, j := range jails {
		if exited(j.fd) {
			unix.Close(j.fd)
			continue
		}
		killJailTree(j.pid, j.fd)
	}
	return nil
}
