// Package mounts owns wsfs sessions: it creates, mounts, lists, removes and
// recovers them, keeps a durable record of each under a state directory,
// keeps each session's logged working directory, and answers the daemon's
// JSON API (see docs/api.md).
//
// A session is a FUSE mount (package fusefs) of one project directory, with
// its own policy, mountpoint and working directory. The rules are those of
// DESIGN.md, "Sessions and the daemon" and "Errors and bad input": every
// refusal is an *Error with a stable Code and a one-line message naming the
// input and the rule, and nothing is half-done — a failed Create leaves no
// mountpoint, record or mount behind, a failed SetPolicy leaves the old
// policy in force, a failed Chdir logs nothing.
package mounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds the session records, event logs and per-session temp
	// directories; absolute. New creates it (mode 0700) when missing. One
	// Manager at a time may use a state directory (an flock on
	// StateDir/lock enforces it).
	StateDir string
	// MountBase is the parent of default mountpoints (<MountBase>/<id>);
	// absolute. New creates it (mode 0755) when missing.
	MountBase string
	// Logger receives lifecycle lines and is handed to every mount for its
	// denials; nil means slog.Default().
	Logger *slog.Logger
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
	// Policy is the policy spec in force (as given, Primary set to Root).
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
	TmpDir  string    `json:"tmpdir"`
	Created time.Time `json:"created"`
	// State is "mounted", or "failed" when Recover could not mount the
	// session again or could not read its record (Error says why; Remove
	// still works).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// The session states.
const (
	StateMounted = "mounted"
	StateFailed  = "failed"
)

// WorkDir is a session's working directory, as Cwd and Chdir return it.
type WorkDir struct {
	Session string `json:"session"`
	// Path is the directory inside the mount.
	Path string `json:"path"`
	// Physical is the directory's physical path on the host.
	Physical string `json:"physical"`
	// Changed is true when this call changed the directory (a cd to a new
	// directory, or a recovery to the origin).
	Changed bool `json:"changed"`
	// Events are the events this call logged, oldest first: a "recover"
	// when the old directory had vanished, then a "cd".
	Events []Event `json:"events,omitempty"`
}

// Decision is a policy decision in JSON form.
type Decision struct {
	Allow bool `json:"allow"`
	// Errno names the errno a denial gives ("EROFS", "EACCES", ...).
	Errno string `json:"errno,omitempty"`
	// Rule names the rule that decided (policy.Decision.Rule).
	Rule string `json:"rule"`
}

// Resolution is Resolve's answer for one path.
type Resolution struct {
	Session string `json:"session"`
	// Path is the path as asked.
	Path string `json:"path"`
	// Cwd is the session's directory (inside the mount) a relative path was
	// resolved against.
	Cwd string `json:"cwd"`
	// Display is the path as a process in the session spells it: the
	// lexical join with Cwd, or MountPath (Key when the walk left the
	// mount) when the path has a ".." segment (resolver.Target.Display's
	// rule, in the mount's namespace).
	Display string `json:"display"`
	// Key is the physical key on the host: the object the kernel reaches,
	// or would create (identity.TargetKey).
	Key string `json:"key"`
	// MountPath is the object's path inside the mount; empty when the walk
	// leaves the mount (an absolute path elsewhere, or ".." above the mount
	// root), in which case FUSE never sees the access.
	MountPath string `json:"mount_path,omitempty"`
	// Read and Write are the policy's decisions on Key.
	Read  Decision `json:"read"`
	Write Decision `json:"write"`
}

