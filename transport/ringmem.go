package transport

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ring entries' buffers of a connection live in a memfd(2), mapped
// MAP_SHARED at an address that is recorded with the connection
// (RingGeometry.Addr), so that a successor process can take over the
// requests the kernel gave a dead server's entries:
//
//   - The kernel copies a request into an entry's buffers, and reads the
//     reply from them, at the user addresses the entry was registered with,
//     in the address space of whichever process submits the command
//     (fs/fuse/dev_uring.c: ent->headers and ent->payload are __user
//     pointers; a COMMIT_AND_FETCH from any ring finds the request by its
//     commit id and takes the entry over). A successor that maps the same
//     pages at the same address reads the request the kernel delivered to
//     its predecessor and commits the reply where the kernel looks for it.
//   - The memfd is kept in the store beside /dev/fuse and the state
//     (ConnName+".ring"), so the pages outlive the process.
//
// Each buffer is a slot of Chunk bytes: a header page (the kernel's
// struct fuse_uring_req_header in its first headerSize bytes, this
// package's slot metadata at slotMetaOff) and the payload. Queue q's
// entries use slots q*PerQueue ... q*PerQueue+PerQueue-1; slot
// Queues*PerQueue+q is queue q's staging area (a reply whose payload
// would overwrite the request's own, written there first: see
// queue.handle). The memfd is sparse: only pages a request or reply
// touched use memory.
//
// Addresses come from a range (ringAddrBase to ringAddrEnd, per
// architecture: ringaddr_*.go) above where Go's runtime starts its heap
// and below where the kernel places mappings (top down from below the
// stack), taken with MAP_FIXED_NOREPLACE, so that a successor maps its
// predecessor's connections where they were. Since Go 1.26 the heap starts
// at a random address (GOEXPERIMENT randomizedheapbase64, on by default:
// runtime/malloc.go mallocinit, below 2^46 on amd64 and 2^47 elsewhere),
// so the range lies above that bound; an address taken anyway (EEXIST)
// fails the adoption, and the session is mounted again.

const (
	// ringAddrAlign aligns each connection's mapping (2 MiB).
	ringAddrAlign = uintptr(2 << 20)

	// slotMetaOff is where a slot's metadata starts in its header page,
	// past the kernel's header (headerSize bytes).
	slotMetaOff = 2048
	// Slot metadata fields, from slotMetaOff.
	metaState    = 0  // u32: slotFree, slotArmed, ...
	metaOwner    = 8  // u64: the URing that registered the slot's entry
	metaReplyHdr = 16 // [16]byte: the reply's fuse_out_header until published
	metaReplyLen = 32 // u32: the reply's payload bytes
	metaStaged   = 36 // u32: 1 when the reply's payload is in the staging slot
)

// Slot states (metaState). A slot's state says where its request and
// reply are, so that a successor knows what to do with it (recoverSlot).
const (
	// slotFree: no entry of any live server uses the slot.
	slotFree = 0
	// slotArmed: a REGISTER or COMMIT_AND_FETCH naming the slot was
	// submitted; the kernel may copy a request into it at any time.
	slotArmed = 1
	// slotHeld: the server took the request in the slot (its completion
	// was reaped) and may be serving it; the request is intact (the
	// reply is written elsewhere until published).
	slotHeld = 2
	// slotPublishing: the reply is complete (header in metaReplyHdr,
	// payload in the slot or, when metaStaged, in the staging slot) and
	// is being copied into place.
	slotPublishing = 3
	// slotReplied: the reply is in place; its COMMIT_AND_FETCH may not
	// have been submitted.
	slotReplied = 4
)

// RingGeometry describes a connection's ring memory, recorded in its
// state (Meta.Ring) for a successor: the address it is mapped at, the
// queues (possible CPUs) and slots per queue, and the bytes of a slot
// and of its payload.
type RingGeometry struct {
	Addr     uint64 `json:"addr"`
	Queues   int    `json:"queues"`
	PerQueue int    `json:"per_queue"`
	Chunk    int    `json:"chunk"`
	Payload  int    `json:"payload"`
}

// size is the bytes the geometry maps: every queue's slots and staging
// slot.
func (g RingGeometry) size() int { return g.Queues * (g.PerQueue + 1) * g.Chunk }

// ringMem is a connection's ring memory, mapped.
type ringMem struct {
	g   RingGeometry
	fd  int
	mem []byte
}

// newRingMem makes the ring memory of a connection with queues queues and
// payload-byte entries (a multiple of the page size), mapped at a fresh
// address of the ring range.
func newRingMem(queues, payload int) (*ringMem, error) {
	page := os.Getpagesize()
	g := RingGeometry{Queues: queues, PerQueue: maxEntriesPerQueue, Chunk: page + payload, Payload: payload}
	fd, err := unix.MemfdCreate("wsfs-ring", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ring memory: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(g.size())); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ring memory: ftruncate: %w", err)
	}
	rm := &ringMem{g: g, fd: fd}
	if err := rm.mapFresh(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return rm, nil
}

