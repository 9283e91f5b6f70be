// Package transport owns wsfs's FUSE connections below the file system
// (DESIGN.md, "Round 4": one transport layer): the /dev/fuse descriptors
// and the INIT parameters negotiated on them, how requests are read (the
// classic /dev/fuse loop, or FUSE over io_uring), and the state a successor
// process needs to serve a connection on (descriptors kept by a holder
// process or systemd's file descriptor store, handed over on takeover or
// taken back after a crash).
//
// It knows nothing of sessions, policies or nodes: fusefs hands it a
// go-fuse RawFileSystem and plain values.
//
// # A connection on the ring outlives its server
//
// A connection served over io_uring is kept as one on /dev/fuse is (Keep,
// TakeConns), with a third descriptor: its ring memory, where every ring
// entry's buffers and state live (ringmem.go), mapped by each server at the
// address recorded in the state (Meta.Ring). A successor (AdoptURing) maps
// it there, registers entries of its own, and at Serve takes over the
// entries its predecessor left: a request in one is served again, a reply
// in one committed (uring_takeover.go). Rings are made without
// DEFER_TASKRUN and guarded by a poll on an idle ring (armGuard), so that
// a dying server's free entries are cancelled while its threads can still
// copy in the requests given to them; and every queue is kicked after a
// takeover (kick.go), so that requests made while no server ran are
// handed out.
//
// # A failed io_uring queue
//
// The kernel puts each request on the ring queue of its caller's CPU and
// keeps a queue's entries registered whatever becomes of the ring they
// were registered through, so a queue that stopped serving would leave
// every caller on its CPU waiting in D state. When a queue's ring fails
// (io_uring_enter returns an error), the queue is rebuilt on a new ring
// on the same thread: new entries are registered for its CPU (the kernel
// hands requests to the newest free entry first), the replies and
// requests the server holds are committed through the new ring (the
// kernel finds a request by its commit id, from any ring), the old ring
// is drained of the requests the kernel had already given its entries,
// and then closed (which cancels its free entries). One warning is
// logged: "io_uring queue failed; rebuilt on a new ring". When the old
// ring cannot be drained or the new one cannot be made, the connection
// is ended through fusectl (/sys/fs/fuse/connections/N/abort, N from the
// mount point given to URing.Start), logged as one error line: callers
// then get ECONNABORTED or ENOTCONN instead of waiting. The kernel
// behaviour this relies on is described in uring_rebuild.go.
package transport
