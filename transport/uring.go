package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Mode selects how a FUSE connection's requests reach the server: the
// value of `--fuse-transport` on `wsfs mount`, `serve` and `csi`.
type Mode string

const (
	// Auto serves over io_uring when the kernel offers it (the fuse
	// module's enable_uring parameter is Y and INIT's flags carry
	// FUSE_OVER_IO_URING), otherwise reads /dev/fuse; the choice is
	// logged once per process and reason.
	Auto Mode = "auto"
	// IOURing requires FUSE over io_uring: a mount fails when the
	// kernel's parameter is off. A registration that fails after the
	// mount leaves it on /dev/fuse (logged), never half-served.
	IOURing Mode = "io-uring"
	// Dev reads every request from /dev/fuse (go-fuse's classic loop).
	Dev Mode = "dev"
)

// UniqueResend is the bit of a request's unique that marks it sent again
// (include/uapi/linux/fuse.h FUSE_UNIQUE_RESEND): the kernel sets it on
// /dev/fuse after FUSE_NOTIFY_RESEND, and a server taking over a ring entry
// its predecessor may have begun serves the request with it
// (recoverSlots).
const UniqueResend = 1 << 63

// TestModeEnv names the environment variable that gives the mode when a
// caller leaves it empty (Resolve): the test suites run under either
// transport with it (WSFS_TEST_FUSE_TRANSPORT=io-uring go test ./fusefs/).
const TestModeEnv = "WSFS_TEST_FUSE_TRANSPORT"

// URingParameter is the fuse module parameter that lets FUSE servers use
// io_uring (fs/fuse/dev_uring.c, Linux >= 6.14; default N). wsfs reads it
// and never writes it: `options fuse enable_uring=1` in
// /etc/modprobe.d/ sets it at boot, `echo 1 >` this file at run time.
const URingParameter = "/sys/module/fuse/parameters/enable_uring"

// ParseMode parses a --fuse-transport value: "auto", "io-uring" or "dev".
// Errors name the value and the accepted ones.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, IOURing, Dev:
		return m, nil
	}
	return "", fmt.Errorf("fuse transport %q: must be auto, io-uring or dev", s)
}

// Resolve returns m, or for the empty Mode the value of TestModeEnv when
// set (an invalid value there is an error naming it), else Auto.
func Resolve(m Mode) (Mode, error) {
	if m != "" {
		return ParseMode(string(m))
	}
	if v := os.Getenv(TestModeEnv); v != "" {
		mm, err := ParseMode(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", TestModeEnv, err)
		}
		return mm, nil
	}
	return Auto, nil
}

// KernelURing reads URingParameter: present is false when the kernel has
// no FUSE over io_uring (the file is missing), enabled whether it is Y.
func KernelURing() (present, enabled bool) {
	b, err := os.ReadFile(URingParameter)
	if err != nil {
		return false, false
	}
	return true, strings.TrimSpace(string(b)) == "Y"
}

// Names of the transports, as logged and reported (Conn.Transport).
const (
	NameDev   = "/dev/fuse"
	NameURing = "io-uring"
)

// Ring-side constants (include/uapi/linux/fuse.h, fs/fuse/dev_uring.c).
const (
	uringCmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	uringCmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128], op_in[128], then
	// struct fuse_uring_ent_in_out {flags, commit_id u64; payload_sz,
	// padding u32; reserved u64}.
	hdrInOut     = 0
	hdrOpIn      = 128
	hdrEntInOut  = 256
	hdrCommitID  = hdrEntInOut + 8
	hdrPayloadSz = hdrEntInOut + 16
	headerSize   = 288

	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header
	opSetlkw      = 33 // FUSE_SETLKW

	// entriesPerQueue ring entries are registered on each queue at
	// Start: one request is served at a time per queue (inline, on the
	// queue's thread), the others wait in their entries. A SETLKW, which
	// may wait for another process's unlock for as long as it likes, is
	// served off the thread and keeps its entry meanwhile (the ring has
	// no way to give an entry back without the reply), so the queue
	// registers one more entry in its place: the entries free for other
	// requests stay at entriesPerQueue whatever the number of lock
	// waiters, up to maxEntriesPerQueue. Entries are never unregistered
	// (the ABI has no command for it): a queue keeps the most it needed.
	entriesPerQueue = 8

	// maxEntriesPerQueue bounds a queue's entries (its lock waiters
	// beyond entriesPerQueue): each holds a payload mapping of the
	// connection's largest request (about 1 MiB of address space, the
	// pages touched only by what the kernel copies in). Past it, lock
	// waiters hold entries without replacement, as with a fixed depth.
	maxEntriesPerQueue = entriesPerQueue + 1024

	userDataWake     = 1 << 62 // the eventfd read that wakes a queue
	userDataFallback = 1 << 61 // the REGISTER that turns the ring off
	userDataGuard    = 1 << 60 // the poll that guards the entries at exit (armGuard)
)

