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
	"github.com/wsfs/wsfs/transport"
)

// SymlinkMode says how symlinks in the backing tree are presented.
type SymlinkMode string

// The symlink modes (DESIGN.md, "Links are links"). A symlink is always
// shown as a symlink; the modes differ only in its text.
const (
	// SymlinksContain rewrites the text of a link that would leave the
	// session's mounts: an in-root target gets a text that reaches it
	// inside the mount, an outside one the host view's path of its key.
	SymlinksContain SymlinkMode = "contain"
	// SymlinksFollow shows every link as stored. For trusted trees (and the
	// jail's view).
	SymlinksFollow SymlinkMode = "follow"
)

// ParseSymlinkMode returns the mode named s; "" is SymlinksContain. The
// removed "resolve" mode (links served as their targets) is refused.
func ParseSymlinkMode(s string) (SymlinkMode, error) {
	switch SymlinkMode(s) {
	case "":
		return SymlinksContain, nil
	case SymlinksContain, SymlinksFollow:
		return SymlinkMode(s), nil
	case "resolve":
		return "", fmt.Errorf("symlink mode %q: removed (links are always shown as links); use contain or follow", s)
	}
	return "", fmt.Errorf("symlink mode %q: must be one of contain, follow", s)
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
	// HostView is the session's host view mountpoint (MountHostView),
	// absolute: in contain mode a link whose target is outside the root is
	// shown with the text HostView + key (identity.TargetKey of the
	// target). Empty: such links show the key itself (the physical path).
	HostView string
	// AllowOther mounts with allow_other (every mount has
	// default_permissions).
	AllowOther bool
	// Users are the uids besides root and the server's own that may use
	// the mount (CheckUsers' rule): when given the mount is made
	// allow_other and every request of another uid is refused with EACCES,
	// logged and counted as a denial (rule "users:not-listed"). Empty:
	// AllowOther alone decides (owner-only without it).
	Users []uint32
	// Backing, when set, is the directory whose tree is served in Root's
	// place (a layered session's merged overlay: mounts/layer.go): the
	// root descriptor is opened there and every backing call goes below
	// it, while Root stays the identity of the tree (what every policy
	// decision, link rule, log line and kept state names). A descriptor's
	// path under Backing is judged as the same path under Root. Absolute
	// and physical (a symlink on the way is refused, and one swapped in
	// before it is opened fails with ELOOP), so that a
	// directory another mount's sessions can change (a sub-session's root
	// in its parent's layer) cannot redirect the mount.
	Backing string
	// Lower, with Backing, is the directory under Backing's overlay (a
	// layered session's project, canonical), whose objects' identities the
	// policy protects: an object of the overlay is identified by its
	// origin's (dev, ino) there (overlay.go), so a hard link, in the
	// project or made in the layer, reaching a protected file is protected
	// too. An object with no origin (made in the layer) has no identity
	// there: the path rules alone decide it. Empty: objects are identified
	// by their own (dev, ino).
	Lower string
	// BeforeWrite, when set, is called with the path (Root's) of every
	// write the policy allows, before the write is made: a layered session
	// records there what the project held before the layer changed it.
	// Called on the request path: it must be quick and must not use the
	// mount.
	BeforeWrite func(path string)
	// Hidden, Shared and Owner are the session's host view's
	// (HostViewConfig): a mount inside Root is decided at its source, and
	// one whose source lies in a place the host view hides (DefaultHidden,
	// Hidden, the places Shared holds for owners other than Owner) is
	// hidden as that place is (EACCES "hostview:hidden"). Hidden entries
	// must be absolute.
	Hidden []string
	Shared *PlaceIndex
	Owner  string
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
	// NoPassthrough serves file data through the server even as root: no
	// backing file is registered, so every read and write reaches it (as
	// on a mount served by an ordinary user). For measurements (the cost
	// of deciding every write: hack/revocation-cost.sh).
	NoPassthrough bool
	// EntryTimeout, AttrTimeout and NegativeTimeout are the kernel's cache
	// timeouts (fuse(4) entry_timeout, attr_timeout, negative_timeout).
	// 0 means the default: DefaultWatchedTimeout with the watcher;
	// DefaultTimeout (entry, attr) and no negative caching without it.
	// A negative value means 0 (no caching).
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration

	// Keep, when set, keeps the connection in this descriptor store so
	// that it outlives the process (DESIGN.md, "Round 4"; keep.go): its
	// /dev/fuse descriptor and a state from which a successor serves it
	// on (Adopt). Unmount removes it from the store.
	Keep transport.Store
	// Adopt, when set, serves this connection taken from a store
	// (transport.TakeConns) instead of mounting: no mount(2), no INIT, the
	// kernel's nodes and open handles restored, what the predecessor left
	// unanswered asked for again. Its Meta must name the same root and
	// mountpoint. On error the caller still owns it (Close, Forget).
	Adopt *transport.Conn
	// Transport is how requests reach the server (transport.Mode: auto,
	// io-uring, dev); empty is transport.Resolve's default ($WSFS_TEST_FUSE_TRANSPORT
	// when set, else auto: FUSE over io_uring when the kernel offers it).
	Transport transport.Mode
}

// DefaultTimeout is the entry and attr timeout of a mount without the watcher
// and of entries in directories it could not watch; it is go-fuse's
// loopback's.
const DefaultTimeout = time.Second
