package fusefs

import (
	"sync"
	"sync/atomic"
)

type opCode uint8

const (
	opLookup opCode = iota
	opGetattr
	opSetattr
	opAccess
	opOpen
	opCreate
	opMkdir
	opMknod
	opSymlink
	opReadlink
	opLink
	opUnlink
	opRmdir
	opRename
	opOpendir
	opStatfs
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opFallocate
	opCopyFileRange
	numOpCodes
)

var opCodeNames = [numOpCodes]string{
	"lookup", "getattr", "setattr", "access", "open", "create", "mkdir",
	"mknod", "symlink", "readlink", "link", "unlink", "rmdir", "rename",
	"opendir", "statfs", "getxattr", "listxattr", "setxattr", "removexattr",
	"fallocate", "copy_file_range",
}

// counters are lock-free on the hot path; denials are rare and take a lock.
type counters struct {
	ops     [numOpCodes]atomic.Uint64
	mu      sync.Mutex
	denials map[string]uint64
}

func (c *counters) op(o opCode) { c.ops[o].Add(1) }

func (c *counters) denied(rule string) {
	c.mu.Lock()
	if c.denials == nil {
		c.denials = map[string]uint64{}
	}
	c.denials[rule]++
	c.mu.Unlock()
}

func (c *counters) snapshot() Stats {
	s := Stats{Ops: map[string]uint64{}, Denials: map[string]uint64{}}
	for i := range c.ops {
		if v := c.ops[i].Load(); v != 0 {
			s.Ops[opCodeNames[i]] = v
		}
	}
	c.mu.Lock()
	for k, v := range c.denials {
		s.Denials[k] = v
	}
	c.mu.Unlock()
	return s
}
