package transport

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A connection on the ring outlives its server as a /dev/fuse one does
// (DESIGN.md, "Round 4"), with what FUSE_NOTIFY_RESEND does there done
// here instead: the kernel has no resend for requests it gave ring
// entries (fs/fuse/dev.c fuse_resend walks /dev/fuse's lists only), and
// it puts a request that arrives while no entry of its CPU's queue is
// free on the queue's list, handing it out only at the next
// COMMIT_AND_FETCH on that queue (fuse_uring_queue_fuse_req,
// fuse_uring_get_next_fuse_req; a REGISTER hands out nothing).
//
//   - The entries' buffers are shared memory at a recorded address
//     (ringmem.go), and each slot's state says where its request and reply
//     are (slotHeld ... slotReplied). A successor maps them where they
//     were and takes over every slot the dead server left (recoverSlots):
//     a request it had taken or been given is served again (the state
//     log and FUSE_UNIQUE_RESEND's mark make a repetition of a mutation
//     answer as the first did), a reply it had made is committed. The
//     kernel finds the request by its commit id from the successor's ring
//     and reads the reply where the dead server's entry was registered:
//     the same address, now the successor's mapping.
//   - Rings are made without IORING_SETUP_DEFER_TASKRUN, so that a
//     request the kernel gives an entry is copied into the entry's buffer
//     by task work that runs at the thread's next return to user space:
//     a SIGKILL runs it before the thread exits (get_signal), and the
//     exit's cancellation of the free entries runs before the ring dies
//     (io_uring_files_cancel comes before exit_signals in do_exit), so
//     nothing the kernel gave a dying server's entry is lost. With
//     DEFER_TASKRUN such a request was ended with ECANCELED (measured on
//     6.18: 7 of 7 stat(1)s waiting behind a busy queue).
//   - After taking over, every queue gets a request from a child process
//     (kick.go), whose COMMIT_AND_FETCH hands out the first request that
//     waited on the queue's list while no server ran, and so on down the
//     list.

// gate holds the queues between Start and Serve, and between Pause and
// Resume: a queue parks at its next loop turn while shut. Each opening is
// numbered, so that a queue that reaches its loop after the gate opened
// (Serve may come first) still takes over what other servers left when
// that opening asks for it (opened).
type gate struct {
	shut atomic.Bool
	gen  atomic.Uint64 // openings so far
	mu   sync.Mutex
	// opened is closed when the gate opens; recoverAt is the number of
	// the last opening that had the queues take over other servers'
	// slots.
	opened    chan struct{}
	recoverAt uint64
	parked    int
	note      chan struct{} // a queue parked
}

func (g *gate) init() {
	g.shut.Store(true)
	g.opened = make(chan struct{})
	g.note = make(chan struct{}, 1)
}

// open lets the queues run, having them take over the slots of other
// servers first with recover.
func (g *gate) open(recover bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.shut.Load() {
		return
	}
	n := g.gen.Add(1)
	if recover {
		g.recoverAt = n
	}
	g.shut.Store(false)
	close(g.opened)
}

// park holds the queue at its gate, its queued replies submitted first,
// until the gate opens. Completions that come meanwhile are left for
// later: the requests stay in their entries (a successor takes them over
// once this process has exited), replies of off-thread requests wait.
func (q *queue) park(fd int) {
	q.flush()
	g := &q.u.gate
	g.mu.Lock()
	if !g.shut.Load() {
		g.mu.Unlock()
		return
	}
	ch := g.opened
	g.parked++
	g.mu.Unlock()
	select {
	case g.note <- struct{}{}:
	default:
	}
	<-ch
	g.mu.Lock()
	g.parked--
	g.mu.Unlock()
}

// opened does what an opening of the gate the queue has not seen yet asks
// of it: take over the slots other servers left (recoverSlots).
func (q *queue) opened(fd int) {
	g := &q.u.gate
	n := g.gen.Load()
	if n == q.seen {
		return
	}
	g.mu.Lock()
	rec := g.recoverAt > q.seen
	g.mu.Unlock()
	q.seen = n
	if rec {
		q.recoverSlots(fd)
	}
}

