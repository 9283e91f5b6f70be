// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

import "syscall"

// HandleRequest serves one request that reached the process by another
// path than a read(2) of the Server's /dev/fuse (FUSE over io_uring hands
// requests over in ring buffers), with the Server's own INIT settings,
// file system and in-flight table: an INTERRUPT read from /dev/fuse for
// it cancels it as it would a request read there. `in` is the request as
// /dev/fuse would give it (InHeader, the operation's header, payload) and
// `out` receives the reply as it would be written there (OutHeader,
// then data); both are treated as byte streams. The return value is the
// number of bytes of `out` written, 0 with OK for a request that takes no
// reply (FORGET). A non-OK Status means the request could not be parsed
// or `out` is too short, and nothing was written.
//
// EXPERIMENTAL: not subject to API stability.
func (ms *Server) HandleRequest(in [][]byte, out [][]byte) (int, Status) {
	if ms.opts.SingleThreaded {
		ms.requestProcessingMu.Lock()
		defer ms.requestProcessingMu.Unlock()
	}
	return ms.protocolServer.handleIovRequest(in, out)
}

// DupDeviceFd returns a new descriptor (dup(2), close-on-exec) of the
// Server's /dev/fuse connection, owned by the caller: for submitting
// commands about the connection elsewhere (FUSE over io_uring registers
// its ring entries with an IORING_OP_URING_CMD on it). Errors: the
// device is closed (the Server has stopped), or those of fcntl(2).
//
// EXPERIMENTAL: not subject to API stability.
func (ms *Server) DupDeviceFd() (int, error) {
	var nfd int
	var err error
	if cerr := ms.fuseFD.withFD(func(fd int) {
		var r uintptr
		var e syscall.Errno
		r, _, e = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
		nfd = int(r)
		if e != 0 {
			err = e
		}
	}); cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, err
	}
	return nfd, nil
}