// openRingMem maps the ring memory memfd fd of geometry g at its recorded
// address. fd is the caller's on error. Errors: the geometry does not
// fit the memfd, or the address is taken in this process.
func openRingMem(fd int, g RingGeometry) (*ringMem, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("ring memory: fstat: %w", err)
	}
	if g.Queues <= 0 || g.PerQueue <= 0 || g.Chunk <= headerSize || g.Chunk%os.Getpagesize() != 0 ||
		g.Payload != g.Chunk-os.Getpagesize() || int64(g.size()) != st.Size ||
		uintptr(g.Addr) < ringAddrBase || uintptr(g.Addr)+uintptr(g.size()) > ringAddrEnd {
		return nil, fmt.Errorf("ring memory: geometry %+v does not fit its memfd of %d bytes", g, st.Size)
	}
	mem, err := mapAt(fd, uintptr(g.Addr), g.size())
	if err != nil {
		return nil, fmt.Errorf("ring memory at %#x: %w", g.Addr, err)
	}
	return &ringMem{g: g, fd: fd, mem: mem}, nil
}

var (
	ringAddrMu   sync.Mutex
	ringAddrNext = ringAddrBase
)

// mapFresh maps rm at the first free address of the ring range.
func (rm *ringMem) mapFresh() error {
	ringAddrMu.Lock()
	defer ringAddrMu.Unlock()
	size := uintptr(rm.g.size())
	step := (size + ringAddrAlign - 1) &^ (ringAddrAlign - 1)
	for addr, wrapped := ringAddrNext, false; ; addr += step {
		if addr+size > ringAddrEnd {
			if wrapped {
				return errors.New("ring memory: no free address left in the ring range")
			}
			addr, wrapped = ringAddrBase, true
		}
		mem, err := mapAt(rm.fd, addr, int(size))
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ring memory: mmap: %w", err)
		}
		rm.mem, rm.g.Addr = mem, uint64(addr)
		ringAddrNext = addr + step
		return nil
	}
}

// mapAt maps size bytes of fd at addr exactly, or fails with EEXIST when
// something is mapped there.
func mapAt(fd int, addr uintptr, size int) ([]byte, error) {
	// The address as a pointer (never dereferenced here): a hint the
	// kernel must take exactly.
	hint := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	p, err := unix.MmapPtr(fd, 0, hint, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_SHARED|unix.MAP_FIXED_NOREPLACE|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	if uintptr(p) != addr {
		// A kernel before MAP_FIXED_NOREPLACE (4.17) takes it as a hint.
		unix.MunmapPtr(p, uintptr(size))
		return nil, unix.EEXIST
	}
	return unsafe.Slice((*byte)(p), size), nil
}

// close unmaps rm and closes its memfd (the store keeps its own copy).
func (rm *ringMem) close() {
	if rm.mem != nil {
		unix.MunmapPtr(unsafe.Pointer(&rm.mem[0]), uintptr(len(rm.mem)))
		rm.mem = nil
	}
	if rm.fd >= 0 {
		unix.Close(rm.fd)
		rm.fd = -1
	}
}

// slot returns slot i's bytes.
func (rm *ringMem) slot(i int) []byte {
	return rm.mem[i*rm.g.Chunk : (i+1)*rm.g.Chunk]
}

// slotOf returns the index of queue qid's k-th slot, and stageOf queue
// qid's staging slot.
func (rm *ringMem) slotOf(qid, k int) int { return qid*rm.g.PerQueue + k }
func (rm *ringMem) stageOf(qid int) int   { return rm.g.Queues*rm.g.PerQueue + qid }

// meta is slot metadata: the words at slotMetaOff of a slot's header page,
// shared with every process that maps the ring memory.
type meta []byte

func (rm *ringMem) meta(i int) meta {
	s := rm.slot(i)
	return meta(s[slotMetaOff : slotMetaOff+64])
}

func (m meta) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
func (m meta) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&m[off])) }

func (m meta) state() uint32     { return atomic.LoadUint32(m.u32(metaState)) }
func (m meta) setState(s uint32) { atomic.StoreUint32(m.u32(metaState), s) }
func (m meta) owner() uint64     { return atomic.LoadUint64(m.u64(metaOwner)) }

// claim makes the slot owner's if it was from (0: free), reporting
// whether it did.
func (m meta) claim(from, owner uint64) bool {
	return atomic.CompareAndSwapUint64(m.u64(metaOwner), from, owner)
}

// release frees the slot.
func (m meta) release() {
	m.setState(slotFree)
	atomic.StoreUint64(m.u64(metaOwner), 0)
}

func (m meta) replyHdr() []byte { return m[metaReplyHdr : metaReplyHdr+outHeaderSize] }

// newOwner returns a fresh owner token: nonzero, unique to one URing (a
// server generation of a connection).
func newOwner() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// setReply records the reply's payload length (bytes) and whether its
// payload is in the staging slot; reply reads them back.
func (m meta) setReply(n int, staged bool) {
	atomic.StoreUint32(m.u32(metaReplyLen), uint32(n))
	var s uint32
	if staged {
		s = 1
	}
	atomic.StoreUint32(m.u32(metaStaged), s)
}

func (m meta) reply() (n int, staged bool) {
	return int(atomic.LoadUint32(m.u32(metaReplyLen))), atomic.LoadUint32(m.u32(metaStaged)) == 1
}
