package mounts

// Jail records. A jail's outer process (bwrap) is the caller's, not the
// daemon's child, so a daemon that dies (kill -9, OOM, a panic) or hands
// over leaves its jails running. So every jail is recorded in the state
// directory when it registers (AddJail), as <state>/jails/<pid>-<start>.json,
// and the record is removed when the jail exits (watchJailExit) or a
// daemon ends it. Recover finds every recorded jail that is still the same
// process (its pid, its start time, this boot: recordedJails) and takes it
// back with its session when the session and the jail's views are served
// on (jailkeep.go); otherwise their views are dead (ENOTCONN), and it ends
// the jail as a stop does (killJail). A record whose pid now names another
// process (the jail exited and the pid was reused) is removed, and that
// process left alone.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// jailRecordsDir is the directory of the jail records under the state
// directory.
const jailRecordsDir = "jails"

// jailRecord is the durable record of one jail: enough to find its process
// again after a crash, and never another.
type jailRecord struct {
	Session string `json:"session"`
	PID     int    `json:"pid"`
	// Start is the process's start time (/proc/PID/stat field 22, clock
	// ticks after boot), which a process reusing the pid does not share.
	Start uint64 `json:"start"`
	// Boot is the kernel's boot id (/proc/sys/kernel/random/boot_id): a
	// start time means nothing in another boot.
	Boot string `json:"boot"`
}

// name is the record's file name: pid and start time, so that a jail's
// record is never replaced by one of a later jail that reuses its pid.
func (r jailRecord) name() string {
	return fmt.Sprintf("%d-%d.json", r.PID, r.Start)
}

// jailRecordsOf returns the directory of the jail records of a daemon on
// state directory state.
func jailRecordsOf(state string) string { return filepath.Join(state, jailRecordsDir) }

// bootID returns the kernel's boot id ("" when unreadable: records then
// match no boot, and are removed unused).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// procStart returns the start time of process pid (/proc/PID/stat field
// 22).
func procStart(pid int) (uint64, error) {
	f := procStat(pid)
	if len(f) < 20 {
		return 0, unix.ESRCH
	}
	return strconv.ParseUint(f[22-3], 10, 64)
}

// procParent returns the parent pid of process pid (/proc/PID/stat field
// 4).
func procParent(pid int) (int, error) {
	f := procStat(pid)
	if len(f) < 2 {
		return 0, unix.ESRCH
	}
	return strconv.Atoi(f[4-3])
}

// recordJail records jail pid of session id, whose pidfd is fd (opened
// before: the start time read is then its process's as long as that has
// not exited). It returns the record written.
func (m *Manager) recordJail(id string, pid, fd int) (jailRecord, error) {
	start, err := procStart(pid)
	if err == nil && exited(fd) {
		err = unix.ESRCH // the start time read may be another process's
	}
	if err != nil {
		return jailRecord{}, err
	}
	r := jailRecord{Session: id, PID: pid, Start: start, Boot: bootID()}
	data, err := json.Marshal(r)
	if err != nil {
		return jailRecord{}, err
	}
	dir := jailRecordsOf(m.stateDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return jailRecord{}, err
	}
	// Durable enough: a record outlives a killed process in the page
	// cache, and none is needed after a reboot (no jail survives it), so
	// no fsync on the jail's start-up path. The temp file and the rename
	// leave no torn record.
	tmp := filepath.Join(dir, r.name()+tmpInfix+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return jailRecord{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, r.name())); err != nil {
		os.Remove(tmp)
		return jailRecord{}, err
	}
	return r, nil
}

// forgetJail removes the record of jail j (ended, or found exited).
func (m *Manager) forgetJail(j jail) {
	path := filepath.Join(jailRecordsOf(m.stateDir), j.rec.name())
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("jail: remove record", "pid", j.pid, "path", path, "err", err)
	}
}

// watchJailExit removes jail j's record once its process exits (the jail
// ended on its own): a goroutine waits on a duplicate of its pidfd in the
// runtime's poller (a pidfd polls readable at exit), holding no thread.
// Without one (logged), the record goes when the daemon next finds the jail
// exited (AddJail, endJails) or at the next start.
func (m *Manager) watchJailExit(j jail) {
	dup, err := unix.FcntlInt(uintptr(j.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		m.log.Warn("jail: watch exit: dup pidfd", "pid", j.pid, "err", err)
		return
	}
	// O_NONBLOCK makes os.NewFile register it with the poller (the flag is
	// the shared file description's; nothing reads a pidfd).
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		m.log.Warn("jail: watch exit: pidfd", "pid", j.pid, "err", err)
		return
	}
	f := os.NewFile(uintptr(dup), "pidfd:"+strconv.Itoa(j.pid))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		m.log.Warn("jail: watch exit: pidfd", "pid", j.pid, "err", err)
		return
	}
	go func() {
		defer f.Close()
		// Read calls the function again each time the pidfd polls
		// readable, until it returns true.
		if err := rc.Read(func(fd uintptr) bool { return exited(int(fd)) }); err != nil {
			return
		}
		m.log.Info("jail exited", "session", j.rec.Session, "pid", j.pid)
		m.forgetJail(j)
	}()
}

// recordedJails returns the jails a previous daemon recorded that still
// run as the same process (pid, start time, boot), by session, each with a
// pidfd opened before the start time was compared; the records of the
// others are removed. Recover adopts a session's jails with the session
// (adoptJails) or ends them (endAdopted).
func (m *Manager) recordedJails() map[string][]jail {
	dir := jailRecordsOf(m.stateDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("recover: jail records", "dir", dir, "err", err)
		}
		return nil
	}
	out := map[string][]jail{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if r, ok := m.readJailRecord(path); ok {
			if fd := m.findRecordedJail(r); fd >= 0 {
				out[r.Session] = append(out[r.Session], jail{pid: r.PID, fd: fd, rec: r})
				continue
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("recover: remove jail record", "path", path, "err", err)
		}
	}
	return out
}

// readJailRecord reads the jail record at path; false (logged) for a temp
// file, an unreadable record or one whose name does not match it.
func (m *Manager) readJailRecord(path string) (jailRecord, bool) {
	name := filepath.Base(path)
	if strings.Contains(name, tmpInfix) {
		return jailRecord{}, false // a record write a crash interrupted
	}
	var r jailRecord
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err == nil && (r.PID <= 0 || r.name() != name) {
		err = fmt.Errorf("pid %d, start %d: not the record its name %s says", r.PID, r.Start, name)
	}
	if err != nil {
		m.log.Warn("recover: unreadable jail record, removed", "path", path, "err", err)
		return jailRecord{}, false
	}
	return r, true
}

// findRecordedJail returns a pidfd on the jail of record r when its
// process still runs, else -1 (logged).
func (m *Manager) findRecordedJail(r jailRecord) int {
	if r.Boot == "" || r.Boot != bootID() {
		m.log.Info("recover: jail of another boot, gone", "session", r.Session, "pid", r.PID)
		return -1
	}
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		m.log.Info("recover: jail gone", "session", r.Session, "pid", r.PID)
		return -1
	}
	start, err := procStart(r.PID)
	switch {
	case err != nil || exited(fd):
		unix.Close(fd)
		m.log.Info("recover: jail gone", "session", r.Session, "pid", r.PID)
		return -1
	case start != r.Start:
		unix.Close(fd)
		m.log.Info("recover: jail gone; its pid is another process's, left alone", "session", r.Session, "pid", r.PID, "start", r.Start, "now", start)
		return -1
	}
	return fd
}