// SessionStats are one mounted session's counters, for metrics.
type SessionStats struct {
	ID    string
	Stats fusefs.Stats
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

// Manager owns the sessions of one daemon. Its methods are safe for
// concurrent use; calls on one session are serialized (a per-session mutex),
// calls on different sessions run in parallel.
type Manager struct {
	stateDir  string // canonical
	sessDir   string // <state>/sessions: records, event logs, intents
	tmpBase   string // <state>/tmp: per-session temp directories
	mountBase string // canonical
	log       *slog.Logger
	lock      *os.File

	mu          sync.Mutex
	sessions    map[string]*session // published and being created
	mountpoints map[string]string   // canonical mountpoint → id, incl. creates in progress
	roots       map[string]string   // id → physical root, incl. creates in progress
	closed      bool
}

// session is the Manager's state of one session. rec.ID, Origin, Root,
// Mountpoint, TmpDir and Created never change; the rest is guarded by mu.
type session struct {
	mu       sync.Mutex
	rec      record
	srv      *fusefs.Server // nil when failed
	pol      *policy.Policy
	events   *eventLog
	cwd      string // relative to the mount root; "." is the root
	failed   string // why Recover could not mount it; "" when mounted
	creating bool   // Create is still working on it: invisible to others
	gone     bool   // removed
	// unreadable is true when Recover could not read the record: rec has
	// only ID and TmpDir, and the session is failed.
	unreadable bool
	// rootID is the (dev, ino) of the physical root the mount serves, taken
	// just before mounting: the walks of Chdir and Resolve go by path, and
	// check first that the path still names this directory.
	rootID identity.FileID
}

// New opens the state directory (taking its lock) and the mount base,
// making both when missing. It does not mount anything: call Recover next.
func New(cfg Config) (*Manager, error) {
	for name, dir := range map[string]string{"state directory": cfg.StateDir, "mount base": cfg.MountBase} {
		if dir == "" {
			return nil, errorf(CodeInvalid, "%s: required", name)
		}
		if !filepath.IsAbs(dir) {
			return nil, errorf(CodeInvalid, "%s %q: must be an absolute path", name, dir)
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, errorf(CodeInvalid, "state directory %q: %w", cfg.StateDir, err)
	}
	if err := os.MkdirAll(cfg.MountBase, 0o755); err != nil {
		return nil, errorf(CodeInvalid, "mount base %q: %w", cfg.MountBase, err)
	}
	state, err := identity.Canonical(cfg.StateDir)
	if err != nil {
		return nil, errorf(CodeInvalid, "state directory %q: %w", cfg.StateDir, err)
	}
	base, err := identity.Canonical(cfg.MountBase)
	if err != nil {
		return nil, errorf(CodeInvalid, "mount base %q: %w", cfg.MountBase, err)
	}
	m := &Manager{
		stateDir:    state,
		sessDir:     filepath.Join(state, "sessions"),
		tmpBase:     filepath.Join(state, "tmp"),
		mountBase:   base,
		log:         cfg.Logger,
		sessions:    make(map[string]*session),
		mountpoints: make(map[string]string),
		roots:       make(map[string]string),
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	for _, d := range []string{m.sessDir, m.tmpBase} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, errorf(CodeInternal, "state directory %q: %w", d, err)
		}
	}
	lockPath := filepath.Join(state, "lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errorf(CodeInternal, "state directory lock %s: %w", lockPath, err)
	}
	if err := takeLock(f, lockPath, m.sessDir); err != nil {
		f.Close()
		return nil, errorf(CodeExists, "state directory %s: in use by another wsfs daemon (lock %s: %v)", state, lockPath, err)
	}
	m.lock = f
	return m, nil
}

// StateDir returns the canonical state directory.
func (m *Manager) StateDir() string { return m.stateDir }

// MountBase returns the canonical mount base.
func (m *Manager) MountBase() string { return m.mountBase }

// within reports whether p is dir or lies below it (both clean, absolute).
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// inMount returns the path inside mountpoint mp of rel ("." is mp).
func inMount(mp, rel string) string {
	if rel == "." || rel == "" {
		return mp
	}
	return mp + "/" + rel
}

// snapshot returns the public view of s; s.mu must be held.
func (s *session) snapshot() Session {
	out := Session{
		ID:         s.rec.ID,
		Origin:     s.rec.Origin,
		Root:       s.rec.Root,
		Mountpoint: s.rec.Mountpoint,
		Policy:     s.rec.Policy,
		Symlinks:   s.rec.Symlinks,
		Parent:     s.rec.Parent,
		Cwd:        inMount(s.rec.Mountpoint, s.cwd),
		TmpDir:     s.rec.TmpDir,
		Created:    s.rec.Created,
		State:      StateMounted,
	}
	out.CwdPhysical = physicalOf(s.rec.Root, s.cwd)
	if s.pol != nil {
		out.Mode = s.pol.Mode()
	} else if out.Mode = s.rec.Policy.Mode; out.Mode == "" && !s.unreadable {
		out.Mode = policy.ModeWorkspaceWrite
	}
	if s.failed != "" {
		out.State, out.Error = StateFailed, s.failed
	}
	return out
}

// physicalOf returns the physical path of the directory rel inside a mount
// of root: the host walk of root/rel (an escaping link served in place leads
// to its target). When the walk fails, the lexical join is returned.
func physicalOf(root, rel string) string {
	if root == "" {
		return "" // an unreadable record
	}
	p := filepath.Join(root, rel)
	if c, err := identity.Canonical(p); err == nil {
		return c
	}
	return p
}

// lookup returns the published session id, or ErrNotFound.
func (m *Manager) lookup(id string) (*session, error) {
	m.mu.Lock()
	s, ok := m.sessions[id]
	m.mu.Unlock()
	if !ok || s.creating {
		return nil, errorf(CodeNotFound, "session %q: no such session", id)
	}
	return s, nil
}

// locked returns session id locked, or ErrNotFound (also when it was removed
// while the caller waited for the lock). With mounted, a session in the
// failed state is refused with ErrFailed.
func (m *Manager) locked(id string, mounted bool) (*session, error) {
	s, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return nil, errorf(CodeNotFound, "session %q: no such session", id)
	}
	if mounted && s.failed != "" {
		s.mu.Unlock()
		return nil, errorf(CodeFailed, "session %q: not mounted: %s", id, s.failed)
	}
	return s, nil
}

// Get returns session id, or ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (Session, error) {
	s, err := m.locked(id, false)
	if err != nil {
		return Session{}, err
	}
	defer s.mu.Unlock()
	return s.snapshot(), nil
}

