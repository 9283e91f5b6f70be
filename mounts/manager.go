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
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// Manager owns the sessions of one daemon. Its methods are safe for
// concurrent use; calls on one session are serialized (a per-session mutex),
// calls on different sessions run in parallel.
type Manager struct {
	stateDir  string   // canonical
	sessDir   string   // <state>/sessions: records, event logs, intents
	tmpBase   string   // <state>/tmp: per-session temp directories
	mountBase string   // canonical
	hidden    []string // Config.Hidden, clean
	log       *slog.Logger
	lock      *os.File
	store     transport.Store // Config.Store; nil: connections are not kept
	// pred is the daemon New took over from, waiting suspended for
	// CommitTakeover (handover.go); nil when none.
	pred *predecessor
	// startReaper is Config.JailReaper; reaper the reaper it started
	// (nil: none yet), guarded by jailMu.
	startReaper func() (*JailReaper, error)
	reaper      *JailReaper

	// kept are the connections taken from store at Recover, by
	// mountpoint, until a session adopts them (recoverOne) or Recover
	// ends them.
	kept      map[string]*transport.Conn
	transport transport.Mode // Config.FuseTransport, resolved
	made      []string       // what New made, outermost first (Abandon removes it)
	// baseMade are the mount base and its parents as New made them,
	// innermost first (the mount base itself too with
	// Config.OwnMountBase): Close removes them when empty.
	baseMade []string

	mu          sync.Mutex
	sessions    map[string]*session  // published and being created
	mountpoints map[string]string    // canonical mountpoint → id, incl. creates in progress
	roots       map[string]string    // id → physical root, incl. creates in progress
	hostViews   map[string]*hostView // id → mounted host view (hostview.go)
	closed      bool

	// places are every session's root and mountpoint, each held by its
	// session, incl. creates in progress: what every host view hides of
	// the other sessions (hostview.go). Its own lock, not mu.
	places *fusefs.PlaceIndex

	// jailMu guards liveJails: every session's live jails, which Create
	// hides each new session from (jailhide.go).
	jailMu    sync.Mutex
	liveJails []*liveJail
}

// session is the Manager's state of one session. rec.ID, Origin, Root,
// Mountpoint, TmpDir and Created never change; the rest is guarded by mu.
type session struct {
	mu       sync.Mutex
	rec      record
	srv      *fusefs.Server // nil when failed
	pol      *policy.Policy
	events   *eventLog
	cwd      string // relative to the mount root ("." is the root), or outside it a physical path (workdir.go)
	hostView string // the host view's mountpoint (Manager.hostViewOf)
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
	// jails are the jails (wsfs exec --confine) started on this session,
	// ended before it is unmounted (jails.go).
	jails []jail
	// jailView is the session's jail view (links as stored), mounted with
	// its first jail; nil before that (jailview.go).
	jailView *fusefs.Server
	// layer is the copy-on-write layer the session's mount serves, open
	// while the session is mounted; nil without one: its own (rec.Layer),
	// or for a sub-session of a layered session the one of session
	// rec.LayerOf (the same *Layer, not the child's to close or remove).
	layer *Layer
}

