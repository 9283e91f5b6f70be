package mounts

// A jail (`exec --confine`) hides every other session's root, mountpoint
// and temp directory with an empty read-only tmpfs, built by bwrap from the
// sessions listed when it starts (cmd/wsfs, jailSpec). A session created
// later must be hidden from it as well, as the daemon-wide place index
// hides it from every host view (issue 22): so Create, before it returns,
// covers the new session's places in the mount namespace of every live
// jail of another session the same way (hideInJails), and the jail's
// client lists the sessions again once its jail is registered (AddJail), so
// that a session created meanwhile is in one list or the other.
//
// A place stays covered in a jail until the jail ends, after its session
// is removed too, as for the sessions a jail hid from its start: a session
// created later at the same paths is hidden already.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// jailReadyTimeout bounds how long hideInJails waits for a registered jail
// to finish building its namespace (bwrap forks the jailed command only
// after its set-up).
const jailReadyTimeout = 10 * time.Second

// liveJail is a jail in the daemon-wide registry (Manager.liveJails): the
// session it belongs to, the registered pid (bwrap's outer process) and a
// pidfd on it owned by the registry.
type liveJail struct {
	session string
	pid     int
	fd      int
}

// registerJail adds the jail pid of session id (pidfd fd, which the
// session keeps) to the registry, with a duplicate of fd of its own.
func (m *Manager) registerJail(id string, pid, fd int) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		m.log.Warn("jail: registry: dup pidfd", "session", id, "pid", pid, "err", err)
		return
	}
	m.jailMu.Lock()
	m.liveJails = append(m.liveJails, &liveJail{session: id, pid: pid, fd: dup})
	m.jailMu.Unlock()
}