// List returns every session, sorted by id.
func (m *Manager) List(ctx context.Context) []Session {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if !s.creating {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	out := make([]Session, 0, len(all))
	for _, s := range all {
		s.mu.Lock()
		if !s.gone {
			out = append(out, s.snapshot())
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Len returns the number of sessions (mounted or failed).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.sessions {
		if !s.creating {
			n++
		}
	}
	return n
}

// Stats returns the counters of every mounted session, sorted by id.
func (m *Manager) Stats() []SessionStats {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if !s.creating {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	var out []SessionStats
	for _, s := range all {
		s.mu.Lock()
		srv, id := s.srv, s.rec.ID
		gone := s.gone
		s.mu.Unlock()
		if srv != nil && !gone {
			out = append(out, SessionStats{ID: id, Stats: srv.Stats()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// undoStack collects the reversal of each step of a multi-step change.
type undoStack []func()

// run undoes every step, last first.
func (u undoStack) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// Create makes a session: it checks the id, resolves the origin physically,
// compiles the policy, makes the mountpoint, mounts, sets the starting
// directory and writes the record durably — in that order, undoing every
// step when a later one fails, so that an error leaves no mountpoint, record,
// event log or mount behind.
//
// Errors: ErrInvalid (bad id, relative, missing or non-directory root, a
// root nested with the state directory, the mount base or another session's
// mountpoint, bad symlink mode, policy that does not compile, mountpoint
// inside the root or containing it or inside another session's root or not
// an empty directory, bad parent or cwd), ErrExists (id or mountpoint in
// use), ErrRootChanged (the root was replaced while it was being mounted),
// CodeInternal (the mount or a state write failed).
func (m *Manager) Create(ctx context.Context, spec Spec) (Session, error) {
	if err := ValidID(spec.ID); err != nil {
		return Session{}, err
	}
	s := &session{creating: true}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Session{}, errorf(CodeInternal, "session %q: the daemon is shutting down", spec.ID)
	}
	if _, ok := m.sessions[spec.ID]; ok {
		m.mu.Unlock()
		return Session{}, errorf(CodeExists, "session %q: already exists", spec.ID)
	}
	m.sessions[spec.ID] = s
	m.mu.Unlock()

	var mpKey string
	err := m.create(ctx, spec, s, &mpKey)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.sessions, spec.ID)
		delete(m.roots, spec.ID)
		if mpKey != "" && m.mountpoints[mpKey] == spec.ID {
			delete(m.mountpoints, mpKey)
		}
		return Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creating = false
	m.log.Info("session created", "session", spec.ID, "root", s.rec.Root, "mountpoint", s.rec.Mountpoint)
	return s.snapshot(), nil
}

// create does Create's work; *mpKey is set once the mountpoint is reserved.
func (m *Manager) create(ctx context.Context, spec Spec, s *session, mpKey *string) (err error) {
	id := spec.ID
	var undo undoStack
	defer func() {
		if err != nil {
			undo.run()
		}
	}()

	// The origin, resolved physically.
	origin := spec.Root
	switch {
	case origin == "":
		return errorf(CodeInvalid, "session %q: root is required", id)
	case !filepath.IsAbs(origin):
		return errorf(CodeInvalid, "session %q: root %q: must be an absolute path", id, origin)
	}
	// Refused before it is touched: the daemon does not walk its own mounts.
	if err := m.checkPlace(id, origin, filepath.Clean(origin), "", ""); err != nil {
		return err
	}
	fi, err := os.Stat(origin)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errorf(CodeInvalid, "session %q: root %q: no such directory", id, origin)
	case err != nil:
		return errorf(CodeInvalid, "session %q: root %q: %v", id, origin, errnoText(err))
	case !fi.IsDir():
		return errorf(CodeInvalid, "session %q: root %q: not a directory", id, origin)
	}
	root, err := identity.Canonical(origin)
	if err != nil {
		return errorf(CodeInvalid, "session %q: root %q: %v", id, origin, errnoText(err))
	}
	if err := m.checkPlace(id, origin, root, "", ""); err != nil {
		return err
	}

	symlinks, err := fusefs.ParseSymlinkMode(string(spec.Symlinks))
	if err != nil {
		return errorf(CodeInvalid, "session %q: %v", id, err)
	}
	pspec, pol, err := compilePolicy(id, root, spec.Policy)
	if err != nil {
		return err
	}

	// The starting directory, from the parent (validated again once mounted).
	if spec.Parent != "" && spec.Cwd != "" {
		return errorf(CodeInvalid, "session %q: parent %q and cwd %q: give at most one", id, spec.Parent, spec.Cwd)
	}
	startRel := "."
	if spec.Parent != "" {
		if spec.Parent == id {
			return errorf(CodeInvalid, "session %q: parent %q: a session cannot be its own parent", id, spec.Parent)
		}
		pd, perr := m.Cwd(ctx, spec.Parent)
		if perr != nil {
			if CodeOf(perr) == CodeNotFound {
				return errorf(CodeInvalid, "session %q: parent %q: no such session", id, spec.Parent)
			}
			return errorf(CodeOf(perr), "session %q: parent: %v", id, perr)
		}
		if !within(pd.Physical, root) {
			return errorf(CodeInvalid, "session %q: parent %q's directory %s is outside the root %s", id, spec.Parent, pd.Physical, root)
		}
		startRel, _ = filepath.Rel(root, pd.Physical)
	}

	// The mountpoint: checked, reserved, recorded as an intent, made.
	mp := spec.Mountpoint
	if mp == "" {
		mp = filepath.Join(m.mountBase, id)
	} else if !filepath.IsAbs(mp) {
		return errorf(CodeInvalid, "session %q: mountpoint %q: must be an absolute path", id, mp)
	}
	if err := m.checkNotInMount(id, filepath.Clean(mp)); err != nil {
		return err
	}
	key, err := identity.TargetKey(mp)
	if err != nil {
		return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, errnoText(err))
	}
	switch {
	case within(key, root):
		return errorf(CodeInvalid, "session %q: mountpoint %q is inside the root %s (the mount would contain itself)", id, mp, root)
	case within(root, key):
		return errorf(CodeInvalid, "session %q: mountpoint %q contains the root %s", id, mp, root)
	case within(key, m.stateDir) || within(m.stateDir, key):
		return errorf(CodeInvalid, "session %q: mountpoint %q overlaps the state directory %s", id, mp, m.stateDir)
	}
	if err := m.checkNotInMount(id, key); err != nil {
		return err
	}
	// Checked again and reserved at once, so that two creates in parallel
	// cannot nest either.
	m.mu.Lock()
	owner, taken := m.mountpoints[key]
	perr := m.checkPlaceLocked(id, origin, root, mp, key)
	if !taken && perr == nil {
		m.mountpoints[key] = id
		m.roots[id] = root
		*mpKey = key
	}
	m.mu.Unlock()
	if taken {
		return errorf(CodeExists, "session %q: mountpoint %q is in use by session %q", id, mp, owner)
	}
	if perr != nil {
		return perr
	}
	if table, terr := fusefs.MountTable(); terr == nil && table[key] != (fusefs.MountEntry{}) {
		return errorf(CodeExists, "session %q: mountpoint %q is already a mount point", id, mp)
	}
	existed := false
	switch fi, err := os.Lstat(key); {
	case err == nil && !fi.IsDir():
		return errorf(CodeInvalid, "session %q: mountpoint %q: not a directory", id, mp)
	case err == nil:
		existed = true
		if empty, eerr := dirEmpty(key); eerr != nil {
			return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, errnoText(eerr))
		} else if !empty {
			return errorf(CodeInvalid, "session %q: mountpoint %q: not empty", id, mp)
		}
	case !errors.Is(err, os.ErrNotExist):
		return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, errnoText(err))
	}
	if !existed && !isDir(filepath.Dir(key)) {
		return errorf(CodeInvalid, "session %q: mountpoint %q: parent directory %s does not exist", id, mp, filepath.Dir(key))
	}
	if err := ctx.Err(); err != nil {
		return errorf(CodeInternal, "session %q: create: %v", id, err)
	}

	tmpDir := filepath.Join(m.tmpBase, id)
	intentPath := filepath.Join(m.sessDir, id+".pending")
	intent, _ := json.Marshal(pending{Mountpoint: key, Existed: existed, TmpDir: tmpDir})
	if err := os.WriteFile(intentPath, intent, 0o600); err != nil {
		return errorf(CodeInternal, "session %q: intent %s: %v", id, intentPath, errnoText(err))
	}
	undo = append(undo, func() { os.Remove(intentPath) })
	if !existed {
		if err := os.Mkdir(key, 0o755); err != nil {
			return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, errnoText(err))
		}
		undo = append(undo, func() { os.Remove(key) })
	}
	if err := os.RemoveAll(tmpDir); err != nil {
		return errorf(CodeInternal, "session %q: temp directory %s: %v", id, tmpDir, errnoText(err))
	}
	if err := os.Mkdir(tmpDir, 0o700); err != nil {
		return errorf(CodeInternal, "session %q: temp directory %s: %v", id, tmpDir, errnoText(err))
	}
	undo = append(undo, func() { os.RemoveAll(tmpDir) })
	eventsPath := filepath.Join(m.sessDir, id+".events")
	events, _, err := openEventLog(eventsPath, true)
	if err != nil {
		return errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	undo = append(undo, func() { events.close(); os.Remove(eventsPath) })

	if spec.Policy.Temp == nil {
		// The session's temp area is its own temp directory, not the
		// host's /tmp shared by every session (and what exec --confine
		// exports as TMPDIR). Compiled again now that it exists.
		ps := spec.Policy
		ps.Temp = []string{tmpDir}
		if pspec, pol, err = compilePolicy(id, root, ps); err != nil {
			return err
		}
	}
	rootID, err := rootFileID(root)
	if err != nil {
		return errorf(CodeInvalid, "session %q: root %q (physical %s): %v", id, origin, root, err)
	}
	srv, err := fusefs.Mount(fusefs.Config{
		Root: root, Mountpoint: key, Policy: pol, Symlinks: symlinks,
		Logger: m.log, Session: id,
	})
	if err != nil {
		return errorf(CodeInternal, "session %q: mount %s on %s: %v", id, root, key, err)
	}
	undo = append(undo, func() {
		if uerr := srv.Unmount(true); uerr != nil {
			m.log.Error("undo create: unmount", "session", id, "mountpoint", key, "err", uerr)
		}
	})
	// The mount opened root after rootID was taken: the same directory only
	// when root still names it now.
	if after, aerr := rootFileID(root); aerr != nil || after != rootID {
		return errorf(CodeRootChanged, "session %q: root %s was replaced while it was being mounted", id, root)
	}

	if spec.Cwd != "" || startRel != "." {
		p := spec.Cwd
		if p == "" {
			p = startRel
		}
		rel, derr := m.dirInMount(ctx, m.view(root, key, symlinks), ".", p)
		if derr != nil {
			return errorf(CodeInvalid, "session %q: start directory: %v", id, derr)
		}
		startRel = rel
	}

	rec := record{
		Version: recordVersion, ID: id, Origin: origin, Root: root,
		Mountpoint: key, MadeMountpoint: !existed, Policy: pspec,
		Symlinks: symlinks, Parent: spec.Parent, StartCwd: startRel,
		TmpDir: tmpDir, Created: time.Now().UTC().Truncate(time.Millisecond),
	}
	if err := m.writeRecord(rec); err != nil {
		return errorf(CodeInternal, "session %q: record: %v", id, err)
	}
	if rerr := os.Remove(intentPath); rerr != nil {
		m.log.Warn("create: remove intent", "session", id, "path", intentPath, "err", rerr)
	}
	s.mu.Lock()
	s.rec, s.srv, s.pol, s.events, s.cwd, s.rootID = rec, srv, pol, events, startRel, rootID
	s.mu.Unlock()
	return nil
}

// compilePolicy fills spec.Primary with root (refusing a different one) and
// compiles it.
func compilePolicy(id, root string, spec policy.Spec) (policy.Spec, *policy.Policy, error) {
	if spec.Primary != "" {
		c, err := identity.Canonical(spec.Primary)
		if err != nil || c != root {
			return spec, nil, errorf(CodeInvalid, "session %q: policy primary %q: must be empty or the session root %s", id, spec.Primary, root)
		}
	}
	spec.Primary = root
	pol, err := policy.Compile(spec)
	if err != nil {
		return spec, nil, errorf(CodeInvalid, "session %q: %v", id, err)
	}
	return spec, pol, nil
}

// relation names how path a lies relative to path b (both clean, absolute):
// "is", "is inside", "contains", or "" when they are apart.
func relation(a, b string) string {
	switch {
	case a == b:
		return "is"
	case within(a, b):
		return "is inside"
	case within(b, a):
		return "contains"
	}
	return ""
}

// checkPlace is checkPlaceLocked with m.mu taken.
func (m *Manager) checkPlace(id, origin, root, mp, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkPlaceLocked(id, origin, root, mp, key)
}

// checkPlaceLocked refuses to nest a new session id with physical root root
// (origin as given) and canonical mountpoint key (mp as given; both empty to
// check the root only) in the daemon's own files or mounts: a root equal
// to, inside or containing the state directory, the mount base or another
// session's mountpoint (the mount would serve the daemon's state or its own
// mounts), and a mountpoint inside another session's physical root (the
// mount would shadow part of that session's project, giving one path two
// identities). Two sessions on overlapping roots are fine. m.mu is held.
func (m *Manager) checkPlaceLocked(id, origin, root, mp, key string) error {
	desc := fmt.Sprintf("root %q", origin)
	if root != filepath.Clean(origin) {
		desc += fmt.Sprintf(" (physical %s)", root)
	}
	if rel := relation(root, m.stateDir); rel != "" {
		return errorf(CodeInvalid, "session %q: %s %s the state directory %s; a session may not serve the daemon's state", id, desc, rel, m.stateDir)
	}
	if rel := relation(root, m.mountBase); rel != "" {
		return errorf(CodeInvalid, "session %q: %s %s the mount base %s; a session may not serve the daemon's mounts", id, desc, rel, m.mountBase)
	}
	others := make([]string, 0, len(m.mountpoints))
	for other := range m.mountpoints {
		others = append(others, other)
	}
	sort.Strings(others)
	for _, other := range others {
		if owner := m.mountpoints[other]; owner != id {
			if rel := relation(root, other); rel != "" {
				return errorf(CodeInvalid, "session %q: %s %s session %q's mountpoint %s; a session may not serve another session's mount", id, desc, rel, owner, other)
			}
		}
	}
	if key == "" {
		return nil
	}
	owners := make([]string, 0, len(m.roots))
	for owner := range m.roots {
		owners = append(owners, owner)
	}
	sort.Strings(owners)
	for _, owner := range owners {
		if other := m.roots[owner]; owner != id && within(key, other) {
			return errorf(CodeInvalid, "session %q: mountpoint %q is inside session %q's root %s; the mount would shadow part of that session's project", id, mp, owner, other)
		}
	}
	return nil
}

// rootFileID returns the FileID of the directory root names itself (a
// symlink there is an error, not followed).
func rootFileID(root string) (identity.FileID, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return identity.FileID{}, errors.New(errnoText(err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return identity.FileID{}, errors.New("not a directory")
	}
	return identity.FileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// checkRoot checks that s's physical root path still names the directory
// its mount serves (the walks of Chdir and Resolve go by that path): when
// the path is gone, ErrOriginGone; when it names another object (the host
// moved the directory away and put another, or a symlink, in its place),
// ErrRootChanged. s.mu is held.
func (m *Manager) checkRoot(s *session) error {
	fd, err := unix.Open(s.rec.Root, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return errorf(CodeOriginGone, "session %q: origin %s (physical %s) no longer exists; the working directory cannot be recovered", s.rec.ID, s.rec.Origin, s.rec.Root)
	}
	if err != nil {
		return errorf(CodeInternal, "session %q: root %s: %v", s.rec.ID, s.rec.Root, errnoText(err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errorf(CodeInternal, "session %q: root %s: %v", s.rec.ID, s.rec.Root, errnoText(err))
	}
	if got := (identity.FileID{Dev: st.Dev, Ino: st.Ino}); got != s.rootID {
		what := "another directory"
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			what = "a symlink"
		default:
			what = "a non-directory"
		}
		return errorf(CodeRootChanged, "session %q: root %s is now %s, not the directory the mount serves (it was moved or replaced on the host); remove the session and create it again", s.rec.ID, s.rec.Root, what)
	}
	return nil
}

// checkNotInMount refuses a mountpoint at or below another session's
// mountpoint (the walk would enter that mount).
func (m *Manager) checkNotInMount(id, mp string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for other, owner := range m.mountpoints {
		if owner != id && mp == other {
			return errorf(CodeExists, "session %q: mountpoint %q is in use by session %q", id, mp, owner)
		}
		if owner != id && within(mp, other) {
			return errorf(CodeExists, "session %q: mountpoint %q is inside session %q's mount %s", id, mp, owner, other)
		}
	}
	return nil
}

// writeRecord writes rec durably.
func (m *Manager) writeRecord(rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(m.sessDir, rec.ID+".json", append(data, '\n'), 0o600)
}

// dirEmpty reports whether directory dir has no entries.
func dirEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// isDir reports whether path is (or links to) a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// errnoText returns the text of err's errno when it wraps one (e.g. "no such
// file or directory"), else err's own text.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// view returns the mountView of a session's mount.
func (m *Manager) view(root, mp string, symlinks fusefs.SymlinkMode) mountView {
	return mountView{root: root, mp: mp, symlinks: symlinks, avoid: m.servedMount}
}

// servedMount returns the mountpoint of a session (or a create in progress)
// at or above path.
func (m *Manager) servedMount(path string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for mp := range m.mountpoints {
		if within(path, mp) {
			return mp, true
		}
	}
	return "", false
}

// dirInMount resolves path as a directory inside the mount v, relative to
// the directory curRel inside the mount, and returns its path relative to
// the mountpoint. The walk has the kernel's semantics in the mount (symlinks
// as the mount presents them, ".." above the mount root leaving it) but
// reads only the backing tree (see mountWalk). path may also be an absolute
// host path inside the root, which names the same directory inside the
// mount. The result must be an existing directory inside the mount.
func (m *Manager) dirInMount(ctx context.Context, v mountView, curRel, path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", fmt.Errorf("%q: the path is blank", path)
	}
	walk := path
	if filepath.IsAbs(path) && path != v.mp && !strings.HasPrefix(path, v.mp+"/") {
		// A host path: accepted when it names a directory inside the root.
		if mp, ok := m.servedMount(filepath.Clean(path)); ok {
			return "", fmt.Errorf("%q is inside the wsfs mount %s of another session", path, mp)
		}
		key, err := identity.TargetKey(path)
		if err != nil {
			return "", fmt.Errorf("%q: %v", path, errnoText(err))
		}
		if !within(key, v.root) {
			return "", fmt.Errorf("%q resolves to %s, outside the session's root %s (not reachable inside the mount)", path, key, v.root)
		}
		rel, _ := filepath.Rel(v.root, key)
		walk = inMount(v.mp, rel)
	}
	w, err := v.walk(ctx, curRel, walk)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q: %v", path, errnoText(err))
	case !w.InMount:
		return "", fmt.Errorf("%q resolves to %s, outside the session's mount %s", path, w.Key, v.mp)
	case !w.Exists:
		return "", fmt.Errorf("%q: no such directory (%s)", path, w.MountPath)
	case !w.IsDir:
		return "", fmt.Errorf("%q: not a directory (%s)", path, w.MountPath)
	}
	rel, _ := filepath.Rel(v.mp, w.MountPath)
	return rel, nil
}

// SetPolicy replaces session id's policy: it compiles spec (Primary empty or
// the session root), writes the record durably, then swaps the mount's
// policy, so that every process's next operation sees it. On any error the
// old policy stays in force, in the mount and in the record.
//
// Errors: ErrNotFound, ErrFailed, ErrInvalid (the policy does not compile),
// CodeInternal (the record write failed).
func (m *Manager) SetPolicy(ctx context.Context, id string, spec policy.Spec) (Session, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return Session{}, err
	}
	defer s.mu.Unlock()
	if spec.Temp == nil {
		spec.Temp = []string{s.rec.TmpDir} // as at Create
	}
	pspec, pol, err := compilePolicy(id, s.rec.Root, spec)
	if err != nil {
		return Session{}, err
	}
	rec := s.rec
	rec.Policy = pspec
	if err := m.writeRecord(rec); err != nil {
		return Session{}, errorf(CodeInternal, "session %q: record: %v", id, err)
	}
	s.srv.SetPolicy(pol)
	s.rec, s.pol = rec, pol
	m.log.Info("session policy set", "session", id, "mode", pol.Mode())
	return s.snapshot(), nil
}

// Remove unmounts session id, removes the mountpoint when Create made it,
// and deletes its record, event log, intent and temp directory. A mount
// still in use gives ErrBusy naming the holders, and the session stays;
// force detaches a busy mount lazily (MNT_DETACH) instead. A mount already
// gone (unmounted from outside) counts as unmounted. For a session whose
// record was unreadable, a dead mount on its default mountpoint is cleared
// (clearDeadDefaultMount).
//
// Errors: ErrNotFound, ErrBusy, CodeInternal.
func (m *Manager) Remove(ctx context.Context, id string, force bool) error {
	s, err := m.locked(id, false)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	switch {
	case s.srv != nil:
		if err := s.srv.Unmount(force); err != nil {
			var busy *fusefs.BusyError
			if errors.As(err, &busy) {
				return &Error{Code: CodeBusy, Message: fmt.Sprintf("session %q: %v (use force to detach lazily)", id, err), Err: err}
			}
			if mounted, merr := isMounted(s.rec.Mountpoint); merr != nil || mounted {
				return errorf(CodeInternal, "session %q: unmount %s: %v", id, s.rec.Mountpoint, err)
			}
			// Unmounted from outside (or its directory removed since):
			// already done. The server stops once the kernel lets go of the
			// connection (at once, or when a lazily detached mount's last
			// holder leaves).
			m.log.Info("remove: mount already gone", "session", id, "mountpoint", s.rec.Mountpoint)
			go s.srv.Wait()
		}
		s.srv = nil
	case s.unreadable:
		m.clearDeadDefaultMount(id)
	default:
		if err := clearMount(s.rec.Mountpoint, force, false); err != nil {
			return errorf(CodeInternal, "session %q: unmount %s: %v", id, s.rec.Mountpoint, err)
		}
	}
	if s.rec.MadeMountpoint {
		if err := os.Remove(s.rec.Mountpoint); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("remove: mountpoint", "session", id, "mountpoint", s.rec.Mountpoint, "err", err)
		}
	}
	if err := removeDurable(filepath.Join(m.sessDir, id+".json")); err != nil {
		return errorf(CodeInternal, "session %q: delete record: %v", id, err)
	}
	s.events.close()
	os.Remove(filepath.Join(m.sessDir, id+".events"))
	os.Remove(filepath.Join(m.sessDir, id+".pending"))
	os.RemoveAll(s.rec.TmpDir)
	s.gone = true
	m.mu.Lock()
	delete(m.sessions, id)
	delete(m.roots, id)
	if m.mountpoints[s.rec.Mountpoint] == id {
		delete(m.mountpoints, s.rec.Mountpoint)
	}
	m.mu.Unlock()
	m.log.Info("session removed", "session", id, "force", force)
	return nil
}

// isMounted reports whether something is mounted at mp.
func isMounted(mp string) (bool, error) {
	table, err := fusefs.MountTable()
	if err != nil {
		return false, err
	}
	_, ok := table[mp]
	return ok, nil
}

// clearDeadDefaultMount clears a dead (ENOTCONN) FUSE mount on the default
// mountpoint <mount-base>/<id> of a session whose record was unreadable (its
// real mountpoint is unknown), and removes that directory when it is then
// empty, unless another session uses that path. A live mount is left alone.
func (m *Manager) clearDeadDefaultMount(id string) {
	mp := filepath.Join(m.mountBase, id)
	m.mu.Lock()
	owner, taken := m.mountpoints[mp]
	m.mu.Unlock()
	if taken {
		m.log.Info("remove: default mountpoint belongs to another session; left alone", "session", id, "mountpoint", mp, "owner", owner)
		return
	}
	table, err := fusefs.MountTable()
	if err != nil {
		m.log.Warn("remove: mount table", "session", id, "err", err)
		return
	}
	if e, ok := table[mp]; !ok || !strings.HasPrefix(e.FSType, "fuse") {
		return
	}
	var st unix.Stat_t
	if err := unix.Stat(mp, &st); err != unix.ENOTCONN {
		m.log.Info("remove: default mountpoint holds a live mount; left alone", "session", id, "mountpoint", mp)
		return
	}
	if err := clearMount(mp, true, true); err != nil {
		m.log.Warn("remove: clear dead mount", "session", id, "mountpoint", mp, "err", err)
		return
	}
	// A wsfs mount in the daemon's mount base: the session's default
	// mountpoint, which Create made (removed only when empty).
	os.Remove(mp)
	m.log.Info("remove: cleared a dead mount", "session", id, "mountpoint", mp)
}

// Cwd returns session id's working directory, validated at use: when the
// directory no longer exists on the host, the session recovers to the
// origin (the mount root) and logs a "recover" event first.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone (the origin vanished too),
// ErrRootChanged (see checkRoot), CodeInternal (the event log could not be
// written).
func (m *Manager) Cwd(ctx context.Context, id string) (WorkDir, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return WorkDir{}, err
	}
	defer s.mu.Unlock()
	ev, err := m.validateCwd(s)
	if err != nil {
		return WorkDir{}, err
	}
	wd := s.workDir()
	if ev != nil {
		wd.Changed, wd.Events = true, []Event{*ev}
	}
	return wd, nil
}

// workDir returns s's current directory; s.mu must be held.
func (s *session) workDir() WorkDir {
	return WorkDir{
		Session:  s.rec.ID,
		Path:     inMount(s.rec.Mountpoint, s.cwd),
		Physical: physicalOf(s.rec.Root, s.cwd),
	}
}

// validateCwd checks that s's directory still exists on the host; when it
// does not, it recovers to the origin (logging a "recover" event, returned)
// or, when the origin is gone too, fails with ErrOriginGone. s.mu is held.
func (m *Manager) validateCwd(s *session) (*Event, error) {
	if err := m.checkRoot(s); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.rec.Root, s.cwd)
	if isDir(dir) && s.cwd != "." {
		return nil, nil
	}
	if s.cwd == "." {
		return nil, nil
	}
	mp := s.rec.Mountpoint
	ev, err := s.events.append(Event{
		Time: time.Now().UTC(), Type: EventRecover,
		From: inMount(mp, s.cwd), To: mp,
		Reason: fmt.Sprintf("%s no longer exists", dir),
	})
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", s.rec.ID, err)
	}
	m.log.Info("session cwd recovered", "session", s.rec.ID, "from", ev.From, "to", ev.To)
	s.cwd = "."
	return &ev, nil
}