// New opens the state directory (taking its lock) and the mount base,
// making both when missing. It does not mount anything: call Recover next.
// On error it removes every directory and file it made (a refused start
// leaves nothing behind).
func New(cfg Config) (m *Manager, err error) {
	for name, dir := range map[string]string{"state directory": cfg.StateDir, "mount base": cfg.MountBase} {
		if dir == "" {
			return nil, errorf(CodeInvalid, "%s: required", name)
		}
		if !filepath.IsAbs(dir) {
			return nil, errorf(CodeInvalid, "%s %q: must be an absolute path", name, dir)
		}
	}
	mode, err := transport.Resolve(cfg.FuseTransport)
	if err != nil {
		return nil, errorf(CodeInvalid, "%v", err)
	}
	var made []string // undone, last first, on error
	defer func() {
		if err != nil {
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
		}
	}()
	md, err := mkdirAll(cfg.StateDir, 0o700)
	made = append(made, reversed(md)...)
	if err != nil {
		return nil, errorf(CodeInvalid, "state directory %q: %w", cfg.StateDir, err)
	}
	md, err = mkdirAll(cfg.MountBase, 0o755)
	made = append(made, reversed(md)...)
	baseMade := md
	if cfg.OwnMountBase && len(md) == 0 {
		baseMade = []string{filepath.Clean(cfg.MountBase)}
	}
	if err != nil {
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
	m = &Manager{
		stateDir:    state,
		sessDir:     filepath.Join(state, "sessions"),
		tmpBase:     filepath.Join(state, "tmp"),
		mountBase:   base,
		log:         cfg.Logger,
		store:       cfg.Store,
		transport:   mode,
		sessions:    make(map[string]*session),
		mountpoints: make(map[string]string),
		roots:       make(map[string]string),
		hostViews:   make(map[string]*hostView),
		places:      fusefs.NewPlaceIndex(),
	}
	if cfg.Store == nil {
		// With a store the jails outlive the daemon with their views
		// (jailkeep.go): no reaper ends them.
		m.startReaper = cfg.JailReaper
	}
	for _, h := range cfg.Hidden {
		if !filepath.IsAbs(h) {
			return nil, errorf(CodeInvalid, "hidden path %q: must be an absolute path", h)
		}
		m.hidden = append(m.hidden, filepath.Clean(h))
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	for _, d := range []string{m.sessDir, m.tmpBase} {
		err := os.Mkdir(d, 0o700)
		if err == nil {
			made = append(made, d)
		} else if !errors.Is(err, os.ErrExist) {
			return nil, errorf(CodeInternal, "state directory %q: %w", d, err)
		}
	}
	lockPath := filepath.Join(state, "lock")
	if _, serr := os.Lstat(lockPath); errors.Is(serr, os.ErrNotExist) {
		made = append(made, lockPath) // removed on error only: another daemon's lock is never touched
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errorf(CodeInternal, "state directory lock %s: %w", lockPath, err)
	}
	if err := takeLock(f, lockPath, m.sessDir, lockOpts{takeover: cfg.Takeover, keepConns: cfg.Store != nil, log: m.log, pred: &m.pred}); err != nil {
		f.Close()
		return nil, errorf(CodeExists, "state directory %s: in use by another wsfs daemon (lock %s: %v)", state, lockPath, err)
	}
	m.lock = f
	m.made = made
	m.baseMade = baseMade
	return m, nil
}

// Abandon undoes New for a daemon that will not start after all (its socket
// is taken, say): it releases the state directory's lock and removes the
// directories and the lock file New made, when they are still empty. Call
// it instead of Close, before Recover.
func (m *Manager) Abandon() {
	if m.lock != nil {
		m.lock.Close()
	}
	for i := len(m.made) - 1; i >= 0; i-- {
		os.Remove(m.made[i])
	}
}

// StateDir returns the canonical state directory.
func (m *Manager) StateDir() string { return m.stateDir }

// MountBase returns the canonical mount base.
func (m *Manager) MountBase() string { return m.mountBase }

// labelled returns the logger of a session's mount: the Manager's, with the
// session's labels (sorted by key) on every line.
func (m *Manager) labelled(labels map[string]string) *slog.Logger {
	if len(labels) == 0 {
		return m.log
	}
	args := make([]any, 0, 2*len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		args = append(args, k, labels[k])
	}
	return m.log.With(args...)
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
		Cwd:        cwdPath(s.rec.Mountpoint, s.hostView, s.cwd),
		TmpDir:     s.rec.TmpDir,
		AllowWrite: s.rec.AllowWrite,
		Users:      slices.Clone(s.rec.Users),
		Created:    s.rec.Created,
		State:      StateMounted,
		Labels:     maps.Clone(s.rec.Labels),
		Layer:      s.rec.Layer,
		LayerOf:    s.rec.LayerOf,
	}
	out.CwdPhysical = cwdPhysical(s.rec.Root, s.cwd)
	if s.pol != nil {
		// The policy in force, every default filled in (the record keeps
		// the spec as given).
		out.Mode, out.Policy = s.pol.Mode(), s.pol.Spec()
	} else if out.Mode = s.rec.Policy.Mode; out.Mode == "" && !s.unreadable {
		out.Mode = policy.ModeWorkspaceWrite
	}
	if s.failed != "" {
		out.State, out.Error = StateFailed, s.failed
	}
	if s.srv != nil {
		out.Transport = s.srv.Transport()
	}
	return out
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
	m.noticeUnmounted(s, nil)
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

// published returns the sessions Create has finished (in no order).
func (m *Manager) published() []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if !s.creating {
			all = append(all, s)
		}
	}
	return all
}

// List returns every session, sorted by id.
func (m *Manager) List(ctx context.Context) []Session {
	all := m.published()
	out := make([]Session, 0, len(all))
	table, err := fusefs.MountTable()
	if err != nil {
		table = nil // each session reads it again
	}
	for _, s := range all {
		s.mu.Lock()
		m.noticeUnmounted(s, table)
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

// Stats returns the counters of every mounted session (its mount's, its
// jail view's, its host view's and the host view's jail twin's together),
// sorted by id.
func (m *Manager) Stats() []SessionStats {
	all := m.published()
	var out []SessionStats
	for _, s := range all {
		s.mu.Lock()
		srv, jv, id := s.srv, s.jailView, s.rec.ID
		gone := s.gone
		s.mu.Unlock()
		if srv != nil && !gone {
			st := srv.Stats()
			if jv != nil { // the session's too: its jails' operations
				addStats(&st, jv.Stats())
			}
			m.mu.Lock()
			hv := m.hostViews[id]
			var views []*fusefs.Server
			if hv != nil {
				views = append(views, hv.srv)
				if hv.jail != nil {
					views = append(views, hv.jail)
				}
			}
			m.mu.Unlock()
			for _, v := range views { // the session's policy decides there too
				addStats(&st, v.Stats())
			}
			out = append(out, SessionStats{ID: id, Stats: st})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// writeRecord writes rec durably.
func (m *Manager) writeRecord(rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(m.sessDir, rec.ID+".json", append(data, '\n'), 0o600)
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
		m.endJails(s)
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
		m.unmountJailView(s)
		m.unmountHostView(s.rec.ID)
		if s.layer != nil && s.rec.Layer != "" {
			// Unmounted with the session; its upper directory stays for
			// the next start. (A sub-session's is its owner's to close.)
			if err := s.layer.Close(); err != nil {
				errs = append(errs, fmt.Errorf("session %q: %w", s.rec.ID, err))
			}
		}
		s.layer = nil
		s.events.close()
		s.gone = true
		s.mu.Unlock()
	}
	m.mu.Lock()
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	// The mount base it made goes too, once empty (nothing is mounted in
	// it any more); a directory still in use (a lazily detached mount's,
	// a user's file) stays.
	for _, d := range m.baseMade {
		if os.Remove(d) != nil {
			break
		}
	}
	m.closeReaper() // every jail is ended: it exits
	if m.lock != nil {
		m.lock.Close()
	}
	if len(all) > 0 {
		m.log.Info("sessions unmounted", "count", len(all), "errors", len(errs))
	}
	return errors.Join(errs...)
}