// MaxRingThreads bounds the queue threads of all of a process's rings
// (one per possible CPU per mount): a daemon serving thousands of mounts
// would otherwise run into Go's limit of 10000 OS threads
// (runtime/debug.SetMaxThreads). A mount that would pass it is served on
// /dev/fuse (logged once), whatever the mode.
const MaxRingThreads = 1024

var ringThreads atomic.Int64

// URing is FUSE over io_uring for one connection: one queue per possible
// CPU (the kernel puts a request on the queue of the CPU its caller runs
// on and uses the ring only once every queue has an entry registered),
// each served by a goroutine locked to an OS thread pinned to that CPU,
// which handles requests inline through go-fuse's Server.HandleRequest
// (the Server of the /dev/fuse connection: same settings, same in-flight
// table, so INTERRUPTs read from /dev/fuse reach ring requests). FORGET,
// INTERRUPT and notifications stay on /dev/fuse, which go-fuse's Serve
// loop keeps reading.
//
// Life: NewURing before the mount makes the rings (so a process that
// cannot have them never asks for the feature), Capabilities go into
// the INIT reply, Start after INIT registers the entries; the queues
// end when the connection does.
type URing struct {
	log     *slog.Logger
	queues  []*queue
	payload int
	served  atomic.Uint64
	active  atomic.Bool
	devFd   int
	wg      sync.WaitGroup
	// released is closed once the queues' descriptor of the connection
	// and the ring memory are given back (made by Start; nil before).
	released chan struct{}
	// mem holds every entry's buffers (ringmem.go); owner marks the
	// slots this URing registered.
	mem   *ringMem
	owner uint64
	// adopted says the connection was served before (its ring memory
	// taken from a predecessor): Serve recovers the requests the
	// predecessor's entries hold and kicks every queue.
	adopted bool
	// gate holds the queues between Start and Serve, and while paused
	// (Pause, Resume).
	gate gate
	// mountpoint is the connection's (Start), which the kick after a
	// takeover reaches it by.
	mountpoint string
	// conn names the connection in fusectl (/sys/fs/fuse/connections),
	// found at Start; "" when unknown.
	conn string
	// rebuilt counts the queues rebuilt after their ring failed, ended
	// whether a queue that could not be rebuilt ended the connection.
	rebuilt atomic.Uint64
	ended   atomic.Bool
	// failQueue, when >= 0, makes that queue report a registration
	// failure without registering (tests: the ring turned off by
	// turnOff while the other queues hold entries).
	failQueue int
}

// adoptFailQueue is FailAdoptedQueueForTest's queue plus one (0: none).
var adoptFailQueue atomic.Int32

// FailAdoptedQueueForTest makes queue qid of every URing AdoptURing makes
// from now on report a registration failure without registering, as a
// kernel that refused it would; a negative qid ends that. For tests only
// (fusefs: a takeover whose ring cannot be served).
func FailAdoptedQueueForTest(qid int) {
	adoptFailQueue.Store(int32(max(qid, -1) + 1))
}

var logOnce sync.Map // reason -> *sync.Once

// logChoice logs msg once per process for each distinct msg.
func logChoice(log *slog.Logger, msg string, args ...any) {
	o, _ := logOnce.LoadOrStore(msg, &sync.Once{})
	o.(*sync.Once).Do(func() { log.Info(msg, args...) })
}

// NewURing prepares FUSE over io_uring for one mount about to be made
// with mode (Resolve'd) and the mount's MaxWrite (bytes; each entry's
// payload buffer holds max(MaxWrite, 8 KiB) rounded up to pages, as
// fs/fuse/dev_uring.c requires). It returns nil and no error when the
// mount is to use /dev/fuse (Dev, or Auto without the kernel parameter,
// or Auto when the rings cannot be made: logged once). IOURing without
// the parameter, or with rings that cannot be made, is an error naming
// the cause and how to enable it.
func NewURing(mode Mode, maxWrite int, log *slog.Logger) (*URing, error) {
	if log == nil {
		log = slog.Default()
	}
	if mode == Dev {
		return nil, nil
	}
	present, enabled := KernelURing()
	if !enabled {
		why := "the kernel has no FUSE over io_uring (" + URingParameter + " is missing; Linux >= 6.14 with CONFIG_FUSE_IO_URING)"
		if present {
			why = URingParameter + " is N (enable it: echo 1 > " + URingParameter + ", or `options fuse enable_uring=1` in /etc/modprobe.d/)"
		}
		if mode == IOURing {
			return nil, fmt.Errorf("fuse transport io-uring: %s", why)
		}
		logChoice(log, "fuse transport: "+NameDev, "why", why)
		return nil, nil
	}
	n, err := possibleCPUs()
	if err != nil {
		return nil, uringSetupFailed(mode, log, err)
	}
	if ringThreads.Add(int64(n)) > MaxRingThreads {
		ringThreads.Add(-int64(n))
		logChoice(log, "fuse transport: "+NameDev+" for further mounts (io_uring queue threads at their bound)", "bound", MaxRingThreads, "queues_per_mount", n)
		return nil, nil
	}
	page := os.Getpagesize()
	payload := max(maxWrite, 8192)
	payload = (payload + page - 1) / page * page
	mem, err := newRingMem(n, payload)
	if err != nil {
		ringThreads.Add(-int64(n))
		return nil, uringSetupFailed(mode, log, err)
	}
	u, err := newURing(log, mem, n)
	if err != nil {
		return nil, uringSetupFailed(mode, log, err)
	}
	return u, nil
}