// Chdir changes session id's working directory to path: relative to the
// current directory (validated first, see Cwd), absolute inside the mount,
// or an absolute host path inside the root. The target must be an existing
// directory reachable inside the mount. A change is appended to the event
// log (fsync) and published only after that succeeded; a change to the
// current directory writes nothing.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone, ErrInvalid (missing, not a
// directory, outside the mount), CodeInternal (the log write failed).
func (m *Manager) Chdir(ctx context.Context, id, path string) (WorkDir, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return WorkDir{}, err
	}
	defer s.mu.Unlock()
	var logged []Event
	ev, err := m.validateCwd(s)
	if err != nil {
		return WorkDir{}, err
	}
	if ev != nil {
		logged = append(logged, *ev)
	}
	rel, err := m.dirInMount(ctx, m.view(s.rec.Root, s.rec.Mountpoint, s.rec.Symlinks), s.cwd, path)
	if err := m.checkRoot(s); err != nil {
		return WorkDir{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return WorkDir{}, errorf(CodeInvalid, "session %q: cd %v", id, err)
	}
	if rel != s.cwd {
		mp := s.rec.Mountpoint
		ev, err := s.events.append(Event{
			Time: time.Now().UTC(), Type: EventCd,
			From: inMount(mp, s.cwd), To: inMount(mp, rel),
		})
		if err != nil {
			return WorkDir{}, errorf(CodeInternal, "session %q: event log: %v", id, err)
		}
		s.cwd = rel
		logged = append(logged, ev)
	}
	wd := s.workDir()
	wd.Changed, wd.Events = len(logged) > 0, logged
	return wd, nil
}

