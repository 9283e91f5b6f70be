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
// already knows, with a lookup count that is not known: it is
// RestoreChildCount with lookups 0.
func (n *Inode) RestoreChild(name string, child *Inode) (*Inode, error) {
	return n.RestoreChildCount(name, child, 0)
}

// RestoreChildCount registers child, made with NewInode, as a node the
// kernel already knows: under the node ID child's StableAttr gives, as n's
// entry name (name "" registers it in no directory, as for a node whose
// parent the kernel may have forgotten), with the kernel's lookup count
// for it, lookups (the sum of what Options.OnLookupCount reported to the
// predecessor). With lookups 0 the count is not known: the node's first
// FORGET drops it whatever count it names, which is right when the kernel
// evicts the inode (it forgets with its whole count, fs/fuse/inode.c
// fuse_evict_inode) and early when it drops a single lookup (see
// Options.OnLookupCount). Neither OnLookupCount nor OnKernelRef is called
// for it. It returns the node registered, which is another one if a node
// of the same identity was registered first. It implies AdoptKernelRefs.
func (n *Inode) RestoreChildCount(name string, child *Inode, lookups uint64) (*Inode, error) {
	if !n.bridge.options.ExternalNodeID {
		return nil, fmt.Errorf("RestoreChild: needs Options.ExternalNodeID")
	}
	parent := n
	if name == "" {
		parent = nil
	}
	var out fuse.EntryOut
	got, _, e, _ := n.bridge.registerNode(parent, name, child, nil, 0, &out)
	n.bridge.ids.mu.Lock()
	if lookups == 0 {
		e.restored = true
	} else {
		// registerNode counted one; a node of the same identity
		// restored first had its own count, for this same node ID.
		e.lookupCount = lookups
	}
	n.bridge.ids.adopted = true
	n.bridge.ids.mu.Unlock()
	return got, nil
}

// AdoptKernelRefs tells the bridge that the connection was taken over
// from another server: the kernel may hold references to node IDs this
// server did not give out, or to more lookups of a node than this server
// answered (a node the predecessor did not record, looked up again here:
// the kernel adds the new lookups to the count it already held, in
// fs/fuse/inode.c fuse_iget). A FORGET naming more than the lookups this
// server answered then drops the node without a complaint. Call it before
// serving.
func (n *Inode) AdoptKernelRefs() {
	n.bridge.ids.mu.Lock()
	n.bridge.ids.adopted = true
	n.bridge.ids.mu.Unlock()
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