// newURing starts n queues on ring memory mem (taken over: closed when
// the queues end, or here on error); ringThreads counts them already.
func newURing(log *slog.Logger, mem *ringMem, n int) (*URing, error) {
	u := &URing{log: log, payload: mem.g.Payload, devFd: -1, failQueue: -1, mem: mem, owner: newOwner()}
	u.gate.init()
	for qid := range n {
		q, err := newQueue(u, qid)
		if err != nil {
			u.Close()
			// Each started queue gave its thread back as it ended.
			ringThreads.Add(-int64(n - qid - 1))
			return nil, err
		}
		u.queues = append(u.queues, q)
	}
	return u, nil
}

// AdoptURing prepares FUSE over io_uring for a connection taken over
// from a predecessor whose INIT negotiated it (Conn.Ring, Meta.Ring):
// its ring memory, the memfd ringFd (owned by the URing from then on,
// also on error) of geometry g, is mapped where the predecessor had it,
// so that Serve can take over the requests its entries hold. Such a
// connection has no /dev/fuse fallback: the kernel sends its requests
// only through the ring once it was ready, so an error here leaves it
// unservable (the caller ends it). Start and Serve as for NewURing.
func AdoptURing(ringFd int, g RingGeometry, log *slog.Logger) (*URing, error) {
	if log == nil {
		log = slog.Default()
	}
	n, err := possibleCPUs()
	if err != nil {
		unix.Close(ringFd)
		return nil, err
	}
	if n != g.Queues {
		unix.Close(ringFd)
		return nil, fmt.Errorf("fuse transport io-uring: the connection has %d ring queues, this machine %d possible CPUs", g.Queues, n)
	}
	mem, err := openRingMem(ringFd, g)
	if err != nil {
		unix.Close(ringFd)
		return nil, fmt.Errorf("fuse transport io-uring: %w", err)
	}
	// A connection on the ring is served on it whatever the bound: it
	// has no other way (the predecessor kept within it).
	ringThreads.Add(int64(n))
	u, err := newURing(log, mem, n)
	if err != nil {
		return nil, fmt.Errorf("fuse transport io-uring: %w", err)
	}
	u.adopted = true
	u.failQueue = int(adoptFailQueue.Load()) - 1
	return u, nil
}

// MemFd returns the ring memory's memfd (owned by the URing), for a caller
// that keeps the connection (Keep), and Geometry what a successor needs to
// map it (Meta.Ring). nil-safe: -1 and nil without a ring.
func (u *URing) MemFd() int {
	if u == nil {
		return -1
	}
	return u.mem.fd
}

// Geometry returns the ring memory's geometry (nil without a ring).
func (u *URing) Geometry() *RingGeometry {
	if u == nil {
		return nil
	}
	g := u.mem.g
	return &g
}

func uringSetupFailed(mode Mode, log *slog.Logger, err error) error {
	if mode == IOURing {
		return fmt.Errorf("fuse transport io-uring: %w", err)
	}
	logChoice(log, "fuse transport: "+NameDev+" (io_uring setup failed)", "err", err)
	return nil
}

// Capabilities returns the INIT flags to offer the kernel
// (fuse.MountOptions.ExtraCapabilities): FUSE_OVER_IO_URING. nil-safe.
func (u *URing) Capabilities() uint64 {
	if u == nil {
		return 0
	}
	return fuse.CAP_OVER_IO_URING
}

// Close gives the rings up before Start (the mount failed). nil-safe.
func (u *URing) Close() {
	if u == nil {
		return
	}
	for _, q := range u.queues {
		q.start <- -1
	}
	u.wg.Wait()
	u.mem.close()
}

