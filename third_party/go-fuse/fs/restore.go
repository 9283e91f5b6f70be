// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fs

import (
	"fmt"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Restoring the kernel's references after a connection was taken over from
// another server (fuse.NewServerOnFD): the kernel still refers to nodes by
// the IDs and to open files by the handle numbers the earlier server gave
// it, so a successor registers its own nodes and handles under exactly
// those numbers before it serves. This needs Options.ExternalNodeID (node
// ID == StableAttr.Ino), so the same object gets the same ID in both.

// RestoreChild registers child, made with NewInode, as a node the kernel
// already knows: under the node ID child's StableAttr gives, as n's entry
// name (name "" registers it in no directory, as for a node whose parent
// the kernel may have forgotten). The kernel's lookup count for it is not
// known here; the kernel forgets an inode with its whole count at once
// (fs/fuse/inode.c fuse_evict_inode), so the first FORGET for a restored
// node drops it whatever count it names. It returns the node registered,
// which is another one if a node of the same identity was registered
// first.
func (n *Inode) RestoreChild(name string, child *Inode) (*Inode, error) {
	if !n.bridge.options.ExternalNodeID {
		return nil, fmt.Errorf("RestoreChild: needs Options.ExternalNodeID")
	}
	parent := n
	if name == "" {
		parent = nil
	}
	var out fuse.EntryOut
	got, _, e := n.bridge.addNewNode(parent, name, child, nil, 0, &out)
	n.bridge.ids.mu.Lock()
	e.restored = true
	n.bridge.ids.mu.Unlock()
	return got, nil
}

// RestoreFile registers f, open on node with open flags, under the file
// handle number fh the kernel already holds for it. Call it for every
// handle before serving: handle numbers given out later skip the restored
// ones.
func (n *Inode) RestoreFile(fh uint32, f FileHandle, flags uint32) error {
	if fh == 0 {
		return fmt.Errorf("RestoreFile: handle 0 is reserved")
	}
	t := &n.bridge.ids
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.nodes[n.nodeId]
	if e == nil {
		return fmt.Errorf("RestoreFile: node %d is not registered", n.nodeId)
	}
	for uint32(len(t.files)) <= fh {
		t.freeFiles = append(t.freeFiles, uint32(len(t.files)))
		t.files = append(t.files, nil)
	}
	if t.files[fh] != nil {
		return fmt.Errorf("RestoreFile: handle %d is in use", fh)
	}
	for i, free := range t.freeFiles {
		if free == fh {
			t.freeFiles = append(t.freeFiles[:i], t.freeFiles[i+1:]...)
			break
		}
	}
	fe := &fileEntry{fh: fh, file: f, inode: e.inode.Load(), nodeIndex: len(e.openFiles)}
	if _, ok := f.(FileReaddirenter); ok {
		fe.lastRead = dirEntryPool.Get().([]fuse.DirEntry)
	}
	t.files[fh] = fe
	e.openFiles = append(e.openFiles, fh)
	return nil
}
