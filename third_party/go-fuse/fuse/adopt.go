// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

import (
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// NewServerOnFD serves a FUSE connection that is already mounted and
// initialized: its INIT was answered by an earlier server, usually another
// process that handed the /dev/fuse descriptor over (a restart or an
// upgrade that must not unmount). The kernel sends no second INIT, so the
// caller passes the INIT request the kernel sent then (init, see
// KernelSettings) and the reply that was given (prev, see InitOut): the
// capabilities this server assumes are those both its own options and
// the earlier reply agree on, since the kernel's side cannot change after
// INIT. opts.MaxWrite is raised to prev.MaxWrite if smaller, as the kernel
// may send requests that large.
//
// mountPoint is only recorded (for Unmount). fd is owned by the returned
// Server. Call Serve as with NewServer.
func NewServerOnFD(fs RawFileSystem, fd int, mountPoint string, init *InitIn, prev *InitOut, opts *MountOptions) (*Server, error) {
	if init == nil || prev == nil {
		return nil, fmt.Errorf("NewServerOnFD: the earlier INIT request and reply are required")
	}
	if opts == nil {
		opts = &MountOptions{MaxBackground: _DEFAULT_BACKGROUND_TASKS}
	}
	o := *opts
	if uint32(o.MaxWrite) < prev.MaxWrite {
		o.MaxWrite = int(prev.MaxWrite)
	}
	o.setDefaults(fs)
	maxReaders := min(max(runtime.GOMAXPROCS(0), minMaxReaders), maxMaxReaders)
	ms := newServer(fs, &o, maxReaders)
	ms.mountPoint = filepath.Clean(mountPoint)

	out, code := ms.negotiate(init)
	if !code.Ok() {
		syscall.Close(fd)
		return nil, fmt.Errorf("init: %s", code)
	}
	ms.negotiatedFlags = out.Flags64() & prev.Flags64()
	out.setFlags(ms.negotiatedFlags)
	out.MaxWrite = prev.MaxWrite
	ms.initOut = out

	var err error
	ms.fuseFD, err = ms.newFuseFD(fd)
	if err != nil {
		return nil, err
	}
	ms.protocolServer.writev = ms.fuseFD.writev
	if ms.kernelSettings.Minor >= 13 {
		ms.setSplice()
	}
	ms.fileSystem.Init(ms)
	ms.fuseFD.loops.Add(1)
	return ms, nil
}

// negotiate computes the INIT reply to in as doInit does, and records in
// as the kernel's settings, without a request from the kernel.
func (ms *protocolServer) negotiate(in *InitIn) (InitOut, Status) {
	req := &request{
		inputBuf:   make([]byte, unsafe.Sizeof(InitIn{})),
		outDataBuf: make([]byte, unsafe.Sizeof(InitOut{})),
	}
	*(*InitIn)(req.inData()) = *in
	doInit(ms, req)
	return *(*InitOut)(req.outData()), req.status
}

// InitOut returns the reply this server gave to the kernel's INIT (or, for
// NewServerOnFD, the reply it serves under), to be handed with
// KernelSettings to a successor's NewServerOnFD.
func (ms *Server) InitOut() InitOut {
	return ms.initOut
}

// NotifyResend asks the kernel to queue again every request that was read
// from this connection but not answered (FUSE_NOTIFY_RESEND, Linux 6.9+:
// fs/fuse/dev.c fuse_resend). A server that took a connection over from
// one that died, or that stopped reading at Pause, sends it once before or
// while it serves, so no caller waits forever on a request nobody will
// answer. Resent requests carry the FUSE_UNIQUE_RESEND bit in their unique
// number, which the reply echoes. ENOSYS-like errors from older kernels are
// returned as they are.
func (ms *Server) NotifyResend() Status {
	h := OutHeader{Length: uint32(sizeOfOutHeader), Status: int32(-NOTIFY_RESEND)}
	hb := unsafe.Slice((*byte)(unsafe.Pointer(&h)), sizeOfOutHeader)
	_, errno := ms.fuseFD.writev([][]byte{hb})
	return Status(errno)
}

// Pause stops serving at a request boundary: requests being handled are
// finished and answered (up to wait; a request still running then, such as
// a lock wait, is left to be answered or abandoned), and every request read
// after that is left unanswered, for a successor's NotifyResend (or this
// server's Resume) to have the kernel send it again. Notifications can
// still be sent. Pause returns whether every running request finished.
func (ms *Server) Pause(wait time.Duration) bool {
	ms.paused.Store(true)
	done := make(chan struct{})
	go func() {
		ms.pauseMu.Lock()
		ms.pauseMu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// Resume undoes Pause: requests are handled again, and the ones left
// unanswered meanwhile are asked for again (NotifyResend).
func (ms *Server) Resume() Status {
	ms.paused.Store(false)
	return ms.NotifyResend()
}

// DeviceFD returns the number of the /dev/fuse descriptor the server
// reads, for a caller that keeps a duplicate of it beyond this process's
// life so that the connection survives (see NewServerOnFD). It stays
// owned by the Server; -1 once the Server closed it.
func (ms *Server) DeviceFD() int {
	n := -1
	ms.fuseFD.withFD(func(fd int) { n = fd })
	return n
}

// NotifyIncEpoch makes the kernel treat every dentry of this connection as
// needing a LOOKUP before its next use (FUSE_NOTIFY_INC_EPOCH, Linux 6.16+:
// fs/fuse/dev.c fuse_notify_inc_epoch). A server that took a connection
// over sends it once: what changed on the backing store while no server
// ran, a name removed or made or replaced, is then seen at once, not when
// the dentries the kernel cached from the predecessor time out. Negative
// dentries are dropped too.
func (ms *Server) NotifyIncEpoch() Status {
	h := OutHeader{Length: uint32(sizeOfOutHeader), Status: int32(-NOTIFY_INC_EPOCH)}
	hb := unsafe.Slice((*byte)(unsafe.Pointer(&h)), sizeOfOutHeader)
	_, errno := ms.fuseFD.writev([][]byte{hb})
	return Status(errno)
}