// jailsApart returns copies of the live jails of sessions other than id,
// each with a pidfd of its own for the caller to close, and forgets (and
// closes) those that have exited.
func (m *Manager) jailsApart(id string) []liveJail {
	m.jailMu.Lock()
	defer m.jailMu.Unlock()
	live := m.liveJails[:0]
	var out []liveJail
	for _, j := range m.liveJails {
		if exited(j.fd) {
			unix.Close(j.fd)
			continue
		}
		live = append(live, j)
		if j.session == id {
			continue
		}
		if dup, err := unix.FcntlInt(uintptr(j.fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			out = append(out, liveJail{session: j.session, pid: j.pid, fd: dup})
		}
	}
	clear(m.liveJails[len(live):])
	m.liveJails = live
	return out
}

// hideInJails covers places (session id's root, mountpoint and temp
// directory) in every live jail of another session, as bwrap covers the
// sessions that existed when a jail started: an empty read-only tmpfs
// (mode 0555, nosuid, nodev). A place missing in the jail (inside one the
// jail hides already, or gone), not a directory, on FUSE (inside one of the
// jail's views, whose policy decides) or covered already (the root of a
// read-only tmpfs: a removed session's, at the same path) is left as it
// is. A failure is logged; it does not fail the create.
func (m *Manager) hideInJails(id string, places []string) {
	for _, j := range m.jailsApart(id) {
		err := hideInJail(&j, places)
		unix.Close(j.fd)
		if err != nil {
			m.log.Warn("jail: hide a later session", "session", j.session, "jail", j.pid, "hidden session", id, "err", err)
		}
	}
}

// hideInJail waits until jail j has built its namespace and covers places
// there.
func hideInJail(j *liveJail, places []string) error {
	inner, err := jailNamespaceProcess(j)
	if err != nil || inner < 0 {
		return err // exited meanwhile: nothing to hide from
	}
	defer unix.Close(inner)
	done := make(chan error, 1)
	go func() { done <- coverIn(inner, places) }()
	return <-done
}

// jailNamespaceProcess returns a pidfd on the process that holds jail j's
// mount namespace — bwrap's child, the jail's PID 1 — once that has
// forked the jailed command (its set-up is over then), or -1 when the jail
// exits first. It polls /proc (no event says so) for up to
// jailReadyTimeout.
func jailNamespaceProcess(j *liveJail) (int, error) {
	deadline := time.Now().Add(jailReadyTimeout)
	for {
		for _, c := range children(j.pid) {
			if len(children(c)) == 0 {
				continue
			}
			fd, err := unix.PidfdOpen(c, 0)
			if err != nil {
				continue
			}
			// c was j.pid's child while j.pid lived (its pidfd is not
			// readable): the pid was not reused.
			if exited(j.fd) {
				unix.Close(fd)
				return -1, nil
			}
			return fd, nil
		}
		if exited(j.fd) {
			return -1, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("the jail did not start its command within %s", jailReadyTimeout)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc: no event tells
	}
}

// coverIn enters the mount namespace of the process of pidfd inner on a
// thread of its own (unshare(2) CLONE_FS first: setns(2) refuses a mount
// namespace to a thread sharing its file system attributes) and covers
// each place there, then goes back to the daemon's namespace. The thread is
// never handed back to the runtime: its goroutine exits locked, so the
// runtime ends it.
func coverIn(inner int, places []string) error {
	runtime.LockOSThread()
	// The process's root as the jail sees it, opened before entering.
	root, err := openPidRoot(inner)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	// Each place wherever the jail shows its directory (a bind mount of a
	// directory above it): hidden by identity, as at the jail's start. Its
	// mount table as its process sees it, read from the daemon's /proc
	// (the jail's /proc has a PID namespace of its own).
	if pid, err := pidOfPidfd(inner); err == nil {
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid)); err == nil {
			places = identity.Aliases(places, identity.ParseMountinfo(string(data)), identity.JailOwn)
		}
	}
	// The daemon's namespace, to go back to: a locked thread whose
	// goroutine exits is ended by the runtime, but the main thread is only
	// parked, and a thread left in the jail's namespace would keep it, and
	// the FUSE connections bound there, alive after the jail ends.
	home, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open this thread's mount namespace: %w", err)
	}
	defer unix.Close(home)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare CLONE_FS: %w", err)
	}
	if err := unix.Setns(inner, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("setns: %w", err)
	}
	defer func() {
		if err := unix.Setns(home, unix.CLONE_NEWNS); err != nil {
			panic(fmt.Sprintf("jail: back to the daemon's mount namespace: %v", err)) // never keep a thread in a jail's
		}
	}()
	var errs []error
	for _, p := range places {
		if err := coverPlace(root, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// openPidRoot opens /proc/PID/root (O_PATH) of the process of pidfd fd,
// checking afterwards that the pidfd still names a live process.
func openPidRoot(fd int) (int, error) {
	pid, err := pidOfPidfd(fd)
	if err != nil {
		return -1, err
	}
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /proc/%d/root: %w", pid, err)
	}
	if exited(fd) {
		unix.Close(root)
		return -1, fmt.Errorf("jail process %d exited", pid)
	}
	return root, nil
}

// pidOfPidfd returns the pid of pidfd fd (the Pid: line of
// /proc/self/fdinfo/FD).
func pidOfPidfd(fd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return -1, err
	}
	var pid int
	for _, line := range strings.Split(string(b), "\n") {
		if n, _ := fmt.Sscanf(line, "Pid:\t%d", &pid); n == 1 {
			return pid, nil
		}
	}
	return -1, fmt.Errorf("pidfd %d: no Pid in fdinfo", fd)
}

// coverPlace covers p, resolved in the jail's root root without following
// a link (the jail may have made one where it can write), with an empty
// read-only tmpfs, unless it is missing, not a directory, on FUSE or
// covered already (coverIn's rules).
func coverPlace(root int, p string) error {
	fd, err := unix.Openat2(root, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EACCES):
		return nil // nothing the jail reaches there
	case err != nil:
		return fmt.Errorf("open in the jail: %w", err)
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return fmt.Errorf("statfs in the jail: %w", err)
	}
	if sfs.Type == unix.FUSE_SUPER_MAGIC {
		return nil // inside a view: its policy decides
	}
	if sfs.Type == unix.TMPFS_MAGIC && sfs.Flags&unix.ST_RDONLY != 0 {
		var stx unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &stx); err == nil &&
			stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
			return nil // covered already
		}
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "0555"); err != nil {
		return fmt.Errorf("tmpfs mode: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("tmpfs create: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}
