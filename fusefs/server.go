package fusefs

import "github.com/wsfs/wsfs/policy"

// SKELETON until the mount lands.

// Server is one mounted file system.
type Server struct{}

// Mount validates cfg, mounts and returns once the kernel serves the mount.
// Errors are one line naming the input and the rule; on error nothing is left
// mounted.
func Mount(cfg Config) (*Server, error) { panic("unimplemented") }

// Root returns the canonical physical root being served.
func (s *Server) Root() string { panic("unimplemented") }

// Mountpoint returns the mountpoint.
func (s *Server) Mountpoint() string { panic("unimplemented") }

// SetPolicy replaces the policy; the next operation of every process sees it.
func (s *Server) SetPolicy(p *policy.Policy) { panic("unimplemented") }

// Policy returns the policy in force.
func (s *Server) Policy() *policy.Policy { panic("unimplemented") }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { panic("unimplemented") }

// Unmount unmounts; a busy mount gives a *BusyError unless force, which
// detaches lazily (MNT_DETACH).
func (s *Server) Unmount(force bool) error { panic("unimplemented") }

// Wait blocks until the mount is gone (unmounted by anyone).
func (s *Server) Wait() { panic("unimplemented") }

// Stats are counters since the mount.
type Stats struct {
	// Ops counts FUSE operations by name ("lookup", "getattr", ...).
	Ops map[string]uint64
	// Denials counts policy denials by rule.
	Denials map[string]uint64
}

// BusyError is Unmount's error when processes still use the mount.
type BusyError struct {
	Mountpoint string
	Holders    []Holder
}

// Holder is a process that holds a mount busy.
type Holder struct {
	PID  int
	Comm string
	What string // "cwd", "root", "fd 3", "exe", "maps"
}

func (e *BusyError) Error() string { panic("unimplemented") }

// Unmount unmounts the wsfs mount at mountpoint from outside its server (the
// `wsfs unmount` verb): it clears a dead (ENOTCONN) mount too. force detaches
// lazily when busy.
func Unmount(mountpoint string, force bool) error { panic("unimplemented") }