// Start registers every queue's entries on srv's connection, mounted at
// mountpoint, once go-fuse has answered INIT (fuse.NewServer returned),
// and returns nil when the kernel now sends requests through the ring;
// the queues serve them from Serve on.
// Otherwise the connection stays on /dev/fuse, never half-served: when
// the kernel did not accept FUSE_OVER_IO_URING, nothing is registered;
// when a registration fails, the ring is turned off for the connection
// (a REGISTER the kernel refuses clears its io_uring flag,
// fs/fuse/dev_uring.c) before any request takes it. The error says why; Start logs it once. nil-safe
// (returns an error saying /dev/fuse is in use).
//
// The mount point names the connection in fusectl, so that a queue whose
// ring fails and cannot be rebuilt ends the connection rather than leave
// its CPU's requests waiting (doc.go); it is read without a request to
// the file system (statx with AT_STATX_DONT_SYNC).
func (u *URing) Start(srv *fuse.Server, mountpoint string) error {
	if u == nil {
		return errors.New("fuse transport: " + NameDev)
	}
	if srv.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		u.Close()
		err := errors.New("the kernel's INIT did not offer FUSE_OVER_IO_URING")
		logChoice(u.log, "fuse transport: "+NameDev, "why", err)
		return err
	}
	fd, err := srv.DupDeviceFd()
	if err != nil {
		u.Close()
		// The kernel waits for the ring now (fuse_block_alloc) and no
		// REGISTER can reach it: the connection has already ended.
		return fmt.Errorf("fuse transport: %w", err)
	}
	u.devFd = fd
	u.conn = FusectlName(mountpoint)
	u.mountpoint = mountpoint
	u.released = make(chan struct{})
	go func() {
		// The queues' commands name the descriptor and the ring
		// memory until the last queue ends.
		u.wg.Wait()
		unix.Close(fd)
		u.mem.close()
		close(u.released)
	}()
	for _, q := range u.queues {
		q.srv = srv
		q.start <- fd
	}
	var failed error
	for _, q := range u.queues {
		if err := <-q.registered; err != nil && failed == nil {
			failed = fmt.Errorf("queue %d: %w", q.qid, err)
		}
	}
	// The verdict: every queue serves (the ring is ready: the kernel
	// made it so when the last queue registered), or the first queue
	// with a working ring turns the ring off and all wait for the end.
	// A connection taken over has no way back to /dev/fuse: its queues
	// serve what they can, and the caller hears why one cannot.
	for i, q := range u.queues {
		q.verdict <- failed == nil || i != 0 || u.adopted
	}
	if failed != nil {
		// The queues run to the connection's end (turned off, or
		// serving what they can), held by no gate.
		u.gate.open(false)
		if u.adopted {
			u.active.Store(true)
			return failed
		}
		logChoice(u.log, "fuse transport: "+NameDev+" (io_uring registration failed)", "err", failed)
		return failed
	}
	u.active.Store(true)
	logChoice(u.log, "fuse transport: "+NameURing, "queues", len(u.queues))
	return nil
}

// Active reports whether the connection's requests go through the ring.
func (u *URing) Active() bool { return u != nil && u.active.Load() }

// Served returns the number of requests served through the ring.
func (u *URing) Served() uint64 {
	if u == nil {
		return 0
	}
	return u.served.Load()
}

// Wait returns once every queue has ended (the connection ended, or
// the rings were given up) and, after Start, the queues' descriptor of
// the connection and the ring memory are given back. nil-safe.
func (u *URing) Wait() {
	if u == nil {
		return
	}
	u.wg.Wait()
	if u.released != nil {
		<-u.released
	}
}

// Queues returns the number of queues (the possible CPUs).
func (u *URing) Queues() int {
	if u == nil {
		return 0
	}
	return len(u.queues)
}

// queue is one ring queue (qid = CPU) and its thread's state.
type queue struct {
	u    *URing
	qid  int
	srv  *fuse.Server
	r    *ring
	ents []*entry // by index, the completion's user_data
	live int      // entries the kernel holds (or that hold a request)
	efd  int
	wbuf []byte // eventfd read buffer (its own page, mmap)
	// broken is set when a submission failed (nextSQE): the loop
	// rebuilds the ring.
	broken  error
	scratch sqe // where a submission goes that the ring has no room for
	start   chan int
	// registered reports the REGISTER outcome, verdict brings the
	// decision back (true: serve).
	registered chan error
	verdict    chan bool

	early []int // entries that had a request at registration

	// extraFailed is set once registering an entry in place of a lock
	// waiter's failed (logged once per queue).
	extraFailed bool

	// committing are the entries whose COMMIT_AND_FETCH is queued and
	// not yet seen submitted (markSubmitted).
	committing []int
	// seen is the number of the gate's last opening the queue acted on
	// (opened).
	seen uint64

	mu    sync.Mutex
	done  []int // entries an off-thread request has answered
	async int   // off-thread requests running
}

func newQueue(u *URing, qid int) (*queue, error) {
	q := &queue{u: u, qid: qid, efd: -1, start: make(chan int), registered: make(chan error), verdict: make(chan bool)}
	made := make(chan error)
	u.wg.Add(1)
	go q.run(made)
	if err := <-made; err != nil {
		return nil, err
	}
	return q, nil
}

