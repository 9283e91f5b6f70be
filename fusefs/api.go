// Package fusefs serves a physical directory through FUSE (go-fuse's fs
// package): a race-safe passthrough where every backing call is relative to a
// directory descriptor, symlinks are contained, and every mutation asks a
// policy.Policy first.
package fusefs

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wsfs/wsfs/policy"
)

// SymlinkMode says how symlinks in the backing tree are presented.
type SymlinkMode string

// The symlink modes (DESIGN.md, "Symlinks").
const (
	// SymlinksContain shows in-root links with a text that reaches the same
	// physical object inside the mount, serves existing escaping links in
	// place (as their target) and refuses dangling escaping links (EACCES).
	SymlinksContain SymlinkMode = "contain"
	// SymlinksFollow shows every link as stored. For trusted trees only.
	SymlinksFollow SymlinkMode = "follow"
	// SymlinksResolve shows no symlinks: every link is served as its target.
	SymlinksResolve SymlinkMode = "resolve"
)

// ParseSymlinkMode returns the mode named s; "" is SymlinksContain.
func ParseSymlinkMode(s string) (SymlinkMode, error) {
	switch SymlinkMode(s) {
	case "":
		return SymlinksContain, nil
	case SymlinksContain, SymlinksFollow, SymlinksResolve:
		return SymlinkMode(s), nil
	}
	return "", fmt.Errorf("symlink mode %q: must be one of contain, follow, resolve", s)
}

// Config is what Mount needs. Nothing in it knows about sessions beyond the
// Session label used in logs.
type Config struct {
	// Root is the directory to serve, absolute. Mount serves its canonical
	// path (identity.Canonical) and refuses a root that is missing or not a
	// directory.
	Root string
	// Mountpoint is an existing directory, absolute. It may not be inside
	// Root nor contain it, and must be empty unless NonEmpty.
	Mountpoint string
	// Policy decides every operation; required. Replace it with SetPolicy.
	Policy *policy.Policy
	// Symlinks defaults to SymlinksContain.
	Symlinks SymlinkMode
	// AllowOther mounts with allow_other,default_permissions.
	AllowOther bool
	// NonEmpty allows a non-empty mountpoint.
	NonEmpty bool
	// Debug logs every FUSE request (go-fuse's debug output) to stderr.
	Debug bool
	// Logger receives denials and errors; nil means slog.Default().
	Logger *slog.Logger
	// Session labels log lines and metrics; may be empty.
	Session string
	// NoWatch turns off the inotify watcher that turns host-side changes
	// into kernel cache invalidations (see DefaultWatchedTimeout).
	NoWatch bool
	// EntryTimeout, AttrTimeout and NegativeTimeout are the kernel's cache
	// timeouts (fuse(4) entry_timeout, attr_timeout, negative_timeout).
	// 0 means the default: DefaultWatchedTimeout with the watcher;
	// DefaultTimeout (entry, attr) and no negative caching without it.
	// A negative value means 0 (no caching).
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
}

// DefaultTimeout is the entry and attr timeout of a mount without the watcher
// and of entries in directories it could not watch; it is go-fuse's
// loopback's.
const DefaultTimeout = time.Second