// Events returns session id's working-directory events, oldest first.
//
// Errors: ErrNotFound, CodeInternal (the log could not be read).
func (m *Manager) Events(ctx context.Context, id string) ([]Event, error) {
	s, err := m.locked(id, false)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	f, err := os.Open(filepath.Join(m.sessDir, id+".events"))
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	defer f.Close()
	events, _, err := readEvents(f)
	if err != nil {
		return nil, errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	if events == nil {
		events = []Event{}
	}
	return events, nil
}

// Resolve answers, for path as a process in session id would use it
// (relative to the session's working directory inside the mount), its
// display path, its in-mount path, its physical key and the policy's read
// and write decisions on that key. The walk has the mount's semantics (see
// mountWalk: symlinks as the mount presents them, ".." above the mount root
// leaving it), so it agrees with what the kernel does there (`cat PATH` run
// in the session's directory), and the key is the physical object the mount
// serves. The display path follows resolver.Target's rule, in the mount's
// namespace: the lexical join with the directory, or MountPath (Key when the
// walk left the mount) when PATH has a ".." segment.
//
// Errors: ErrNotFound, ErrFailed, ErrOriginGone, ErrInvalid (a blank path,
// or one the walk refuses: ENOTDIR, ELOOP, EACCES).
func (m *Manager) Resolve(ctx context.Context, id, path string) (Resolution, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return Resolution{}, err
	}
	defer s.mu.Unlock()
	if _, err := m.validateCwd(s); err != nil {
		return Resolution{}, err
	}
	if strings.TrimSpace(path) == "" {
		return Resolution{}, errorf(CodeInvalid, "session %q: resolve %q: the path is blank", id, path)
	}
	mp := s.rec.Mountpoint
	cwd := inMount(mp, s.cwd)
	w, err := m.view(s.rec.Root, mp, s.rec.Symlinks).walk(ctx, s.cwd, path)
	if err := m.checkRoot(s); err != nil {
		return Resolution{}, err // replaced during the walk: its answer is void
	}
	if err != nil {
		return Resolution{}, errorf(CodeInvalid, "session %q: resolve %q: %v", id, path, errnoText(err))
	}
	res := Resolution{Session: id, Path: path, Cwd: cwd, Key: w.Key}
	if w.InMount {
		res.MountPath = w.MountPath
	}
	switch {
	case hasDotDot(path) && w.InMount:
		res.Display = w.MountPath
	case hasDotDot(path):
		res.Display = w.Key
	case filepath.IsAbs(path):
		res.Display = filepath.Clean(path)
	default:
		res.Display = filepath.Join(cwd, path)
	}
	res.Read = decision(s.pol.Decide(policy.OpRead, res.Key))
	res.Write = decision(s.pol.Decide(policy.OpWrite, res.Key))
	return res, nil
}

