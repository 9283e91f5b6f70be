// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fs

import (
	"syscall"
	"testing"
)

// TestDecLookupOverCount: a FORGET naming more lookups than the server
// answered (the kernel's count includes a predecessor's, after a takeover)
// drops the node instead of panicking: decLookup runs under the Inode's
// mu, which a panic would leave locked, hanging every later request on
// the node.
func TestDecLookupOverCount(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		var tab mapIdentityTable
		tab.initIdentityTable(0, true)
		tab.adopted = adopted
		id := StableAttr{Ino: 7, Mode: syscall.S_IFREG}
		child := &Inode{stableAttr: id, nodeId: 7}
		for i := 0; i < 5; i++ {
			if w, _, _, _ := tab.registerNew(id, child, false); w != child {
				t.Fatalf("adopted=%v: registerNew returned another node", adopted)
			}
		}
		if _, zero := tab.decLookup(7, 2); zero {
			t.Fatalf("adopted=%v: 5-2 lookups reached zero", adopted)
		}
		n, zero := tab.decLookup(7, 6)
		if n != child || !zero {
			t.Errorf("adopted=%v: decLookup(7, 6) with 3 left = %p, %v; want the node, true", adopted, n, zero)
		}
		if n, zero := tab.decLookup(8, 1); n != nil || !zero {
			t.Errorf("adopted=%v: decLookup of an unknown node = %p, %v; want nil, true", adopted, n, zero)
		}
	}
}
