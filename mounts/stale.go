package mounts

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/transport"
)

// A daemon killed while one of its threads waits on its own mount (go-fuse
// opens a file in a new mount before Mount returns, for one) cannot finish
// dying: the kernel waits for the FUSE answer that only the dead server
// could give, so the process stays a zombie that holds the state directory's
// lock and the mount. Aborting the mount's FUSE connection (fusectl(5):
// /sys/fs/fuse/connections/N/abort) releases both. The functions here do that
// for mounts this state directory records, and only when no live daemon can
// be serving them.

// lockWait bounds how long New waits for a dying daemon to release the
// state directory's lock after its connections were aborted: generous, since
// the kernel closes a killed daemon's descriptors (one FUSE connection per
// mount) at the pace of a loaded machine.
const lockWait = 60 * time.Second

// clearMount unmounts whatever is mounted at mp (a dead ENOTCONN mount
// included); nothing mounted is not an error. With abort, a FUSE mount's
// connection is aborted first, so that a server that is gone but stuck
// (see above) cannot keep it or hang the unmount; use it only when no live
// server can be serving mp.
func clearMount(mp string, force, abort bool) error {
	e, ok, err := fusefs.MountAt(mp)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if abort && strings.HasPrefix(e.FSType, "fuse") {
		// Best effort: a lazy unmount still clears the namespace.
		_ = abortConnection(e.Dev)
	}
	return fusefs.Unmount(mp, force)
}

// abortConnection aborts the FUSE connection of device dev ("MAJOR:MINOR"),
// through fusectl on /sys/fs/fuse/connections (mounted for the call when it
// is not mounted).
func abortConnection(dev string) error {
	maj, min, ok := strings.Cut(dev, ":")
	if !ok {
		return fmt.Errorf("device %q: not MAJOR:MINOR", dev)
	}
	major, err1 := strconv.ParseUint(maj, 10, 32)
	minor, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("device %q: not MAJOR:MINOR", dev)
	}
	// The kernel names a connection by its dev_t: major << 20 | minor.
	return transport.AbortConnection(strconv.FormatUint(major<<20|minor, 10))
}

// DaemonOf returns the pid of the wsfs serve that holds state directory
// stateDir (its lock, <stateDir>/lock, from /proc/locks), or 0 when none
// does (none runs, or it is on its way out: killed, its lock not released
// yet). For `wsfs doctor`: a mount whose connection a holder keeps for a
// state directory no daemon holds waits for the next daemon.
func DaemonOf(stateDir string) int {
	pid := lockHolder(filepath.Join(stateDir, "lock"))
	if pid != 0 && dying(pid) {
		return 0
	}
	return pid
}

// lockHolder returns the pid holding an flock on the file at path, from
// /proc/locks, or 0.
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 24069 00:2d:12345 0 EOF
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == want {
			pid, _ := strconv.Atoi(fields[4])
			return pid
		}
	}
	return 0
}

// dying reports whether process pid has been killed and is on its way out
// but still holds its resources: its main thread is a zombie while other
// threads are still alive (stuck as above), it is exiting (PF_EXITING: the
// kernel is closing its descriptors, a daemon's many FUSE connections
// among them, which takes a while on a loaded machine), or a SIGKILL is
// pending (a thread waiting on a FUSE answer has not acted on it yet).
// proc(5): /proc/PID/stat fields 3 (state) and 9 (flags), /proc/PID/status
// SigPnd and ShdPnd.
func dying(pid int) bool {
	f := procStat(pid) // f[0] is field 3 (state), f[6] field 9 (flags)
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true
	}
	const pfExiting = 0x4 // include/linux/sched.h
	if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	const sigkill = 1 << (9 - 1) // bit of SIGKILL in a pending-signal mask
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}

// abortRecordedMounts aborts the FUSE connections of the wsfs mounts at the
// mountpoints recorded (or intended) in sessDir.
func abortRecordedMounts(sessDir string) {
	table, err := fusefs.MountTable()
	if err != nil {
		return
	}
	ents, _ := os.ReadDir(sessDir)
	for _, e := range ents {
		var mp string
		path := filepath.Join(sessDir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".json"):
			var r record
			if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &r) == nil {
				mp = r.Mountpoint
			}
		case strings.HasSuffix(e.Name(), ".pending"):
			var p pending
			if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &p) == nil {
				mp = p.Mountpoint
			}
		}
		if m, ok := table[mp]; ok && mp != "" && m.FSType == "fuse.wsfs" {
			abortConnection(m.Dev)
		}
	}
}

// betweenLockLooks, when set (tests), runs between takeLock's first attempt
// and its look at /proc/locks.
var betweenLockLooks func()

