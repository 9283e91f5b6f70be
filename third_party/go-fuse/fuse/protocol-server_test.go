// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

import (
	"bytes"
	"encoding/binary"
	"log"
	"testing"
	"unsafe"
)

func TestProtocolServerParse(t *testing.T) {
	in := [][]byte{
		[]byte("A\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00.\x04\x00\x00\x00\x00\x00\x00"),
		[]byte("\x00\x00\x00\x00\x00\x00\x00\x00security.selinux\x00"),
	}
	out := [][]byte{make([]byte, 16), make([]byte, 8)}

	var logBuf bytes.Buffer
	t.Cleanup(func() {
		if logBuf.Len() > 0 {
			t.Logf("protocol-server log:\n%s", logBuf.String())
		}
	})
	opts := MountOptions{}
	opts.Debug = true
	opts.Logger = log.New(&logBuf, "", 0)
	ps := NewProtocolServer(NewDefaultRawFileSystem(), &opts)
	n, status := ps.HandleRequest(in, out)
	if status != OK {
		t.Fatalf("HandleRequest: status %v, want OK", status)
	}
	if n < int(sizeOfOutHeader) {
		t.Fatalf("HandleRequest: wrote %d bytes, want at least %d", n, sizeOfOutHeader)
	}
	length := binary.LittleEndian.Uint32(out[0][0:4])
	if int(length) != n {
		t.Errorf("OutHeader.Length = %d, want %d", length, n)
	}
	// DefaultRawFileSystem.GetXAttr returns ENOSYS, so the reply is
	// header-only with a negative status.
	gotStatus := int32(binary.LittleEndian.Uint32(out[0][4:8]))
	if gotStatus != -int32(ENOSYS) {
		t.Errorf("OutHeader.Status = %d, want %d", gotStatus, -int32(ENOSYS))
	}
}

// cancelRecorder answers GETATTR with OK, recording the request's cancel
// channel, and interrupts the request it serves when interrupt is set (as
// an INTERRUPT read from /dev/fuse would).
type cancelRecorder struct {
	RawFileSystem
	ps        *protocolServer
	interrupt bool
	// as, when set, is the unique the interrupt names (else the request's).
	as      uint64
	got     Status
	cancels []<-chan struct{}
}

func (r *cancelRecorder) GetAttr(cancel <-chan struct{}, in *GetAttrIn, out *AttrOut) Status {
	r.cancels = append(r.cancels, cancel)
	if r.interrupt {
		u := in.Unique
		if r.as != 0 {
			u = r.as
		}
		r.got = r.ps.interruptRequest(u)
	}
	return OK
}

// getattrIov is a GETATTR request of node 1 with the given unique, and
// room for its reply.
func getattrIov(unique uint64) (in, out [][]byte) {
	b := make([]byte, unsafe.Sizeof(GetAttrIn{}))
	h := (*GetAttrIn)(unsafe.Pointer(&b[0]))
	h.Length = uint32(len(b))
	h.Opcode = _OP_GETATTR
	h.Unique = unique
	h.NodeId = FUSE_ROOT_ID
	return [][]byte{b}, [][]byte{make([]byte, int(sizeOfOutHeader)+int(unsafe.Sizeof(AttrOut{})))}
}

// TestHandleRequestReuse: HandleRequest reuses its requests (a request
// served after another allocates nothing), and one that was interrupted,
// its cancel channel closed, comes back with an open channel.
func TestHandleRequestReuse(t *testing.T) {
	rec := &cancelRecorder{RawFileSystem: NewDefaultRawFileSystem()}
	ps := NewProtocolServer(rec, &MountOptions{})
	rec.ps = &ps.protocolServer
	in, out := getattrIov(1)
	if _, st := ps.HandleRequest(in, out); st != OK {
		t.Fatalf("HandleRequest: %v", st)
	}
	if allocs := testing.AllocsPerRun(100, func() { ps.HandleRequest(in, out) }); allocs != 0 {
		t.Errorf("HandleRequest of a GETATTR: %v allocations per request, want 0", allocs)
	}

	rec.interrupt = true
	in, out = getattrIov(2)
	ps.HandleRequest(in, out)
	rec.interrupt = false
	interrupted := rec.cancels[len(rec.cancels)-1]
	select {
	case <-interrupted:
	default:
		t.Fatal("the interrupted request's cancel channel is open")
	}
	in, out = getattrIov(3)
	ps.HandleRequest(in, out)
	select {
	case <-rec.cancels[len(rec.cancels)-1]:
		t.Fatal("a request after an interrupted one: its cancel channel is closed")
	default:
	}
}

// TestInterruptResent: an INTERRUPT names a request by its unique without
// the resend bit (1<<63), which a request served again for a predecessor
// may carry (over io_uring the server marks it itself): it is interrupted
// all the same. It answered EAGAIN before, forever.
func TestInterruptResent(t *testing.T) {
	rec := &cancelRecorder{RawFileSystem: NewDefaultRawFileSystem(), interrupt: true, as: 7}
	ps := NewProtocolServer(rec, &MountOptions{})
	rec.ps = &ps.protocolServer
	in, out := getattrIov(7 | 1<<63)
	ps.HandleRequest(in, out)
	if rec.got != OK {
		t.Fatalf("interruptRequest(7) of request 7|resend: %v, want OK", rec.got)
	}
	select {
	case <-rec.cancels[0]:
	default:
		t.Fatal("the resent request's cancel channel is open after its interrupt")
	}
}
