package mounts

// Create: a session made in steps, undone as a whole on failure.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
)

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
