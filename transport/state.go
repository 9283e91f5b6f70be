package transport

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The state of one FUSE connection that a successor process needs in order to
// serve it on (DESIGN.md, "Round 4": state a successor can trust). It lives
// in a memfd(2) kept beside the connection's /dev/fuse descriptor by the
// holder or systemd's file descriptor store, so it outlives the serving
// process but not the machine; nothing is fsynced.
//
// Layout: a header of metaSize bytes (magic, version, the JSON of Meta),
// the intent ring (intentSlots request numbers, see Intend), then from
// stateHeaderSize an append-only log of records, each
//
//	u32 length of body | u32 CRC-32C of body | body (u8 kind, fields)
//
// A record is written with one pwrite(2) under a mutex, so a process killed
// mid-append leaves at most the last record torn: Replay stops at the first
// record whose length or CRC does not hold, which is always the end.

// stateMagic and StateVersion identify the format. A reader refuses any
// other version with ErrStateVersion: a successor that cannot read the
// state falls back to a fresh mount rather than guess.
const (
	stateMagic = "WSFSCONN"
	// StateVersion is the version of the state format this build writes
	// for a connection on the ring (Meta.Ring); it writes and reads
	// stateVersionDev, the same format, for the others. A build that
	// knows only stateVersionDev refuses a connection on the ring, which
	// it could not serve (its requests come only through the ring), and
	// mounts its session again.
	StateVersion    = 2
	stateVersionDev = 1
	stateHeaderSize = 64 << 10
	metaSize        = 32 << 10
	// intentSlots is the size of the intent ring: more than the requests
	// the kernel lets a connection have in flight at once (max_background
	// and the synchronous ones), so an intent is overwritten only long
	// after its request was answered.
	intentSlots = (stateHeaderSize - metaSize) / 8
)

var (
	// ErrStateVersion is returned by OpenState for state written in
	// another format version.
	ErrStateVersion = errors.New("connection state: another format version")
	// ErrStateCorrupt is returned by OpenState for a header that does not
	// parse.
	ErrStateCorrupt = errors.New("connection state: corrupt header")
)

// Meta describes a connection: what it serves and how it was initialized.
// Kind and Key are the caller's (fusefs: "mount" or "hostview"; the
// mountpoint); Init and InitOut are the kernel's INIT request and the reply
// given to it, which fuse.NewServerOnFD needs.
type Meta struct {
	Kind       string       `json:"kind"`
	Mountpoint string       `json:"mountpoint"`
	Root       string       `json:"root"`
	Session    string       `json:"session,omitempty"`
	Init       fuse.InitIn  `json:"init"`
	InitOut    fuse.InitOut `json:"init_out"`
	// RootMountID is the mount ID (name_to_handle_at(2)) of the root's
	// mount: file handles recorded with it open relative to the root.
	RootMountID int `json:"root_mount_id"`
	// Ring is the ring memory of a connection served over FUSE over
	// io_uring (kept beside it as ConnName+".ring"), nil on /dev/fuse.
	Ring *RingGeometry `json:"ring,omitempty"`
}

// Record kinds.
const (
	recNode    = 1 // a node the kernel may refer to
	recGone    = 2 // a node the kernel has forgotten
	recOpen    = 3 // an open file handle
	recRelease = 4 // a released file handle
	recBacking = 5 // a node's passthrough backing ID
	recIno     = 6 // an allocated inode number for (dev, ino)
	recCount   = 7 // a change of the kernel's lookup count of a node ID
	recLock    = 8 // a lock set (or cleared) through an open file handle
)

// Node is a node the kernel refers to by its node ID (== Ino): the file
// handle that finds its object again (name_to_handle_at(2): Type, Handle,
// on the mount MountID) and its physical path when it was looked up.
type Node struct {
	Ino     uint64
	Mode    uint32 // S_IFMT bits
	MountID int
	Type    int32
	Handle  []byte
	Path    string
	Backing int32 // passthrough backing ID, 0 for none
	// Lookups is the kernel's lookup count of the node ID (the sum of
	// the State.Count deltas), 0 when it is not known (a state written
	// before counts were recorded).
	Lookups uint64
}

// File is an open file handle the kernel holds: its number, its node, the
// open(2) flags it was opened with, and whether it is a directory handle.
type File struct {
	Fh    uint32
	Ino   uint64
	Flags uint32
	Dir   bool
	// Locks are the lock requests granted through the handle, in order
	// (State.Lock): set again in this order on the reopened descriptor,
	// they give it the locks the predecessor's had. Requests made moot by
	// a later unlock of the whole file are dropped.
	Locks []Lock
}

