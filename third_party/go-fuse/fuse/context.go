// Copyright 2016 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

import (
	"context"
	"time"
)

// Context passes along cancelation signal and request data (PID, GID,
// UID).  The name of this class predates the standard "context"
// package from Go, but it does implement the context.Context
// interface.
//
// When a FUSE request is canceled, and the file system chooses to honor
// the cancellation, the response should be EINTR.
type Context struct {
	Caller
	Cancel <-chan struct{}

	// Umask is the calling process's umask on a create, mkdir, mknod
	// or tmpfile request (the kernel sends it since protocol 7.12), 0 on
	// every other request. The mode is sent with it already applied,
	// unless the server negotiated CAP_DONT_MASK
	// (MountOptions.ExtraCapabilities): the server then applies it, or
	// lets a default ACL on the parent replace it, as local file systems
	// do (acl(5)).
	Umask uint32

	// KillSuidgid is set on a write, open or create request on which the
	// kernel asks the server to clear the file's set-user-ID bit and,
	// where the caller is outside the file's group or the file is
	// group-executable, its set-group-ID bit, as a local file system
	// does (FUSE_WRITE_KILL_SUIDGID, FUSE_OPEN_KILL_SUIDGID with
	// O_TRUNC). The kernel sends these only when the server negotiated
	// CAP_HANDLE_KILLPRIV_V2 and the caller lacks CAP_FSETID. SETATTR
	// carries its own flag (FATTR_KILL_SUIDGID in SetAttrIn.Valid).
	KillSuidgid bool
}

func (c *Context) Deadline() (time.Time, bool) {
	return time.Time{}, false
}

func (c *Context) Done() <-chan struct{} {
	return c.Cancel
}

func (c *Context) Err() error {
	select {
	case <-c.Cancel:
		return context.Canceled
	default:
		return nil
	}
}

type callerKeyType struct{}

var callerKey callerKeyType

func FromContext(ctx context.Context) (*Caller, bool) {
	v, ok := ctx.Value(callerKey).(*Caller)
	return v, ok
}

func NewContext(ctx context.Context, caller *Caller) context.Context {
	return context.WithValue(ctx, callerKey, caller)
}

func (c *Context) Value(key any) any {
	if key == callerKey {
		return &c.Caller
	}
	return nil
}

var _ = context.Context((*Context)(nil))
