package transport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A queue whose ring fails (io_uring_enter returns an error other than
// EINTR) would leave its CPU's requests waiting for good: the kernel
// keeps the queue's entries registered and puts every request of a
// caller on that CPU on that queue (fs/fuse/dev_uring.c,
// fuse_uring_task_to_queue, fuse_uring_queue_fuse_req). rebuild moves
// the queue to a new ring on the same thread instead, relying on this of
// fs/fuse/dev_uring.c:
//
//   - An entry is the kernel's per registration, not per ring: a
//     REGISTER for the queue's qid from any ring adds an entry
//     (fuse_uring_register), and a COMMIT_AND_FETCH from any ring finds
//     the request by its commit id in the queue's table and takes the
//     entry over with the new command (fuse_uring_commit_fetch). So the
//     entries that hold a request the server has (served or not) carry on
//     through the new ring.
//   - A new entry goes to the head of the queue's free list
//     (fuse_uring_ent_avail, list_move) and a request takes the first
//     (fuse_uring_queue_fuse_req): once the new entries are registered,
//     requests go to them, not to the old ring's.
//   - Closing the old ring cancels its free entries (fuse_uring_cancel:
//     they leave the free list and are never used again), but a request
//     the kernel has already given to one of them and whose copy into the
//     entry is still task work of the ring's thread is not copied once
//     the ring is dying (fuse_uring_send_in_task with
//     IO_URING_F_TASK_DEAD): it is ended with ECANCELED (Linux 6.18; it
//     waited for the connection's end before). So the old ring is
//     drained (its task work run, its completions reaped) before it is
//     closed, after the new entries are registered.
//   - The requests queued for an entry (none free) are handed out by the
//     next COMMIT_AND_FETCH on the queue (fuse_uring_next_fuse_req);
//     there are such requests only while every entry holds one, and those
//     are committed through the new ring.
//
// When the old ring cannot be drained, or the new one cannot be made,
// the queue cannot be rebuilt without leaving requests behind, and the
// connection is ended through fusectl (abort): every waiting request
// fails with ECONNABORTED, later ones with ENOTCONN, instead of hanging.

// faultRebuild, set by tests only, is called on the queue's thread as a
// rebuild begins: an error stands for the new ring's failure.
var faultRebuild func(q *queue) error

// rebuild moves the queue to a new ring after its ring failed with
// cause, and reports whether the queue serves on; when it does not, the
// connection has been ended (or could not be: logged) and the queue's
// off-thread requests have finished.
func (q *queue) rebuild(fd int, cause error) bool {
	old := q.r
	q.broken = nil
	var held []int // entries with a request, to serve
	err := q.drain(old, &held)
	if err == nil && faultRebuild != nil {
		err = faultRebuild(q)
	}
	var r2 *ring
	if err == nil {
		r2, err = newRing(8 * entriesPerQueue)
	}
	if err != nil {
		return q.giveUp(cause, err)
	}
	q.r = r2
	q.u.rebuilt.Add(1)
	q.armWake()
	q.armGuard()
	// What the kernel never took from the old ring goes through the new
	// one: a commit queued there carries a reply a caller waits for.
	fresh := 0
	for i, e := range q.ents {
		switch {
		case e == nil || e.on != old || e.op == 0:
		case !old.consumed(e.seq):
			if e.op == uringCmdCommitAndFetch {
				q.commit(fd, i)
			} else {
				s, seq := q.nextSQE()
				q.cmdSQE(s, seq, fd, uringCmdRegister, i, uint16(q.qid), 0)
			}
		default:
			fresh++ // held by the old ring: replaced
		}
	}
	for n := range fresh {
		e, err := q.addEntry()
		if err != nil {
			if n == 0 {
				// No entry would be free for the CPU's callers.
				q.broken = err
			}
			break
		}
		s, seq := q.nextSQE()
		q.cmdSQE(s, seq, fd, uringCmdRegister, e, uint16(q.qid), 0)
		q.live++
	}
	if err := r2.enter(false); err != nil && q.broken == nil {
		q.broken = fmt.Errorf("submit: %w", err)
	}
	if err := q.drain(old, &held); err != nil && q.broken == nil {
		q.broken = err
	}
	if q.broken != nil {
		err := q.broken
		q.r = old
		r2.close()
		return q.giveUp(cause, err)
	}
	old.close()
	// The entries the old ring still held are gone with it (every other
	// entry the kernel holds was submitted on the new ring above).
	for i, e := range q.ents {
		if e != nil && e.on == old && e.op != 0 {
			q.drop(i)
			q.live--
		}
	}
	q.u.log.Warn("fuse transport: io_uring queue failed; rebuilt on a new ring", "queue", q.qid, "err", cause, "entries", q.live)
	for _, e := range held {
		q.serve(fd, e)
	}
	// An off-thread answer whose wake the old ring read.
	q.commitDone(fd)
	return true
}

// drain runs the task work of ring r (an old ring of the queue) and
// reaps its completions until none comes: entries with a request are
// added to held, entries given back leave the count. Nothing is
// submitted on r; it ends because each completion is one of r's finite
// commands.
func (q *queue) drain(r *ring, held *[]int) error {
	for {
		if err := r.poll(); err != nil {
			return fmt.Errorf("draining the failed ring: %w", err)
		}
		n := r.reap(func(c cqe) {
			switch {
			case c.UserData == userDataWake, c.UserData == userDataFallback, c.UserData == userDataGuard:
			case c.Res < 0:
				q.drop(int(c.UserData))
				q.live--
			default:
				q.took(int(c.UserData))
				*held = append(*held, int(c.UserData))
			}
		})
		if n == 0 {
			return nil
		}
	}
}

// giveUp ends the connection of a queue that could not be rebuilt (cause:
// why its ring failed, err: why it could not be rebuilt), logging one
// line, and waits for the queue's off-thread requests (their wake writes
// the queue's eventfd, closed after).
func (q *queue) giveUp(cause, err error) bool {
	// Set first: the callers the abort releases may look.
	q.u.ended.Store(true)
	if aerr := q.u.endConn(); aerr != nil {
		q.u.ended.Store(false)
		q.u.log.Error("fuse transport: io_uring queue failed and could not be rebuilt, nor the connection ended: requests from its CPU wait until the mount is unmounted",
			"queue", q.qid, "err", cause, "rebuild_err", err, "abort_err", aerr)
	} else {
		q.u.log.Error("fuse transport: io_uring queue failed and could not be rebuilt; the connection is ended (its callers get ECONNABORTED or ENOTCONN instead of waiting)",
			"queue", q.qid, "err", cause, "rebuild_err", err, "fusectl", q.u.conn)
	}
	var buf [8]byte
	for q.running() > 0 {
		unix.Read(q.efd, buf[:])
	}
	return false
}

// fusectlDir is where the fusectl file system lists FUSE connections.
const fusectlDir = "/sys/fs/fuse/connections"

// FusectlName returns the fusectl(5) name of the connection mounted at
// mountpoint (its device number as the kernel encodes it, major << 20 |
// minor), or "" when it cannot be read. AT_STATX_DONT_SYNC: the kernel
// answers from the superblock without asking the server.
func FusectlName(mountpoint string) string {
	if mountpoint == "" {
		return ""
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, mountpoint, unix.AT_STATX_DONT_SYNC|unix.AT_SYMLINK_NOFOLLOW, 0, &stx); err != nil {
		return ""
	}
	return strconv.FormatUint(uint64(stx.Dev_major)<<20|uint64(stx.Dev_minor), 10)
}

// endConn aborts the connection through fusectl (AbortConnection).
func (u *URing) endConn() error {
	if u.conn == "" {
		return errors.New("the connection's fusectl name is unknown (no mount point at Start)")
	}
	return AbortConnection(u.conn)
}

// AbortConnection aborts the FUSE connection named name in fusectl(5)
// (its device number as the kernel encodes it, major << 20 | minor, in
// decimal) by writing its abort file, mounting fusectl on
// /sys/fs/fuse/connections for the call when it is not mounted (the host
// is left as it was). Every request waiting on the connection then ends
// with ECONNABORTED, and later ones get ENOTCONN (fs/fuse/control.c,
// fuse_conn_abort_write). Errors: those of mount(2) and of the write.
func AbortConnection(name string) error {
	if ents, err := os.ReadDir(fusectlDir); err == nil && len(ents) == 0 {
		if err := unix.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err == nil {
			defer unix.Unmount(fusectlDir, unix.MNT_DETACH)
		} else if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount fusectl on %s: %w", fusectlDir, err)
		}
	}
	return os.WriteFile(filepath.Join(fusectlDir, name, "abort"), []byte("1"), 0)
}

// Ended reports whether srv's connection has ended (aborted, or unmounted
// and gone): poll(2) of /dev/fuse then reports POLLERR (fs/fuse/dev.c,
// fuse_dev_poll, once the input queue is disconnected), and a server whose
// Serve has returned has closed its descriptor, which it does only then.
// It does not wait. False when the descriptor cannot be duplicated
// (EMFILE).
func Ended(srv *fuse.Server) bool {
	fd, err := srv.DupDeviceFd()
	if err != nil {
		var errno unix.Errno
		return !errors.As(err, &errno) // closed by Serve's end
	}
	defer unix.Close(fd)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n == 1 && pfd[0].Revents&unix.POLLERR != 0
}