// Lock is one lock request granted through a file handle (FUSE_SETLK or
// FUSE_SETLKW): a flock(2) lock (Flock: the whole file, Typ F_RDLCK,
// F_WRLCK or F_UNLCK for LOCK_SH, LOCK_EX, LOCK_UN) or a byte-range lock
// on the handle's open file description (fcntl(2) F_OFD_SETLK; Start and
// End inclusive, End LockEOF for "to the end of the file").
type Lock struct {
	Flock      bool
	Typ        uint32
	Start, End uint64
}

// LockEOF is the End of a lock that extends to the end of the file
// (OFFSET_MAX, as FUSE sends it).
const LockEOF = 1<<63 - 1

// whole reports whether l unlocks everything of its kind that the handle
// holds.
func (l Lock) whole() bool {
	return l.Typ == unix.F_UNLCK && (l.Flock || l.Start == 0 && l.End >= LockEOF)
}

// InoAlloc is an inode number a mount allocated for an object on another
// device (DESIGN.md, "Host view": one-to-one numbers).
type InoAlloc struct {
	Dev, Ino, Alloc uint64
}

// Live is what Replay finds: the nodes and handles the kernel may still
// refer to, and the allocated numbers.
type Live struct {
	Nodes map[uint64]*Node
	Files map[uint32]*File
	Inos  []InoAlloc
	// Intended are the requests (by unique number) the predecessor had
	// begun (State.Intend), from its intent ring, true for those it
	// carried out with success (State.Done) but maybe did not answer.
	Intended map[uint64]bool
}

// State is a connection's state file, open for appending. Its methods are
// safe for concurrent use. A nil *State records nothing (a mount whose state
// is not kept).
type State struct {
	// fd is the memfd, -1 once closed (CloseFd): then the mapping
	// holds the file and a call that needs a descriptor opens one from it
	// (reopen). See CloseFd.
	fd  int
	mu  sync.Mutex
	off int64
	buf []byte
	// mem maps the file (MAP_SHARED) up to its size, so that a record is
	// appended with a copy, no system call: the pages are the memfd's, so
	// what is copied is in the state the moment the copy ends, whatever
	// happens to this process after.
	mem []byte
	// compactor, compactAt, compacting and compactions are the live
	// compaction's (compact.go).
	compactor   func(fd int) error
	compactAt   int64
	compacting  bool
	compactions int
	compactWG   sync.WaitGroup // a compaction running
}

// stateGrow is the least the state's file and mapping grow by.
const stateGrow = 1 << 20

// NewState creates the state memfd for a connection with meta m.
func NewState(m Meta) (*State, error) {
	fd, err := unix.MemfdCreate("wsfs-conn", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("connection state: memfd_create: %w", err)
	}
	s := &State{fd: fd, off: stateHeaderSize}
	if err := s.writeHeader(m); err != nil {
		unix.Close(fd)
		return nil, err
	}
	s.mu.Lock()
	s.grow(0)
	s.mu.Unlock()
	return s, nil
}

// Intend records that the request with unique number unique (the FUSE
// header's) is about to change the file system: a successor that is sent it
// again (FUSE_NOTIFY_RESEND) knows it may have been carried out already
// (Live.Intended). One 8-byte store into the mapped intent ring; no system
// call.
func (s *State) Intend(unique uint64) {
	if s == nil || unique == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mem) < stateHeaderSize {
		return
	}
	off := metaSize + int(unique%intentSlots)*8
	binary.LittleEndian.PutUint64(s.mem[off:off+8], unique)
}

// intentDone marks an intent whose request succeeded.
const intentDone = 1 << 62

// Done records that the request Intend named succeeded, before it is
// answered: only such a request, sent again to a successor, may have its
// "already done" result answered as the success it was (Live.Intended).
// A request killed between its system call and Done is answered as its
// repetition turns out, never as a success it may not have had.
func (s *State) Done(unique uint64) {
	if s == nil || unique == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mem) < stateHeaderSize {
		return
	}
	off := metaSize + int(unique%intentSlots)*8
	if binary.LittleEndian.Uint64(s.mem[off:off+8]) == unique {
		binary.LittleEndian.PutUint64(s.mem[off:off+8], unique|intentDone)
	}
}