// run is the queue's goroutine: locked to its thread for good (the
// ring is SINGLE_ISSUER and its completions run as task work of the
// thread that submitted), pinned to the queue's CPU when it may run
// there.
func (q *queue) run(made chan<- error) {
	defer q.u.wg.Done()
	defer ringThreads.Add(-1) // before Done: Wait sees the thread given back
	runtime.LockOSThread()
	defer privateFS()() // OnQueueThread; the thread exits with this goroutine
	var set unix.CPUSet
	set.Set(q.qid)
	// Best effort: a CPU outside the process's cpuset (or offline)
	// leaves the thread unpinned; the kernel still queues that CPU's
	// callers here.
	unix.SchedSetaffinity(0, &set)
	if err := q.setup(); err != nil {
		q.teardown()
		made <- err
		return
	}
	made <- nil
	fd := <-q.start
	if fd < 0 {
		q.teardown()
		return
	}
	var live int
	var err error
	if q.qid == q.u.failQueue {
		err = errors.New("registration skipped (test)")
	} else {
		live, err = q.register(fd)
	}
	q.registered <- err
	serve := <-q.verdict
	if !serve {
		q.turnOff(fd)
	}
	q.live = live
	q.loop(fd)
	q.teardown()
}

func (q *queue) setup() error {
	var err error
	if q.r, err = newRing(8 * entriesPerQueue); err != nil {
		return err
	}
	if q.wbuf, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fmt.Errorf("mmap of the eventfd buffer: %w", err)
	}
	if q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	for range entriesPerQueue {
		if _, err := q.addEntry(); err != nil {
			return err
		}
	}
	return nil
}

// entry is one ring entry: a slot of the connection's ring memory
// (ringmem.go), whose header page holds the kernel's header (hdr) and the
// slot's metadata (md), and whose payload buffer follows; and the iovec
// pair REGISTER names (the kernel reads it at submission).
type entry struct {
	slot int
	md   meta
	hdr  []byte
	pay  []byte
	iov  [2]unix.Iovec
	// op is the command of the entry's last submission (REGISTER or
	// COMMIT_AND_FETCH), on ring on at position seq; 0 while the entry
	// is with the server (a request in it) or given back (on nil).
	op  uint32
	on  *ring
	seq uint32
	// resend marks a request taken over from a server that may have
	// begun it (recoverSlots): it is served with FUSE_UNIQUE_RESEND's
	// mark, so that the file system answers a repetition as its
	// predecessor's work (fusefs keepReply.again).
	resend bool
}

// entryAt returns an entry for ring memory slot s (its owner's already).
func (q *queue) entryAt(s int) *entry {
	mem := q.u.mem.slot(s)
	e := &entry{slot: s, md: q.u.mem.meta(s), hdr: mem[:headerSize], pay: mem[os.Getpagesize():]}
	e.iov[0].Base = &e.hdr[0]
	e.iov[0].SetLen(headerSize)
	e.iov[1].Base = &e.pay[0]
	e.iov[1].SetLen(q.u.payload)
	return e
}

// addEntry claims a free slot of the queue for a new entry and returns
// its index (not yet registered). The slot's pages cost memory only
// once the kernel copies a request into them.
func (q *queue) addEntry() (int, error) {
	rm := q.u.mem
	for k := range rm.g.PerQueue {
		s := rm.slotOf(q.qid, k)
		if !rm.meta(s).claim(0, q.u.owner) {
			continue
		}
		e := q.entryAt(s)
		// No request or reply of an earlier entry in the slot may look
		// like one of this entry's (recoverSlots reads the header).
		clear(e.hdr[:inHeaderSize])
		return q.place(e), nil
	}
	return 0, errors.New("no free slot left in the queue's ring memory")
}

// place puts e in a free index of the queue's entries (one an entry left
// first: no completion names it any more) and returns the index.
func (q *queue) place(e *entry) int {
	for i, old := range q.ents {
		if old == nil {
			q.ents[i] = e
			return i
		}
	}
	q.ents = append(q.ents, e)
	return len(q.ents) - 1
}

// drop forgets entry i, which the kernel no longer holds, and frees its
// slot.
func (q *queue) drop(i int) {
	q.ents[i].md.release()
	q.ents[i] = nil
}

func (q *queue) teardown() {
	if q.r != nil {
		q.r.close()
	}
	q.mu.Lock()
	if q.efd >= 0 {
		unix.Close(q.efd)
		q.efd = -1
	}
	q.mu.Unlock()
	for i, e := range q.ents {
		if e != nil {
			q.drop(i)
		}
	}
	q.ents = nil
	if q.wbuf != nil {
		unix.Munmap(q.wbuf)
	}
}