// decision converts a policy.Decision to its JSON form.
func decision(d policy.Decision) Decision {
	out := Decision{Allow: d.Allow, Rule: d.Rule}
	if d.Errno != 0 {
		out.Errno = unix.ErrnoName(d.Errno)
		if out.Errno == "" {
			out.Errno = fmt.Sprintf("errno %d", int(d.Errno))
		}
	}
	return out
}

// Close unmounts every session (cleanly; a busy mount is detached lazily and
// logged) and releases the state directory. Records stay, so the next
// daemon mounts the sessions again. Later calls other than Close fail.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	var errs []error
	for _, s := range all {
		s.mu.Lock()
		if s.srv != nil {
			err := s.srv.Unmount(false)
			var busy *fusefs.BusyError
			if errors.As(err, &busy) {
				m.log.Warn("close: mount busy, detaching lazily", "session", s.rec.ID, "err", err)
				err = s.srv.Unmount(true)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("session %q: unmount %s: %w", s.rec.ID, s.rec.Mountpoint, err))
			} else if s.rec.MadeMountpoint {
				os.Remove(s.rec.Mountpoint)
			}
			s.srv = nil
		}
		s.events.close()
		s.gone = true
		s.mu.Unlock()
	}
	m.mu.Lock()
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	if m.lock != nil {
		m.lock.Close()
	}
	m.log.Info("sessions unmounted", "count", len(all), "errors", len(errs))
	return errors.Join(errs...)
}