// takeLock takes the state directory's lock on f and writes this process's
// pid into it. When a dying daemon (see above) holds it, or held it last
// (its pid in the file) and is still exiting, the connections of the mounts
// it recorded are aborted so that it can finish, and its end is awaited up
// to lockWait: the lock goes with the first of its descriptors the kernel
// closes, the rest (its socket among them, which the next Listen would find
// still accepting) after it.
func takeLock(f *os.File, lockPath, sessDir string, o lockOpts) error {
	taken, err := tryLock(f)
	if err != nil {
		return err
	}
	if !taken {
		if betweenLockLooks != nil {
			betweenLockLooks()
		}
		pid := lockHolder(lockPath)
		if pid == 0 { // no holder listed: it let go between the two looks
			if taken, err = tryLock(f); err != nil {
				return err
			}
			if !taken {
				pid = lockHolder(lockPath)
			}
		}
		if !taken {
			switch {
			case pid != 0 && !dying(pid) && o.takeover:
				if err := takeOver(f, pid, lockPath, o.log, o.pred); err != nil {
					return err
				}
			case pid == 0 || !dying(pid):
				return fmt.Errorf("held by pid %d", pid)
			default:
				if err := awaitExit(f, pid, lockPath, sessDir, !o.keepConns); err != nil {
					return err
				}
			}
		}
	}
	if prev := recordedHolder(f); o.pred != nil && *o.pred == nil && prev != 0 && prev != os.Getpid() &&
		suspended(filepath.Dir(lockPath)) == prev && !dying(prev) {
		// The lock came free because its holder suspended itself for a
		// handover to another successor (two started at once), which
		// this one beat to the lock: the holder waits for a commit, from
		// whichever successor holds the lock (handover.go), so this one
		// commits to it, as the one it named would have.
		*o.pred = &predecessor{pid: prev, start: procStat(prev)}
	} else if prev != 0 && prev != os.Getpid() && dying(prev) {
		if err := awaitExit(f, prev, lockPath, sessDir, !o.keepConns); err != nil {
			return err
		}
	}
	// Best effort: without it a successor only loses the wait above.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return nil
}

// tryLock takes the exclusive flock(2) on f without waiting: false when
// another open file description holds it (EWOULDBLOCK), an error otherwise.
func tryLock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// recordedHolder returns the pid the lock's last holder wrote into f, or 0.
func recordedHolder(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// awaitExit aborts the FUSE connections of the mounts recorded in sessDir
// and waits up to lockWait until the dying process pid has finished and f
// holds the lock; on timeout f does not hold it.
//
// Without abort (the connections are kept for this successor to serve on:
// Config.Store), nothing is aborted. Another process that takes the lock
// (lockPath) once pid has finished (a second successor) is named.
func awaitExit(f *os.File, pid int, lockPath, sessDir string, abort bool) error {
	started := procStat(pid) // to tell it from a later process with its pid
	if abort {
		abortRecordedMounts(sessDir)
	}
	deadline := time.Now().Add(lockWait)
	for {
		taken, err := tryLock(f)
		if err != nil {
			return err
		}
		if taken && finished(pid, started) {
			return nil
		}
		if now := lockHolder(lockPath); !taken && now != 0 && now != pid && finished(pid, started) {
			return fmt.Errorf("taken over by pid %d first", now)
		}
		if time.Now().After(deadline) {
			if taken {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
			}
			return fmt.Errorf("held by pid %d, which was killed but has not exited after %s", pid, lockWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finished reports whether process pid, started at started (procStat),
// has released everything it held: it is gone, or only its main thread is
// left, a zombie (the other threads, the last of which closes the
// descriptors, have exited).
func finished(pid int, started []string) bool {
	st := procStat(pid)
	if len(st) < 20 || len(started) < 20 || st[19] != started[19] {
		return true // gone (or another process now)
	}
	if st[0] != "Z" {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(tasks) <= 1
}

// procStat returns the fields of /proc/PID/stat after the command name
// (proc(5) field 3, the state, first; field 22, the start time, at 19), or
// nil.
func procStat(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// lockOpts are how takeLock treats a live or dying holder.
type lockOpts struct {
	takeover  bool // a live holder is asked to stop (Config.Takeover)
	keepConns bool // a dying holder's connections are kept: not aborted
	log       *slog.Logger
	// pred, when set, receives the daemon taken over from when it waits
	// suspended for the commit (handover.go).
	pred **predecessor
}

// takeOver asks the live daemon pid that holds the lock to stop (SIGTERM:
// it stops serving at a request boundary and exits, its connections kept,
// Manager.Detach) and waits up to lockWait for the lock. If another
// process takes the lock first (a second successor), that one is named.
func takeOver(f *os.File, pid int, lockPath string, log *slog.Logger, pred **predecessor) error {
	started := procStat(pid)
	state := filepath.Dir(lockPath)
	log.Info("taking over from the running daemon", "pid", pid)
	if pred != nil {
		// Named for the running daemon, which then waits for the commit
		// instead of exiting (handover.go).
		if self, err := procStart(os.Getpid()); err == nil {
			writeHandover(state, handover{Successor: os.Getpid(), Start: self})
		}
	}
	// ESRCH: it ended (a kill -9 landing) since the lock was found held;
	// its lock is let go with its last descriptor, awaited below.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("held by pid %d, which could not be asked to stop: %v", pid, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		taken, err := tryLock(f)
		if err != nil {
			return err
		}
		// Not before it is gone: a paused server still reads requests
		// (and leaves them unanswered) until its process exits, and the
		// successor's FUSE_NOTIFY_RESEND must come after the last one.
		if taken && finished(pid, started) {
			return nil
		}
		if taken && pred != nil && suspended(state) == pid {
			// Suspended, waiting for the commit of whoever holds the
			// lock: this process.
			*pred = &predecessor{pid: pid, start: started}
			return nil
		}
		if now := lockHolder(lockPath); !taken && now != 0 && now != pid && finished(pid, started) {
			return fmt.Errorf("taken over by pid %d first", now)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("held by pid %d, which was asked to stop %s ago and still holds it", pid, lockWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
