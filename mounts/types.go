package mounts

// The types of the Manager's API: what Create takes and what the queries
// return, as the JSON API prints them.

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds the session records, event logs and per-session temp
	// directories; absolute. New creates it (mode 0700) when missing. One
	// Manager at a time may use a state directory (an flock on
	// StateDir/lock enforces it).
	StateDir string
	// MountBase is the parent of default mountpoints (<MountBase>/<id>);
	// absolute. New creates it (mode 0755) when missing; Close removes it
	// again, when empty, if New made it (with the parents it made for it)
	// or OwnMountBase says it is the daemon's own.
	MountBase string
	// OwnMountBase says MountBase is the daemon's own directory (wsfs
	// serve's default, <socket's directory>/mnt), which Close removes when
	// empty even when an earlier daemon made it (a successor after a
	// detach, whose kept mounts were in it).
	OwnMountBase bool
	// Logger receives lifecycle lines and is handed to every mount for its
	// denials; nil means slog.Default().
	Logger *slog.Logger
	// Hidden are further absolute paths every session's host view hides
	// (wsfs serve: its socket); the state directory, the mount base and the
	// other sessions are hidden anyway.
	Hidden []string
	// Store, when set, keeps every session's connections (its mount and
	// its host view) outside the process (DESIGN.md, "Round 4"), so that
	// they survive the daemon: Recover serves the ones kept there on
	// (transport.TakeConns) instead of mounting again, and Detach stops
	// without unmounting. nil: connections end with the process.
	Store transport.Store
	// JailReaper, when set, starts the jail reaper at the first jail
	// (StartJailReaper; again at the next jail when it failed, logged):
	// it is handed every jail the Manager registers (AddJail) and ends
	// those still running when the daemon exits, a kill -9 included
	// (their views die with it). nil: a killed daemon's jails run on
	// until the next daemon's Recover ends them from their records.
	// Unused with a Store: the jails' views are kept then, and the jails
	// outlive the daemon with them (jailkeep.go).
	JailReaper func() (*JailReaper, error)
	// Takeover, when the state directory's lock is held by a live daemon,
	// asks it to stop (SIGTERM: it detaches, see Detach) and waits for
	// the lock, instead of refusing. A second successor that loses the
	// race is refused, naming the winner.
	Takeover bool
	// FuseTransport is how every mount's requests reach the daemon
	// (transport.Mode: auto, io-uring, dev; `--fuse-transport`); empty
	// is transport.Resolve's default (auto).
	FuseTransport transport.Mode
}

// Spec is what Create needs: one new session.
type Spec struct {
	// ID names the session: 1 to 64 of [A-Za-z0-9._-], not "." or "..".
	ID string `json:"id"`
	// Root is the project directory as the host spells it (the origin):
	// absolute, an existing directory. The mount serves its physical path
	// (identity.Canonical), so ".../link/.." means link's target's parent.
	// The physical root may not be, be inside or contain the state
	// directory, the mount base or another session's mountpoint; it may
	// overlap another session's root.
	Root string `json:"root"`
	// Mountpoint is where to mount, absolute; empty means <MountBase>/<ID>.
	// It is made when missing (and removed again by Remove); an existing one
	// must be an empty directory. It may not be inside the root nor contain
	// it, nor be inside another session's physical root.
	Mountpoint string `json:"mountpoint,omitempty"`
	// Policy is the session's policy. Primary may be left empty (it is set to
	// the physical root); when given it must name the same directory.
	Policy policy.Spec `json:"policy"`
	// Symlinks is the symlink mode; empty means fusefs.SymlinksContain.
	Symlinks fusefs.SymlinkMode `json:"symlinks,omitempty"`
	// Parent, when set, names a session whose current working directory the
	// new session starts in (it must lie inside the new session's root).
	Parent string `json:"parent,omitempty"`
	// Cwd, when set, is the starting working directory: relative to the
	// mount root, absolute inside the mountpoint, or an absolute host path
	// inside the root. At most one of Parent and Cwd may be set.
	Cwd string `json:"cwd,omitempty"`
	// AllowWrite are directories a jail of this session (wsfs exec
	// --confine) may write directly, besides its temp directory (a build
	// cache, say): absolute, existing directories, neither inside the root
	// nor containing it (writes there are the mount's to decide), nor "/".
	// Stored canonical.
	AllowWrite []string `json:"allow_write,omitempty"`
	// Users are the uids besides root that may use the session's mount,
	// host view and jail views (fusefs.CheckUsers' rule: at most 64, no 0,
	// no duplicates): the mounts are made allow_other and the server
	// refuses every other uid with EACCES, logged. Empty: only root (the
	// daemon's own user). A sub-session without Users inherits the
	// parent's; one listing a uid its parent does not serve is refused.
	// Objects belong to their creator (DESIGN.md, "Owners"); the session's
	// temp directory is then mode 1777, so a jail run as a listed uid can
	// write its TMPDIR.
	Users []uint32 `json:"users,omitempty"`
	// Labels are free-form key/value pairs kept in the record and added to
	// every log line of the session's mount, denials included (the CSI
	// plugin puts the pod's identity here). See ValidLabels for the rule.
	Labels map[string]string `json:"labels,omitempty"`
	// Layer puts the session on a copy-on-write layer in the daemon's
	// state, <state>/layers/<id> (layer.go): the mount serves the project
	// with the session's changes on top, and the project changes only at
	// Commit. The layer is removed with the session. Refused with Parent:
	// a sub-session of a layered session serves its parent's layer below
	// its root (Session.LayerOf), a sub-session of any other has none.
	Layer bool `json:"layer,omitempty"`
}