// cmdSQE fills a URING_CMD entry for ring entry e (cmd_op op) on the
// connection fd. A REGISTER arms the entry's slot: the kernel may copy a
// request into it from the moment it takes the command.
func (q *queue) cmdSQE(s *sqe, seq uint32, fd int, op uint32, e int, qid uint16, commitID uint64) {
	ent := q.ents[e]
	ent.op, ent.on, ent.seq = op, q.r, seq
	if op == uringCmdRegister {
		ent.md.setState(slotArmed)
	}
	s.Opcode = ioringOpURingCmd
	s.Fd = int32(fd)
	s.Off = uint64(op)
	s.Addr = uint64(uintptr(unsafe.Pointer(&ent.iov[0])))
	s.Len = 2
	s.UserData = uint64(e)
	// struct fuse_uring_cmd_req {u64 flags; u64 commit_id; u16 qid}
	binary.LittleEndian.PutUint64(s.Cmd[8:], commitID)
	binary.LittleEndian.PutUint16(s.Cmd[16:], qid)
}

// register submits a REGISTER for every entry and returns how many the
// kernel holds; a refusal comes back at once as a completion.
func (q *queue) register(fd int) (int, error) {
	for e := range q.ents {
		s, seq := q.nextSQE()
		q.cmdSQE(s, seq, fd, uringCmdRegister, e, uint16(q.qid), 0)
	}
	if err := q.r.enter(false); err != nil {
		return 0, err
	}
	live := len(q.ents)
	var failed error
	q.r.reap(func(c cqe) {
		if c.Res < 0 {
			live--
			q.drop(int(c.UserData))
			if failed == nil {
				failed = fmt.Errorf("FUSE_IO_URING_CMD_REGISTER: %w", unix.Errno(-c.Res))
			}
			return
		}
		// A request already (the ring got ready): serve it in the loop.
		q.took(int(c.UserData))
		q.early = append(q.early, int(c.UserData))
	})
	return live, failed
}

// took marks entry e as holding a request the server took (its
// completion reaped).
func (q *queue) took(e int) {
	q.ents[e].op = 0
	q.ents[e].md.setState(slotHeld)
}

// turnOff sends the REGISTER the kernel refuses (a queue id past the
// last), which clears the connection's io_uring flag, so requests held
// back waiting for the ring go to /dev/fuse (fs/fuse/dev_uring.c,
// fuse_uring_cmd).
func (q *queue) turnOff(fd int) {
	// The kernel refuses the queue id before it looks at the buffers
	// (fuse_uring_register), so none are named.
	s, _ := q.nextSQE()
	s.Opcode = ioringOpURingCmd
	s.Fd = int32(fd)
	s.Off = uringCmdRegister
	s.Len = 2
	s.UserData = userDataFallback
	binary.LittleEndian.PutUint16(s.Cmd[16:], 0xffff)
	if err := q.r.enter(false); err != nil {
		q.u.log.Warn("fuse transport: turning the ring off", "err", err)
	}
}

// faultEnter, set by tests only, is called on the queue's thread before
// each wait of the loop: an error stands for io_uring_enter's, as if the
// ring had failed.
var faultEnter func(q *queue) error

// loop serves completions until the kernel has given back every entry
// (the connection ended: each comes back with ENOTCONN or ECONNABORTED)
// and no off-thread request runs, parking at the gate while it is shut
// (before Serve, and between Pause and Resume). When the ring fails, the
// queue is rebuilt on a new one (rebuild), or the connection ended.
func (q *queue) loop(fd int) {
	q.armWake()
	q.armGuard()
	for {
		if q.u.gate.shut.Load() {
			q.park(fd)
		}
		q.opened(fd)
		for _, e := range q.early {
			q.serve(fd, e)
		}
		q.early = nil
		if q.live <= 0 && q.running() == 0 {
			return
		}
		err := q.broken
		if err == nil && faultEnter != nil {
			err = faultEnter(q)
		}
		if err == nil {
			err = q.r.enter(true)
		}
		if err != nil {
			if !q.rebuild(fd, err) {
				return
			}
			continue
		}
		q.markSubmitted()
		q.r.reap(func(c cqe) { q.complete(fd, c) })
	}
}

// complete handles one completion of the queue's ring.
func (q *queue) complete(fd int, c cqe) {
	switch {
	case c.UserData == userDataWake:
		q.armWake()
		q.commitDone(fd)
	case c.UserData == userDataFallback:
	case c.UserData == userDataGuard:
		if c.Res != -int32(unix.ECANCELED) {
			q.armGuard()
		}
	case c.Res < 0:
		// ENOTCONN/ECONNABORTED: the connection ended; ENOENT: a
		// commit the kernel no longer knows (the request was
		// aborted, or answered already: recoverSlots); a REGISTER
		// refused. The entry is gone.
		q.drop(int(c.UserData))
		q.live--
	default:
		q.took(int(c.UserData))
		q.serve(fd, int(c.UserData))
	}
}