func (s *State) writeHeader(m Meta) error {
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(js) > metaSize-16 {
		return fmt.Errorf("connection state: meta of %d bytes exceeds %d", len(js), metaSize-16)
	}
	hdr := make([]byte, 16+len(js))
	copy(hdr, stateMagic)
	v := uint32(stateVersionDev)
	if m.Ring != nil {
		v = StateVersion
	}
	binary.LittleEndian.PutUint32(hdr[8:], v)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(js)))
	copy(hdr[16:], js)
	if _, err := unix.Pwrite(s.fd, hdr, 0); err != nil {
		return fmt.Errorf("connection state: write header: %w", err)
	}
	return nil
}

// Fd returns the memfd, for the descriptor store. It stays owned by s. A
// state whose descriptor was closed (CloseFd) opens it again from its mapping (and keeps it); -1 when
// that fails.
func (s *State) Fd() int {
	if s == nil {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		s.fd, _ = s.reopen()
	}
	return s.fd
}

// CloseFd closes the memfd in this process once the descriptor store holds
// a copy, so that an idle kept connection costs its serving process no
// descriptor for its state (issue 22): the shared mapping keeps the file,
// and records go on being copied into it. Growing the file, a record
// written when the mapping cannot grow, and replay open a descriptor from
// the mapping for the call (/proc/self/map_files, which needs
// CAP_SYS_ADMIN: a kept connection is root's anyway). A state with no
// mapping keeps its descriptor.
func (s *State) CloseFd() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 && len(s.mem) > 0 {
		if fd, err := s.reopen(); err == nil { // only when it can come back
			unix.Close(fd)
			unix.Close(s.fd)
			s.fd = -1
		}
	}
}

// reopen opens the memfd again from s.mem (s.mu held), read-write; the
// caller closes it. With the descriptor still open, a duplicate.
func (s *State) reopen() (int, error) {
	if s.fd >= 0 {
		return unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	}
	if len(s.mem) == 0 {
		return -1, errors.New("connection state: released with no mapping")
	}
	start := uintptr(unsafe.Pointer(&s.mem[0]))
	return unix.Open(fmt.Sprintf("/proc/self/map_files/%x-%x", start, start+uintptr(len(s.mem))), unix.O_RDWR|unix.O_CLOEXEC, 0)
}

// withFd runs f with a descriptor of the memfd (s.mu held): s.fd, or one
// opened from the mapping for the call.
func (s *State) withFd(f func(fd int) error) error {
	if s.fd >= 0 {
		return f(s.fd)
	}
	fd, err := s.reopen()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd)
}

// Close closes the memfd (the store keeps its own copy).
func (s *State) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
	fd := s.fd
	s.fd = -1
	s.mu.Unlock()
	if fd < 0 {
		return nil
	}
	return unix.Close(fd)
}