// Session is a snapshot of one session, as Get, List and Create return it
// and as the API prints it.
type Session struct {
	ID string `json:"id"`
	// Origin is the root as the client spelled it.
	Origin string `json:"origin"`
	// Root is the physical root the mount serves.
	Root string `json:"root"`
	// Mountpoint is the canonical mountpoint.
	Mountpoint string `json:"mountpoint"`
	// Mode is the policy's mode (defaults filled in).
	Mode policy.Mode `json:"mode"`
	// Policy is the policy spec in force, every default filled in (the
	// compiled spec: canonical roots, the mode, the temp entries that exist,
	// the protected list); for a session that could not be mounted, the
	// recorded spec.
	Policy   policy.Spec        `json:"policy"`
	Symlinks fusefs.SymlinkMode `json:"symlinks"`
	Parent   string             `json:"parent,omitempty"`
	// Cwd is the current working directory as a path inside the mount, as
	// last set (Get does not validate it; Manager.Cwd does).
	Cwd string `json:"cwd"`
	// CwdPhysical is Cwd's physical path on the host.
	CwdPhysical string `json:"cwd_physical"`
	// TmpDir is the session's private temp directory (mode 0700), used as
	// TMPDIR by `wsfs exec`.
	TmpDir string `json:"tmpdir"`
	// AllowWrite are the directories the session's jails may write
	// directly (Spec.AllowWrite, canonical).
	AllowWrite []string `json:"allow_write,omitempty"`
	// Users are the uids the session serves besides root (Spec.Users).
	Users   []uint32  `json:"users,omitempty"`
	Created time.Time `json:"created"`
	// State is "mounted", or "failed" when Recover could not mount the
	// session again or could not read its record, or when its mount went
	// away from outside the daemon (Error says why; Remove still works).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Labels are the labels given at Create.
	Labels map[string]string `json:"labels,omitempty"`
	// Layer is the session's layer directory, "" without a layer.
	Layer string `json:"layer,omitempty"`
	// LayerOf is, for a sub-session of a layered session, the session
	// whose layer its mount serves (record.LayerOf); "" otherwise.
	LayerOf string `json:"layer_of,omitempty"`
	// Transport is how requests reach the session's mount:
	// transport.NameURing ("io-uring", FUSE over io_uring) or
	// transport.NameDev ("/dev/fuse"); "" while it is not mounted.
	Transport string `json:"transport,omitempty"`
}

// The session states.
const (
	StateMounted = "mounted"
	StateFailed  = "failed"
)

// WorkDir is a session's working directory, as Cwd and Chdir return it
// (api.WorkDir: session, path inside the mount, physical path, whether this
// call changed it, and the events it logged).
type WorkDir = api.WorkDir

// Decision is a policy decision in JSON form (api.Decision: allow, errno
// name, rule).
type Decision = api.Decision

// Resolution is Resolve's answer for one path (api.Resolution). Display is
// the lexical join with Cwd, or MountPath (Key when the walk left the mount)
// when the path has a ".." segment (resolver.Display's rule, in the mount's
// namespace); Key is identity.TargetKey's; MountPath is empty when the walk
// leaves the mount, in which case FUSE never sees the access.
type Resolution = api.Resolution

// SessionStats are one mounted session's counters, for metrics.
type SessionStats struct {
	ID    string
	Stats fusefs.Stats
}

// MaxLabels bounds the number of a session's labels.
const MaxLabels = 32

// ValidLabels returns nil when labels are acceptable: at most MaxLabels;
// each key 1 to 128 bytes of printable ASCII without space, quote, backslash
// or '='; each value at most 1024 bytes of UTF-8 without control characters
// (labels go into log lines as they are).
func ValidLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("labels: %d given, at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if len(k) == 0 || len(k) > 128 || strings.IndexFunc(k, func(r rune) bool {
			return r <= ' ' || r > '~' || r == '"' || r == '\\' || r == '='
		}) >= 0 {
			return fmt.Errorf("label key %q: must be 1 to 128 printable ASCII characters without space, quote, backslash or '='", k)
		}
		if len(v) > 1024 || strings.IndexFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f || r == utf8.RuneError }) >= 0 {
			return fmt.Errorf("label %q value %q: must be at most 1024 bytes without control characters", k, v)
		}
	}
	return nil
}

// idPattern is the rule for session ids.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidID returns nil when id is a valid session id, else an ErrInvalid
// naming the rule.
func ValidID(id string) error {
	if !idPattern.MatchString(id) || id == "." || id == ".." {
		return errorf(CodeInvalid, "session id %q: must be 1 to 64 of A-Z a-z 0-9 . _ - and not \".\" or \"..\"", id)
	}
	return nil
}
