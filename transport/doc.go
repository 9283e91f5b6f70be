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
package transport