// commitDone commits the entries whose off-thread requests have answered.
func (q *queue) commitDone(fd int) {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	for _, e := range done {
		q.commit(fd, e)
	}
}

func (q *queue) running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.async
}

// armGuard queues a poll of an idle io_uring's descriptor (guardRing),
// which never completes: a request on an io_uring file counts as
// in flight for the thread's exit (io_file_get_normal tracks it), so that
// when the process dies its exit cancels the entries while the thread
// can still copy requests in (io_uring_files_cancel runs before do_exit
// marks the thread exiting). Without one, the free entries of a dead
// thread were cancelled only when the ring was torn down, and a request
// the kernel gave one meanwhile ended with ECANCELED (uring_takeover.go).
func (q *queue) armGuard() {
	fd, err := guardRing()
	if err != nil {
		guardOnce.Do(func() {
			q.u.log.Warn("fuse transport: no guard for the ring entries at exit: a request given to one as this process dies may fail with ECANCELED", "err", err)
		})
		return
	}
	s, _ := q.nextSQE()
	s.Opcode = ioringOpPollAdd
	s.Fd = int32(fd)
	s.OpFlags = unix.POLLIN
	s.UserData = userDataGuard
}

var (
	guardOnce    sync.Once
	guardRingFd  int
	guardRingErr error
	guardMade    sync.Once
)

// guardRing returns the process's idle io_uring (made once, never
// closed), whose descriptor the queues' guard polls wait on.
func guardRing() (int, error) {
	guardMade.Do(func() {
		r, err := newRing(1)
		if err != nil {
			guardRingErr = err
			return
		}
		guardRingFd = r.fd
	})
	return guardRingFd, guardRingErr
}

// armWake queues a read of the eventfd an off-thread request writes when
// it has answered (and Pause, to have the queue look at its gate).
func (q *queue) armWake() {
	s, _ := q.nextSQE()
	s.Opcode = ioringOpRead
	s.Fd = int32(q.efd)
	s.Addr = uint64(uintptr(unsafe.Pointer(&q.wbuf[0])))
	s.Len = 8
	s.Off = ^uint64(0)
	s.UserData = userDataWake
}

// wake makes the queue's thread turn its loop (from any thread); a no-op
// once the queue has ended.
func (q *queue) wake() {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.efd >= 0 {
		unix.Write(q.efd, one[:])
	}
}

// serve answers the request in entry e: inline, or for a SETLKW (which
// may wait for another caller's unlock, maybe on this very queue) on its
// own goroutine, committed by this thread once it is done; the entry it
// keeps meanwhile is replaced by a new one (entriesPerQueue).
func (q *queue) serve(fd, e int) {
	ent := q.ents[e]
	if binary.LittleEndian.Uint32(ent.hdr[hdrInOut+4:]) == opSetlkw {
		q.mu.Lock()
		q.async++
		q.mu.Unlock()
		q.replace(fd)
		go func() {
			q.handle(ent)
			q.mu.Lock()
			q.async--
			q.done = append(q.done, e)
			q.mu.Unlock()
			q.wake()
		}()
		return
	}
	q.handle(ent)
	q.commit(fd, e)
}

// replace registers one more entry on the queue, in place of one a lock
// waiter keeps, while the queue has fewer than maxEntriesPerQueue.
func (q *queue) replace(fd int) {
	if len(q.ents) >= maxEntriesPerQueue {
		return
	}
	e, err := q.addEntry()
	if err != nil {
		if !q.extraFailed {
			q.extraFailed = true
			q.u.log.Warn("fuse transport: no ring entry in place of a lock waiter's", "queue", q.qid, "entries", len(q.ents), "err", err)
		}
		return
	}
	s, seq := q.nextSQE()
	q.cmdSQE(s, seq, fd, uringCmdRegister, e, uint16(q.qid), 0)
	q.live++
}

// stage returns the queue's staging buffer (ringmem.go): where the reply
// to a request that carries a payload is written, so that the request
// stays whole in its entry until the reply is complete.
func (q *queue) stage() []byte {
	return q.u.mem.slot(q.u.mem.stageOf(q.qid))[os.Getpagesize():]
}

