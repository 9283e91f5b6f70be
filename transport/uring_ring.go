package transport

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI this file speaks (include/uapi/linux/io_uring.h):
// io_uring_setup(2), the rings mapped with mmap(2), io_uring_enter(2).
const (
	ioringSetupCoopTaskrun  = 1 << 8
	ioringSetupSQE128       = 1 << 10
	ioringSetupSingleIssuer = 1 << 12

	ioringFeatSingleMmap = 1 << 0

	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringEnterGetevents = 1 << 0

	ioringOpPollAdd  = 6
	ioringOpRead     = 22
	ioringOpURingCmd = 46

	sqeSize = 128 // IORING_SETUP_SQE128
	cqeSize = 16
)

// ioSqringOffsets is struct io_sqring_offsets.
type ioSqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// ioCqringOffsets is struct io_cqring_offsets.
type ioCqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// ioURingParams is struct io_uring_params.
type ioURingParams struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqOff                                                                  ioSqringOffsets
	CqOff                                                                  ioCqringOffsets
}

// sqe is one 128-byte submission entry (IORING_SETUP_SQE128): the
// 64-byte struct io_uring_sqe, whose last 16 bytes begin the 80-byte
// command area of an IORING_OP_URING_CMD.
type sqe struct {
	Opcode      uint8
	Flags       uint8
	Ioprio      uint16
	Fd          int32
	Off         uint64 // cmd_op (u32) and padding for IORING_OP_URING_CMD
	Addr        uint64
	Len         uint32
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	Cmd         [80]byte // addr3, __pad2[0], then the rest of the SQE128
}

// cqe is struct io_uring_cqe (16 bytes, no IORING_SETUP_CQE32).
type cqe struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ring is one io_uring instance, made and used by one OS thread
// (IORING_SETUP_SINGLE_ISSUER, COOP_TASKRUN: a request the kernel gives
// one of its entries is copied in by task work at the thread's next
// return to user space, without an interrupt of its own). Not
// DEFER_TASKRUN, which would run that work only while the thread waits
// in io_uring_enter, and cancel it (the request ended with ECANCELED)
// when the thread dies before: uring_takeover.go.
type ring struct {
	fd      int
	sqMem   []byte
	cqMem   []byte // == sqMem with IORING_FEAT_SINGLE_MMAP
	sqeMem  []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
	pending uint32 // SQEs written, not yet submitted
}

// newRing makes an io_uring with entries submission slots (a power of
// two) and maps its rings. The calling goroutine must stay locked to its
// OS thread for the ring's life.
func newRing(entries uint32) (*ring, error) {
	p := ioURingParams{Flags: ioringSetupSQE128 | ioringSetupSingleIssuer | ioringSetupCoopTaskrun}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *ioURingParams) error {
	sqSize := int(p.SqOff.Array + p.SqEntries*4)
	cqSize := int(p.CqOff.Cqes + p.CqEntries*cqeSize)
	single := p.Features&ioringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap of the submission ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap of the completion ring: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.SqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap of the submission entries: %w", err)
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.sqMem, p.SqOff.Head)
	r.sqTail = u32(r.sqMem, p.SqOff.Tail)
	r.sqMask = *u32(r.sqMem, p.SqOff.RingMask)
	r.sqArray = unsafe.Slice(u32(r.sqMem, p.SqOff.Array), p.SqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.SqEntries)
	r.cqHead = u32(r.cqMem, p.CqOff.Head)
	r.cqTail = u32(r.cqMem, p.CqOff.Tail)
	r.cqMask = *u32(r.cqMem, p.CqOff.RingMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.CqOff.Cqes])), p.CqEntries)
	return nil
}

// getSQE returns a cleared submission entry to fill and its position in
// the submission ring (the kernel has consumed it once the ring's head
// is past it: consumed), or nil and the position the next entry will
// take when the submission ring is full (the caller submits first).
func (r *ring) getSQE() (*sqe, uint32) {
	head := atomic.LoadUint32(r.sqHead)
	tail := *r.sqTail + r.pending
	if tail-head >= uint32(len(r.sqes)) {
		return nil, tail
	}
	idx := tail & r.sqMask
	s := &r.sqes[idx]
	*s = sqe{}
	r.sqArray[idx] = idx
	r.pending++
	return s, tail
}

// consumed reports whether the kernel has taken the submission entry at
// position seq (getSQE) from the ring.
func (r *ring) consumed(seq uint32) bool {
	return int32(seq-atomic.LoadUint32(r.sqHead)) < 0
}

// enter publishes the pending submission entries and, with wait, blocks
// until at least one completion is posted. EINTR (a signal to the thread,
// Go's preemption among them) returns early with no error.
func (r *ring) enter(wait bool) error {
	if r.pending > 0 {
		atomic.StoreUint32(r.sqTail, *r.sqTail+r.pending)
		r.pending = 0
	}
	var flags, minComplete uintptr
	if wait {
		flags, minComplete = ioringEnterGetevents, 1
	}
	for {
		// Entries published and not yet consumed by the kernel.
		n := *r.sqTail - atomic.LoadUint32(r.sqHead)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), minComplete, flags, 0, 0)
		switch errno {
		case 0:
			if wait || *r.sqTail == atomic.LoadUint32(r.sqHead) {
				return nil
			}
			continue
		case unix.EINTR:
			if n == 0 {
				return nil
			}
			continue
		}
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
}

// poll runs the ring's pending task work (a request the kernel gave an
// entry and has not yet copied in) and posts its completions, without
// submitting anything or waiting.
func (r *ring) poll() error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 0, ioringEnterGetevents, 0, 0)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
}

// reap calls f for each posted completion and marks them seen.
func (r *ring) reap(f func(c cqe)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		f(r.cqes[head&r.cqMask])
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && &r.cqMem[0] != &r.sqMem[0] {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	unix.Close(r.fd)
}