// flush submits what is queued on the ring (replies), if anything.
func (q *queue) flush() {
	if q.r.pending == 0 {
		return
	}
	if err := q.r.enter(false); err != nil {
		if q.broken == nil {
			q.broken = fmt.Errorf("submit: %w", err)
		}
		return
	}
	q.markSubmitted()
}

// Serve lets the queues serve: Start registers their entries and holds
// them, so that a connection taken over (AdoptURing) is served only once
// the file system has restored its nodes. For such a connection each
// queue first takes over what its predecessor's entries hold (served
// again, or their replies committed, as each slot's state says), and
// every queue is kicked (kick.go), so that a request that waited while no
// server ran is handed out. The predecessor must have exited (its entries
// are free only then). nil-safe.
func (u *URing) Serve() {
	if u != nil {
		u.gate.open(u.adopted)
		u.wakeAll()
		if u.adopted && u.mountpoint != "" {
			kickLater(u.mountpoint, u.log)
		}
	}
}

// wakeAll has every queue turn its loop (and so see its gate).
func (u *URing) wakeAll() {
	for _, q := range u.queues {
		q.wake()
	}
}

// Pause stops the queues at a request boundary, for a successor that may
// serve the connection on (fusefs Server.Suspend and Pause): the request
// each queue is serving is answered, and later ones wait in their entries,
// to be served by this URing after Resume or taken over by a successor
// once this process has exited. It reports whether every queue stopped
// within wait (a request still running then, such as a slow system call,
// is answered when it returns). nil-safe.
func (u *URing) Pause(wait time.Duration) bool {
	if u == nil || !u.active.Load() {
		return true
	}
	g := &u.gate
	g.mu.Lock()
	if !g.shut.Load() {
		g.opened = make(chan struct{})
		g.shut.Store(true)
	}
	g.mu.Unlock()
	u.wakeAll()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		n := g.parked
		g.mu.Unlock()
		if n >= len(u.queues) {
			return true
		}
		select {
		case <-g.note:
		case <-deadline.C:
			return false
		}
	}
}

// Resume undoes Pause. A successor that ran meanwhile and has exited may
// have left requests in its entries: they are taken over as Serve does.
// nil-safe.
func (u *URing) Resume() {
	if u != nil {
		u.gate.open(true)
		u.wakeAll()
	}
}

// isRequest reports whether header h (a slot's kernel header) holds a
// request the kernel copied in, rather than a reply (fuse_out_header's
// error, where a request has its opcode, is never positive) or nothing.
func isRequest(h []byte) bool {
	return binary.LittleEndian.Uint32(h[hdrInOut:]) >= inHeaderSize &&
		int32(binary.LittleEndian.Uint32(h[hdrInOut+4:])) > 0 &&
		binary.LittleEndian.Uint64(h[hdrInOut+8:]) != 0
}

// recoverSlots takes over the queue's slots that other servers of the
// connection left (they have exited: Serve, Resume), as each slot's state
// says: a request the kernel copied in, or one the server had taken
// (served again, marked as a repetition when it may have begun), a reply
// half published (published), a reply made (committed). Replies to
// commit go first: one half published may be in the staging buffer the
// requests served again write to. Slots with nothing in them are freed.
func (q *queue) recoverSlots(fd int) {
	rm := q.u.mem
	var serve []int
	var took, committed int
	for k := range rm.g.PerQueue {
		s := rm.slotOf(q.qid, k)
		md := rm.meta(s)
		o := md.owner()
		if o == 0 || o == q.u.owner {
			continue
		}
		st := md.state()
		req := isRequest(rm.slot(s)[:headerSize])
		if !md.claim(o, q.u.owner) {
			continue
		}
		switch {
		case st == slotHeld || (st == slotArmed || st == slotReplied) && req:
			e := q.entryAt(s)
			e.resend = st == slotHeld
			md.setState(slotHeld)
			serve = append(serve, q.place(e))
		case st == slotPublishing || st == slotReplied:
			e := q.entryAt(s)
			i := q.place(e)
			if st == slotPublishing {
				q.publish(e)
			}
			q.commit(fd, i)
			committed++
		default:
			md.release()
			continue
		}
		q.live++
		took++
	}
	for _, i := range serve {
		q.serve(fd, i)
	}
	if took > 0 {
		q.u.log.Info("fuse transport: requests taken over from the previous server", "queue", q.qid, "served_again", len(serve), "replies_committed", committed)
	}
}