// handle serves the request in entry ent with go-fuse and publishes the
// reply into the entry: fuse_out_header in in_out, the rest in the
// payload buffer, its length in payload_sz (slotReplied). Until the
// reply is complete the request stays whole in the entry, so that a
// successor can serve it again when this process dies meanwhile
// (recoverSlots): the reply's header is written into the slot's
// metadata, and its payload into the queue's staging buffer when the
// request has a payload of its own (names, written data, xattr values),
// else straight into the payload buffer (a READ's data, a listing).
// Off-thread requests (SETLKW) carry no payload and never stage.
func (q *queue) handle(ent *entry) {
	h, p, rh := ent.hdr, ent.pay, ent.md.replyHdr()
	length := int(binary.LittleEndian.Uint32(h[hdrInOut:]))
	unique := binary.LittleEndian.Uint64(h[hdrInOut+8:])
	paySz := int(binary.LittleEndian.Uint32(h[hdrPayloadSz:]))
	// The operation's header (in_args[0]) is in op_in, the other
	// arguments in the payload: the header's length counts them all.
	opSz := length - inHeaderSize - paySz
	n, st := 0, fuse.EIO
	staged := false
	if opSz >= 0 && opSz <= hdrEntInOut-hdrOpIn && paySz <= len(p) {
		inHdr := h[hdrInOut : hdrInOut+inHeaderSize]
		if ent.resend {
			c := make([]byte, inHeaderSize)
			copy(c, inHdr)
			binary.LittleEndian.PutUint64(c[8:], unique|UniqueResend)
			inHdr = c
		}
		out := p
		if paySz > 0 {
			out, staged = q.stage(), true
		}
		in := [][]byte{inHdr, h[hdrOpIn : hdrOpIn+opSz], p[:paySz]}
		n, st = q.srv.HandleRequest(in, [][]byte{rh, out})
	}
	if !st.Ok() || n < outHeaderSize {
		if st.Ok() {
			st = fuse.EIO
		}
		binary.LittleEndian.PutUint32(rh[0:], outHeaderSize)
		binary.LittleEndian.PutUint32(rh[4:], uint32(-int32(st)))
		n, staged = outHeaderSize, false
	}
	// The kernel's unique, without the mark a taken-over request was
	// served with (it checks the reply's against its own).
	binary.LittleEndian.PutUint64(rh[8:], unique)
	ent.resend = false
	ent.md.setReply(n-outHeaderSize, staged && n > outHeaderSize)
	q.publish(ent)
	q.u.served.Add(1)
}

// publish copies the complete reply of entry ent (handle) into place.
// Doing it again is harmless: recoverSlots finishes a publish a dead
// server began (slotPublishing).
func (q *queue) publish(ent *entry) {
	md := ent.md
	md.setState(slotPublishing)
	n, staged := md.reply()
	if staged {
		copy(ent.pay[:n], q.stage()[:n])
	}
	copy(ent.hdr[hdrInOut:hdrInOut+outHeaderSize], md.replyHdr())
	binary.LittleEndian.PutUint32(ent.hdr[hdrPayloadSz:], uint32(n))
	md.setState(slotReplied)
}

// nextSQE returns a submission entry to fill and its position
// (ring.getSQE), submitting what is queued first when the submission ring
// is full. When that submission fails, the queue is marked broken (the
// loop rebuilds it) and the entry returned is a scratch one, at a
// position the kernel has not consumed (rebuild submits it again).
func (q *queue) nextSQE() (*sqe, uint32) {
	s, seq := q.r.getSQE()
	if s == nil {
		if err := q.r.enter(false); err != nil {
			if q.broken == nil {
				q.broken = fmt.Errorf("submit: %w", err)
			}
			q.scratch = sqe{}
			return &q.scratch, seq
		}
		q.markSubmitted()
		s, seq = q.r.getSQE()
	}
	return s, seq
}

// commit queues COMMIT_AND_FETCH for entry e: the reply goes to the
// kernel and the entry waits for the next request. The commit id is the
// request's unique, which the kernel put in ent_in_out.commit_id.
func (q *queue) commit(fd, e int) {
	h := q.ents[e].hdr
	s, seq := q.nextSQE()
	q.cmdSQE(s, seq, fd, uringCmdCommitAndFetch, e, uint16(q.qid), binary.LittleEndian.Uint64(h[hdrCommitID:]))
	q.committing = append(q.committing, e)
}

// markSubmitted arms the slots of the entries whose COMMIT_AND_FETCH the
// kernel has taken (it copied the reply out during the submission): a
// reply left in a slot is then no longer one to commit (recoverSlots).
func (q *queue) markSubmitted() {
	keep := q.committing[:0]
	for _, i := range q.committing {
		e := q.ents[i]
		switch {
		case e == nil || e.op != uringCmdCommitAndFetch:
		case e.on == q.r && q.r.consumed(e.seq):
			e.md.setState(slotArmed)
		default:
			keep = append(keep, i)
		}
	}
	q.committing = keep
}

// possibleCPUs counts /sys/devices/system/cpu/possible (the kernel makes
// one queue per possible CPU, num_possible_cpus()).
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return 0, fmt.Errorf("/sys/devices/system/cpu/possible: bad range %q", r)
		}
		n += z - a + 1
	}
	return n, nil
}