// OpenState reads the header of a state memfd received from the store and
// returns its meta and the state, open for appending after the records
// already there. fd is owned by the returned State (closed on error).
func OpenState(fd int) (*State, Meta, *Live, error) {
	var m Meta
	hdr := make([]byte, 16)
	if n, err := unix.Pread(fd, hdr, 0); err != nil || n != len(hdr) {
		unix.Close(fd)
		return nil, m, nil, ErrStateCorrupt
	}
	if string(hdr[:8]) != stateMagic {
		unix.Close(fd)
		return nil, m, nil, ErrStateCorrupt
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != StateVersion && v != stateVersionDev {
		unix.Close(fd)
		return nil, m, nil, fmt.Errorf("%w (%d, this build reads %d and %d)", ErrStateVersion, v, stateVersionDev, StateVersion)
	}
	n := binary.LittleEndian.Uint32(hdr[12:])
	if n > metaSize-16 {
		unix.Close(fd)
		return nil, m, nil, ErrStateCorrupt
	}
	js := make([]byte, n)
	if got, err := unix.Pread(fd, js, 16); err != nil || got != int(n) || json.Unmarshal(js, &m) != nil {
		unix.Close(fd)
		return nil, m, nil, ErrStateCorrupt
	}
	s := &State{fd: fd}
	live, end, err := s.replay()
	if err != nil {
		unix.Close(fd)
		return nil, m, nil, err
	}
	s.off = end
	return s, m, live, nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// append writes one record of kind k with body fields.
func (s *State) append(k byte, fields ...any) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := append(s.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0, k)
	for _, f := range fields {
		switch v := f.(type) {
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case bool:
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case []byte:
			b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
			b = append(b, v...)
		case string:
			b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
			b = append(b, v...)
		}
	}
	body := b[8:]
	binary.LittleEndian.PutUint32(b[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(body, crcTable))
	// A failed write loses recoverability of this one object, never
	// correctness of the running server; there is nothing better to do.
	if s.off+int64(len(b)) > int64(len(s.mem)) && !s.grow(int64(len(b))) {
		s.withFd(func(fd int) error {
			n, err := unix.Pwrite(fd, b, s.off)
			if err == nil {
				s.off += int64(n)
			}
			return err
		})
	} else {
		s.off += int64(copy(s.mem[s.off:], b))
	}
	s.buf = b
	s.maybeCompact()
}

// grow makes the file and its mapping at least need bytes longer than
// the records written; s.mu held. False when it cannot (then records are
// written with pwrite(2)).
func (s *State) grow(need int64) bool {
	size := max(2*int64(len(s.mem)), s.off+need+stateGrow)
	var mem []byte
	err := s.withFd(func(fd int) error {
		if err := unix.Ftruncate(fd, size); err != nil {
			return err
		}
		var err error
		mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return false
	}
	if s.mem != nil {
		unix.Munmap(s.mem)
	}
	s.mem = mem
	return true
}

// AddNode records n as known to the kernel.
func (s *State) AddNode(n *Node) {
	s.append(recNode, n.Ino, n.Mode, uint64(n.MountID), n.Type, n.Handle, n.Path)
}

// Forget records that the kernel forgot node ino (states without lookup
// counts; with them, a count that reaches zero says so).
func (s *State) Forget(ino uint64) { s.append(recGone, ino) }

// Count records a change of the kernel's lookup count of node ino: +1
// before each reply that gives the kernel a reference to it, -nlookup for
// each FORGET (go-fuse's fs.Options.OnLookupCount). A node whose counts
// sum to zero or less is forgotten.
func (s *State) Count(ino uint64, delta int64) { s.append(recCount, ino, uint64(delta)) }

// Lock records a lock request granted through open file handle fh.
func (s *State) Lock(fh uint32, l Lock) {
	s.append(recLock, fh, l.Flock, l.Typ, l.Start, l.End)
}

// SetBacking records node ino's passthrough backing ID.
func (s *State) SetBacking(ino uint64, id int32) { s.append(recBacking, ino, id) }

// Open records an open file handle.
func (s *State) Open(f File) { s.append(recOpen, f.Fh, f.Ino, f.Flags, f.Dir) }

// Release records that file handle fh was released.
func (s *State) Release(fh uint32) { s.append(recRelease, fh) }

// AllocIno records an allocated inode number.
func (s *State) AllocIno(a InoAlloc) { s.append(recIno, a.Dev, a.Ino, a.Alloc) }

// Size returns the bytes the state occupies.
func (s *State) Size() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off
}

// replay reads every record after the header and returns the live set and
// the offset after the last whole record.
func (s *State) replay() (*Live, int64, error) {
	if s.fd < 0 {
		fd, err := s.reopen()
		if err != nil {
			return nil, 0, err
		}
		defer unix.Close(fd)
		r := &State{fd: fd}
		return r.replay()
	}
	live := &Live{Nodes: map[uint64]*Node{}, Files: map[uint32]*File{}, Intended: map[uint64]bool{}}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return nil, 0, err
	}
	ring := make([]byte, stateHeaderSize-metaSize)
	if n, _ := unix.Pread(s.fd, ring, metaSize); n == len(ring) {
		for i := 0; i+8 <= len(ring); i += 8 {
			if u := binary.LittleEndian.Uint64(ring[i:]); u != 0 {
				live.Intended[u&^intentDone] = u&intentDone != 0
			}
		}
	}
	data := make([]byte, max(st.Size-stateHeaderSize, 0))
	if len(data) > 0 {
		if n, err := unix.Pread(s.fd, data, stateHeaderSize); err != nil || n != len(data) {
			return nil, 0, fmt.Errorf("connection state: read log: %v", err)
		}
	}
	// The lookup counts by node ID, summed over the whole log: a count
	// may come before the node's record (the reply that names a new node
	// counts it first).
	var counts map[uint64]int64
	off := 0
	for off+8 <= len(data) {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n == 0 || off+8+n > len(data) || crc32.Checksum(data[off+8:off+8+n], crcTable) != sum {
			break // a torn last record: the end
		}
		r := reader{b: data[off+9 : off+8+n]}
		switch data[off+8] {
		case recNode:
			nd := &Node{Ino: r.u64(), Mode: r.u32(), MountID: int(r.u64()), Type: int32(r.u32()), Handle: r.bytes(), Path: string(r.bytes())}
			if old := live.Nodes[nd.Ino]; old != nil && old.Backing != 0 && sameHandle(old, nd) {
				nd.Backing = old.Backing
			}
			live.Nodes[nd.Ino] = nd
		case recGone:
			delete(live.Nodes, r.u64())
		case recBacking:
			ino, id := r.u64(), int32(r.u32())
			if nd := live.Nodes[ino]; nd != nil {
				nd.Backing = id
			}
		case recOpen:
			f := &File{Fh: r.u32(), Ino: r.u64(), Flags: r.u32(), Dir: r.bool()}
			live.Files[f.Fh] = f
		case recRelease:
			delete(live.Files, r.u32())
		case recLock:
			fh, l := r.u32(), Lock{Flock: r.bool(), Typ: r.u32(), Start: r.u64(), End: r.u64()}
			if f := live.Files[fh]; f != nil && !r.short {
				if l.whole() {
					kept := f.Locks[:0]
					for _, o := range f.Locks {
						if o.Flock != l.Flock {
							kept = append(kept, o)
						}
					}
					f.Locks = kept
				} else {
					f.Locks = append(f.Locks, l)
				}
			}
		case recIno:
			live.Inos = append(live.Inos, InoAlloc{Dev: r.u64(), Ino: r.u64(), Alloc: r.u64()})
		case recCount:
			ino, d := r.u64(), int64(r.u64())
			if counts == nil {
				counts = map[uint64]int64{}
			}
			counts[ino] += d
		}
		if r.short {
			break
		}
		off += 8 + n
	}
	for ino, nd := range live.Nodes {
		c, ok := counts[ino]
		switch {
		case !ok: // not known: recorded before counts were
		case c > 0:
			nd.Lookups = uint64(c)
		default:
			delete(live.Nodes, ino)
		}
	}
	return live, stateHeaderSize + int64(off), nil
}

func sameHandle(a, b *Node) bool {
	return a.MountID == b.MountID && a.Type == b.Type && string(a.Handle) == string(b.Handle)
}

// Compact rewrites the state as its header and the live set only (a new
// memfd), returning it; s is left as it was. Callers replace s with the
// result in the descriptor store.
func (s *State) Compact(m Meta) (*State, error) {
	s.mu.Lock()
	live, _, err := s.replay()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ns, err := NewState(m)
	if err != nil {
		return nil, err
	}
	ns.WriteLive(live)
	return ns, nil
}

// WriteLive appends every record of live.
func (s *State) WriteLive(live *Live) {
	for _, a := range live.Inos {
		s.AllocIno(a)
	}
	for _, n := range live.Nodes {
		s.AddNode(n)
		if n.Backing != 0 {
			s.SetBacking(n.Ino, n.Backing)
		}
		if n.Lookups != 0 {
			s.Count(n.Ino, int64(n.Lookups))
		}
	}
	for _, f := range live.Files {
		s.Open(*f)
		for _, l := range f.Locks {
			s.Lock(f.Fh, l)
		}
	}
}

type reader struct {
	b     []byte
	short bool
}

func (r *reader) take(n int) []byte {
	if len(r.b) < n {
		r.short = true
		r.b = nil
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) bool() bool  { return r.take(1)[0] != 0 }
func (r *reader) bytes() []byte {
	n := int(binary.LittleEndian.Uint16(r.take(2)))
	return append([]byte(nil), r.take(n)...)
}

// FileHandle returns the file handle of the object fd names
// (name_to_handle_at(2) with AT_EMPTY_PATH) and its mount ID.
func FileHandle(fd int) (typ int32, handle []byte, mountID int, err error) {
	h, mnt, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return 0, nil, 0, err
	}
	return h.Type(), h.Bytes(), mnt, nil
}

// OpenHandle opens the object of a recorded file handle with flags
// (open_by_handle_at(2); needs CAP_DAC_READ_SEARCH) relative to mountFd, a
// descriptor on the mount the handle was taken on. A handle whose object
// is gone, or whose inode number now names another object (the file
// system's generation differs), fails with ESTALE.
func OpenHandle(mountFd int, typ int32, handle []byte, flags int) (int, error) {
	return unix.OpenByHandleAt(mountFd, unix.NewFileHandle(typ, handle), flags)
}

// Conn is a connection taken from a Store: its /dev/fuse descriptor, its
// state (open for appending), what the state says it is, the nodes and
// handles the kernel may still refer to, and for a connection on the ring
// (Meta.Ring) its ring memory's memfd (-1 otherwise; AdoptURing takes it).
type Conn struct {
	Name  string
	Fuse  int
	State *State
	Meta  Meta
	Live  *Live
	Ring  int
}

// Close closes the connection's descriptors in this process (the store
// keeps its own).
func (c *Conn) Close() {
	if c.Fuse >= 0 {
		unix.Close(c.Fuse)
		c.Fuse = -1
	}
	c.State.Close()
	if c.Ring >= 0 {
		unix.Close(c.Ring)
		c.Ring = -1
	}
}

// ConnName is the store name prefix for the connection mounted at
// mountpoint; its descriptors are stored as ConnName+".fuse",
// ConnName+".state" and, on the ring, ConnName+".ring".
func ConnName(mountpoint string) string {
	sum := sha256.Sum256([]byte(mountpoint))
	return "wsfs-" + hex.EncodeToString(sum[:12])
}

// Keep stores a connection's descriptors under ConnName(m.Mountpoint):
// its /dev/fuse descriptor, its state and, for a connection on the ring,
// its ring memory (ringFd; -1 for none).
func Keep(st Store, fuseFd int, s *State, mountpoint string, ringFd int) error {
	name := ConnName(mountpoint)
	if ringFd >= 0 {
		if err := st.Put(name+".ring", ringFd); err != nil {
			return err
		}
	}
	if err := st.Put(name+".state", s.Fd()); err != nil {
		st.Remove(name + ".ring")
		return err
	}
	if err := st.Put(name+".fuse", fuseFd); err != nil {
		st.Remove(name + ".state")
		st.Remove(name + ".ring")
		return err
	}
	s.CloseFd() // the store holds it now
	return nil
}

// Forget removes a connection from the store: once no process holds its
// /dev/fuse descriptor any more, the kernel ends it (ENOTCONN).
func Forget(st Store, mountpoint string) error {
	return ForgetName(st, ConnName(mountpoint))
}

// ForgetName is Forget for the connection stored as name (ConnName).
func ForgetName(st Store, name string) error {
	err1 := st.Remove(name + ".fuse")
	err2 := st.Remove(name + ".state")
	err3 := st.Remove(name + ".ring")
	return errors.Join(err1, err2, err3)
}

// TakeConns takes every connection kept in st, keyed by mountpoint. A
// connection whose state cannot be read (another format version, a
// corrupt header, a missing part) is not returned: it is named in bad, by
// store name, with the reason, and its descriptors are closed here (the
// caller decides whether to Forget it).
func TakeConns(st Store) (conns map[string]*Conn, bad map[string]error, err error) {
	fds, err := st.Take()
	if err != nil {
		return nil, nil, err
	}
	conns, bad = map[string]*Conn{}, map[string]error{}
	for name, fd := range fds {
		base, ok := strings.CutSuffix(name, ".fuse")
		if !ok {
			continue
		}
		ring := -1
		if rfd, ok := fds[base+".ring"]; ok {
			ring = rfd
			delete(fds, base+".ring")
		}
		fail := func(why error) {
			unix.Close(fd)
			if ring >= 0 {
				unix.Close(ring)
			}
			bad[base] = why
		}
		sfd, ok := fds[base+".state"]
		if !ok {
			fail(errors.New("no state kept beside the connection"))
			continue
		}
		delete(fds, base+".state")
		s, meta, live, err := OpenState(sfd)
		if err != nil {
			fail(err)
			continue
		}
		if (meta.Ring != nil) != (ring >= 0) {
			s.Close()
			fail(errors.New("a connection on the ring kept without its ring memory, or ring memory without a ring"))
			continue
		}
		conns[meta.Mountpoint] = &Conn{Name: base, Fuse: fd, State: s, Meta: meta, Live: live, Ring: ring}
	}
	for name, fd := range fds {
		switch {
		case strings.HasSuffix(name, ".state"):
			unix.Close(fd)
			bad[strings.TrimSuffix(name, ".state")] = errors.New("a state with no connection")
		case strings.HasSuffix(name, ".ring"):
			unix.Close(fd)
			bad[strings.TrimSuffix(name, ".ring")] = errors.New("ring memory with no connection")
		case !strings.HasSuffix(name, ".fuse"):
			unix.Close(fd) // not a connection's (the API's listener: TakeNamed)
		}
	}
	return conns, bad, nil
}
