package mounts

// Create: a session made in small steps, each pushing its reversal on one
// undo stack that runs, last first, when a later step fails.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
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
// A sub-session (Spec.Parent) inherits, field by field, what its spec leaves
// out of the parent's policy in force: the mode, the additional roots (less
// those overlapping its own root), the protected subpaths, and the symlink
// mode; its temp area is its own temp directory. It may never be granted
// more than the parent: a wider mode, follow under contain, a protected
// subpath fewer, or a read or write the parent's policy denies at any root,
// temp entry or protected name of either policy is refused (ErrInvalid,
// naming the field and the parent).
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
	if err := ValidLabels(spec.Labels); err != nil {
		return Session{}, errorf(CodeInvalid, "session %q: %v", spec.ID, err)
	}
	c := &creation{m: m, spec: spec, id: spec.ID, s: &session{creating: true}}
	if err := c.run(ctx); err != nil {
		return Session{}, err
	}
	m.mu.Lock()
	s := c.s
	s.mu.Lock()
	s.creating = false
	m.log.Info("session created", "session", c.id, "root", s.rec.Root, "mountpoint", s.rec.Mountpoint)
	snap := s.snapshot()
	s.mu.Unlock()
	m.mu.Unlock()
	// Published first: a jail registered from now on lists it (AddJail).
	m.hideInJails(c.id, append(placesOf(snap.Root, snap.Mountpoint), snap.TmpDir))
	return snap, nil
}

// creation is one Create in progress: what its steps found so far, and the
// undo stack of what they did.
type creation struct {
	m    *Manager
	spec Spec
	id   string
	s    *session // reserved under id in m.sessions, invisible until published
	undo undoStack

	origin   string // the root as given
	root     string // its physical path
	symlinks fusefs.SymlinkMode
	pspec    policy.Spec
	pol      *policy.Policy
	// The parent's policy and symlink mode, for a sub-session.
	parentPol   *policy.Policy
	parentLinks fusefs.SymlinkMode
	parentAllow []string // the parent's allow_write
	startRel    string   // the starting directory, as session.cwd
	mp          string   // the mountpoint as given (or the default)
	key         string   // its canonical path, reserved in m.mountpoints
	existed     bool     // the mountpoint existed before Create

	allowWrite []string // Spec.AllowWrite, canonical
	tmpDir     string
	intentPath string
	events     *eventLog
	rootID     identity.FileID
	srv        *fusefs.Server
	layer      *Layer // the layer the mount serves: Spec.Layer's, open, or layerOf's
	layerOf    string // the session whose layer a sub-session's tree lies in (record.LayerOf)
}

// run does the steps in order; on the first error it undoes what the steps
// before did and returns that error.
func (c *creation) run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			c.undo.run()
		}
	}()
	for _, step := range []func(context.Context) error{
		c.reserveID,
		c.resolveRoot,
		c.compile,
		c.startFromParent,
		c.reserveMountpoint,
		c.checkMountpoint,
		c.makeState,
		c.makeLayer,
		c.mount,
		c.startDir,
		c.publish,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reserveID takes the id in m.sessions (the session stays invisible to the
// other calls while creating is set).
func (c *creation) reserveID(ctx context.Context) error {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errorf(CodeInternal, "session %q: the daemon is shutting down", c.id)
	}
	if _, ok := m.sessions[c.id]; ok {
		return errorf(CodeExists, "session %q: already exists", c.id)
	}
	m.sessions[c.id] = c.s
	c.undo = append(c.undo, func() {
		m.mu.Lock()
		delete(m.sessions, c.id)
		m.mu.Unlock()
	})
	return nil
}

// resolveRoot checks the origin and resolves it physically.
func (c *creation) resolveRoot(ctx context.Context) error {
	id, origin := c.id, c.spec.Root
	c.origin = origin
	switch {
	case origin == "":
		return errorf(CodeInvalid, "session %q: root is required", id)
	case !filepath.IsAbs(origin):
		return errorf(CodeInvalid, "session %q: root %q: must be an absolute path", id, origin)
	}
	// Refused before it is touched: the daemon does not walk its own mounts.
	if err := c.m.checkPlace(id, origin, filepath.Clean(origin), "", ""); err != nil {
		return err
	}
	fi, err := os.Stat(origin)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errorf(CodeInvalid, "session %q: root %q: no such directory", id, origin)
	case err != nil:
		return errorf(CodeInvalid, "session %q: root %q: %v", id, origin, identity.ErrnoText(err))
	case !fi.IsDir():
		return errorf(CodeInvalid, "session %q: root %q: not a directory", id, origin)
	}
	root, err := identity.Canonical(origin)
	if err != nil {
		return errorf(CodeInvalid, "session %q: root %q: %v", id, origin, identity.ErrnoText(err))
	}
	c.root = root
	return c.m.checkPlace(id, origin, root, "", "")
}

// compile parses the symlink mode and compiles the policy. A sub-session
// first inherits what its spec leaves out from the parent, and its policy is
// refused when it grants more than the parent's.
func (c *creation) compile(ctx context.Context) error {
	if c.spec.Parent != "" {
		var err error
		var prec record
		if c.parentPol, prec, err = c.m.parentOf(c.id, c.spec.Parent); err != nil {
			return err
		}
		// A child of a layered session sees and writes its parent's
		// tree: the layer of the parent, or of the parent's own parent.
		c.layerOf = prec.LayerOf
		if prec.Layer != "" {
			c.layerOf = c.spec.Parent
		}
		c.parentLinks, c.parentAllow = prec.Symlinks, prec.AllowWrite
		if c.spec.Users == nil {
			c.spec.Users = prec.Users
		} else if err := checkUsers(c.id, c.spec.Parent, prec.Users, c.spec.Users); err != nil {
			return err
		}
		c.spec = inherit(c.spec, c.root, c.parentPol, c.parentLinks)
	}
	symlinks, err := fusefs.ParseSymlinkMode(string(c.spec.Symlinks))
	if err != nil {
		return errorf(CodeInvalid, "session %q: %v", c.id, err)
	}
	c.symlinks = symlinks
	if err := fusefs.CheckUsers(c.spec.Users); err != nil {
		return errorf(CodeInvalid, "session %q: %v", c.id, err)
	}
	ps := c.spec.Policy
	if c.parentPol != nil && ps.Temp == nil {
		// The own temp directory (set once it exists, in mount) is not
		// the parent's to grant; the host's default temp area is.
		ps.Temp = []string{}
	}
	c.pspec, c.pol, err = c.m.compilePolicy(c.id, c.root, ps, "")
	if err != nil {
		return err
	}
	for _, w := range c.spec.AllowWrite {
		cw, err := identity.Canonical(w)
		switch {
		case !filepath.IsAbs(w):
			return errorf(CodeInvalid, "session %q: allow_write %q: must be absolute", c.id, w)
		case err != nil:
			return errorf(CodeInvalid, "session %q: allow_write %q: %v", c.id, w, identity.ErrnoText(err))
		case cw == "/":
			return errorf(CodeInvalid, "session %q: allow_write %q: the whole file system cannot be writable", c.id, w)
		case identity.Within(cw, c.root) || identity.Within(c.root, cw):
			return errorf(CodeInvalid, "session %q: allow_write %q: overlaps the root %s (writes there are the mount's to decide)", c.id, w, c.root)
		}
		if err := c.m.checkOwn(c.id, "allow_write", w, cw, ""); err != nil {
			return err
		}
		if fi, err := os.Stat(cw); err != nil || !fi.IsDir() {
			return errorf(CodeInvalid, "session %q: allow_write %q: not a directory", c.id, w)
		}
		if err := checkFSType(c.id, fmt.Sprintf("allow_write %q", w), cw); err != nil {
			return err
		}
		if err := c.m.checkWritable(c.id, c.pol, cw); err != nil {
			return errorf(CodeInvalid, "session %q: allow_write %q: %v", c.id, w, err)
		}
		c.allowWrite = append(c.allowWrite, cw)
	}
	if c.parentPol == nil {
		return nil
	}
	if err := checkAllowWrite(c.id, c.spec.Parent, c.parentPol, c.parentAllow, c.allowWrite); err != nil {
		return err
	}
	return checkNarrower(c.id, c.spec.Parent, c.parentPol, c.pol, c.parentLinks, c.symlinks, "")
}

// startFromParent takes the starting directory from the parent (validated
// again once mounted).
func (c *creation) startFromParent(ctx context.Context) error {
	id, spec := c.id, c.spec
	if spec.Parent != "" && spec.Cwd != "" {
		return errorf(CodeInvalid, "session %q: parent %q and cwd %q: give at most one", id, spec.Parent, spec.Cwd)
	}
	c.startRel = "."
	if spec.Parent == "" {
		return nil
	}
	pd, perr := c.m.Cwd(ctx, spec.Parent)
	if perr != nil {
		if CodeOf(perr) == CodeNotFound {
			return errorf(CodeInvalid, "session %q: parent %q: no such session", id, spec.Parent)
		}
		return errorf(CodeOf(perr), "session %q: parent: %v", id, perr)
	}
	// Outside the child's root the parent's directory is a host path,
	// which startDir checks against the child's policy like any other.
	c.startRel = pd.Physical
	if identity.Within(pd.Physical, c.root) {
		c.startRel, _ = filepath.Rel(c.root, pd.Physical)
	}
	return nil
}

// reserveMountpoint checks the mountpoint's place and reserves it (with the
// root) at once, so that two creates in parallel cannot nest either.
func (c *creation) reserveMountpoint(ctx context.Context) error {
	m, id, root := c.m, c.id, c.root
	mp := c.spec.Mountpoint
	if mp == "" {
		mp = filepath.Join(m.mountBase, id)
	} else if !filepath.IsAbs(mp) {
		return errorf(CodeInvalid, "session %q: mountpoint %q: must be an absolute path", id, mp)
	}
	c.mp = mp
	if err := m.checkNotInMount(id, filepath.Clean(mp)); err != nil {
		return err
	}
	key, err := identity.TargetKey(mp)
	if err != nil {
		return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, identity.ErrnoText(err))
	}
	switch {
	case identity.Within(key, root):
		return errorf(CodeInvalid, "session %q: mountpoint %q is inside the root %s (the mount would contain itself)", id, mp, root)
	case identity.Within(root, key):
		return errorf(CodeInvalid, "session %q: mountpoint %q contains the root %s", id, mp, root)
	}
	if err := m.checkOwn(id, "mountpoint", mp, key, m.mountBase); err != nil {
		return err
	}
	if err := m.checkNotInMount(id, key); err != nil {
		return err
	}
	// Its parent: a mount at the mountpoint itself (a live or stale wsfs
	// mount) is the business of the checks below.
	if err := checkFSType(id, fmt.Sprintf("mountpoint %q", mp), filepath.Dir(key)); err != nil {
		return err
	}
	m.mu.Lock()
	if owner, taken := m.mountpoints[key]; taken {
		m.mu.Unlock()
		return errorf(CodeExists, "session %q: mountpoint %q is in use by session %q", id, mp, owner)
	}
	if err := m.checkPlaceLocked(id, c.origin, root, mp, key); err != nil {
		m.mu.Unlock()
		return err
	}
	m.mountpoints[key] = id
	m.roots[id] = root
	m.mu.Unlock()
	c.key = key
	c.undo = append(c.undo, func() {
		m.places.Remove(id)
		m.mu.Lock()
		delete(m.roots, id)
		if m.mountpoints[key] == id {
			delete(m.mountpoints, key)
		}
		m.mu.Unlock()
	})
	// Hidden from every other session's host view from now on.
	if err := m.places.Add(id, placesOf(root, key)...); err != nil {
		return errorf(CodeInternal, "session %q: %v", id, err)
	}
	return nil
}

// checkMountpoint checks that the mountpoint is not a mount point and is an
// empty directory, or is missing with its parent present.
func (c *creation) checkMountpoint(ctx context.Context) error {
	id, mp, key := c.id, c.mp, c.key
	if e, ok, terr := fusefs.MountAt(key); terr == nil && ok && e != (fusefs.MountEntry{}) {
		if e.FSType == "fuse.wsfs" {
			return errorf(CodeExists, "session %q: mountpoint %q is a live wsfs mount; unmount it first (wsfs unmount %s) or pick another directory", id, mp, key)
		}
		return errorf(CodeExists, "session %q: mountpoint %q is already a mount point (%s)", id, mp, e.FSType)
	}
	switch fi, err := os.Lstat(key); {
	case err == nil && !fi.IsDir():
		return errorf(CodeInvalid, "session %q: mountpoint %q: not a directory", id, mp)
	case err == nil:
		c.existed = true
		if empty, eerr := dirEmpty(key); eerr != nil {
			return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, identity.ErrnoText(eerr))
		} else if !empty {
			return errorf(CodeInvalid, "session %q: mountpoint %q: not empty", id, mp)
		}
	case !errors.Is(err, os.ErrNotExist):
		return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, identity.ErrnoText(err))
	}
	if !c.existed && !isDir(filepath.Dir(key)) {
		return errorf(CodeInvalid, "session %q: mountpoint %q: parent directory %s does not exist", id, mp, filepath.Dir(key))
	}
	if err := ctx.Err(); err != nil {
		return errorf(CodeInternal, "session %q: create: %v", id, err)
	}
	return nil
}

// makeState records the intent (so that a crash from here on is cleaned up
// by Recover), then makes the mountpoint, the temp directory and the event
// log.
func (c *creation) makeState(ctx context.Context) error {
	m, id, mp, key := c.m, c.id, c.mp, c.key
	c.tmpDir = filepath.Join(m.tmpBase, id)
	c.intentPath = filepath.Join(m.sessDir, id+".pending")
	tmpDir, intentPath := c.tmpDir, c.intentPath
	intent, _ := json.Marshal(pending{Mountpoint: key, Existed: c.existed, TmpDir: tmpDir})
	if err := os.WriteFile(intentPath, intent, 0o600); err != nil {
		return errorf(CodeInternal, "session %q: intent %s: %v", id, intentPath, identity.ErrnoText(err))
	}
	c.undo = append(c.undo, func() { os.Remove(intentPath) })
	if !c.existed {
		if err := os.Mkdir(key, 0o755); err != nil {
			return errorf(CodeInvalid, "session %q: mountpoint %q: %v", id, mp, identity.ErrnoText(err))
		}
		c.undo = append(c.undo, func() { os.Remove(key) })
	}
	if err := os.RemoveAll(tmpDir); err != nil {
		return errorf(CodeInternal, "session %q: temp directory %s: %v", id, tmpDir, identity.ErrnoText(err))
	}
	if err := makeTmpDir(tmpDir, c.spec.Users); err != nil {
		return errorf(CodeInternal, "session %q: temp directory %s: %v", id, tmpDir, identity.ErrnoText(err))
	}
	c.undo = append(c.undo, func() { os.RemoveAll(tmpDir) })
	eventsPath := filepath.Join(m.sessDir, id+".events")
	events, _, err := openEventLog(eventsPath, true)
	if err != nil {
		return errorf(CodeInternal, "session %q: event log: %v", id, err)
	}
	c.events = events
	c.undo = append(c.undo, func() { events.close(); os.Remove(eventsPath) })
	return nil
}

// makeLayer makes and mounts the session's layer, <state>/layers/<id>,
// when the spec asks for one, or for a sub-session of a layered session
// takes that session's (joinLayer). A sub-session has no layer of its own:
// it sees and writes its parent's tree, which a layer of its own would
// hide from the parent (and on a layered parent stack a second overlay).
func (c *creation) makeLayer(ctx context.Context) error {
	if c.spec.Layer && c.spec.Parent != "" {
		return errorf(CodeInvalid, "session %q: layer with parent %q: a sub-session cannot have a layer of its own (it sees and writes its parent's tree, and the layer of its parent when that has one)", c.id, c.spec.Parent)
	}
	if c.layerOf != "" {
		return c.joinLayer()
	}
	if !c.spec.Layer {
		return nil
	}
	dir := c.m.layerDirOf(c.id)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return errorf(CodeInternal, "session %q: layers directory: %v", c.id, identity.ErrnoText(err))
	}
	// A layer left by a create a crash interrupted is not this session's.
	if err := removeLayerDir(dir); err != nil {
		return errorf(CodeInternal, "session %q: %v", c.id, err)
	}
	l, err := OpenLayer(dir, c.root)
	if err != nil {
		os.RemoveAll(dir)
		return errorf(CodeInvalid, "session %q: %v", c.id, err)
	}
	// Its verbs act with the users' rights (layerrights.go).
	l.Users = slices.Clone(c.spec.Users)
	c.layer = l
	c.undo = append(c.undo, func() {
		if err := l.Remove(); err != nil {
			c.m.log.Error("undo create: layer", "session", c.id, "err", err)
		}
	})
	return nil
}

// joinLayer takes the layer of session c.layerOf for a sub-session of a
// layered session: its root must lie in that layer's project and be a
// directory of the layer's merged tree (what the parent sees there: not
// deleted, not replaced by a symlink or a file in the layer).
func (c *creation) joinLayer() error {
	l, err := c.m.subLayer(c.id, c.layerOf)
	if err != nil {
		return errorf(CodeInvalid, "%v", err)
	}
	c.undo = append(c.undo, func() { l.dropSub(c.id) })
	if !identity.Within(c.root, l.Lower) {
		return errorf(CodeInvalid, "session %q: root %s: outside %s, the project of session %q's layer (a sub-session of a layered session serves a directory of that tree)", c.id, c.root, l.Lower, c.layerOf)
	}
	if err := offLayer(c.id, c.layerOf, l.Lower, c.pol, c.allowWrite); err != nil {
		return err
	}
	b := l.backingOf(c.root)
	canon, err := identity.Canonical(b)
	switch {
	case err != nil:
		return errorf(CodeInvalid, "session %q: root %s: %s in the layer of session %q (removed there)", c.id, c.root, identity.ErrnoText(err), c.layerOf)
	case canon != b:
		return errorf(CodeInvalid, "session %q: root %s: a symlink in the layer of session %q, not a directory", c.id, c.root, c.layerOf)
	case !isDir(b):
		return errorf(CodeInvalid, "session %q: root %s: not a directory in the layer of session %q", c.id, c.root, c.layerOf)
	}
	c.layer = l
	return nil
}

// mountHook, when set (tests only), is called by every Create between the
// mount of its host view and the mount of its root, with the session id: a
// test blocks there to show the daemon answering while a create is in the
// middle of mounting.
var mountHook func(id string)

// mount mounts the root (the policy compiled again with the session's temp
// directory when the spec names none) and checks that the mount serves the
// directory the root named before.
func (c *creation) mount(ctx context.Context) error {
	m, id, root, key := c.m, c.id, c.root, c.key
	if c.spec.Policy.Temp == nil {
		// The session's temp area is its own temp directory, not the
		// host's /tmp shared by every session (and what exec --confine
		// exports as TMPDIR). Compiled again now that it exists.
		ps := c.spec.Policy
		ps.Temp = []string{c.tmpDir}
		var err error
		if c.pspec, c.pol, err = m.compilePolicy(id, root, ps, c.tmpDir); err != nil {
			return err
		}
	}
	rootID, err := rootFileID(root)
	if err != nil {
		return errorf(CodeInvalid, "session %q: root %q (physical %s): %v", id, c.origin, root, err)
	}
	c.rootID = rootID
	if _, err := m.mountHostView(id, root, key, c.pol, m.labelled(c.spec.Labels), c.spec.Users, nil); err != nil {
		return errorf(CodeInternal, "session %q: %v", id, err)
	}
	c.undo = append(c.undo, func() { m.unmountHostView(id) })
	if mountHook != nil {
		mountHook(id)
	}
	srv, err := fusefs.Mount(layered(fusefs.Config{
		Root: root, Mountpoint: key, Policy: c.pol, Symlinks: c.symlinks,
		Logger: m.labelled(c.spec.Labels), Session: id, HostView: m.hostViewOf(id), Users: c.spec.Users,
		Keep: m.store, Transport: m.transport,
		Hidden: m.viewHidden(), Shared: m.places, Owner: id,
	}, c.layer))
	if err != nil {
		return errorf(CodeInternal, "session %q: mount %s on %s: %v", id, root, key, err)
	}
	c.srv = srv
	c.undo = append(c.undo, func() {
		if uerr := srv.Unmount(true); uerr != nil {
			m.log.Error("undo create: unmount", "session", id, "mountpoint", key, "err", uerr)
		}
	})
	// The mount opened root after rootID was taken: the same directory only
	// when root still names it now.
	if after, aerr := rootFileID(root); aerr != nil || after != rootID {
		return errorf(CodeRootChanged, "session %q: root %s was replaced while it was being mounted", id, root)
	}
	return nil
}

// startDir resolves the starting directory (the spec's cwd, or the
// parent's) inside the mount.
func (c *creation) startDir(ctx context.Context) error {
	if c.spec.Cwd == "" && c.startRel == "." {
		return nil
	}
	p := c.spec.Cwd
	if p == "" {
		p = c.startRel
	}
	rel, derr := c.m.dirInMount(ctx, c.m.view(c.root, c.key, c.srv, c.id), ".", p)
	// The errno is carried (%w), as a cd's is: a refusal by permission
	// (EACCES) is a runtime failure (CLI exit 1), not bad input.
	if derr != nil && c.spec.Cwd == "" {
		return errorf(CodeInvalid, "session %q: working directory inherited from the parent session %q: %w; cd the parent into the new root first (session cwd %s --cd DIR), or create without the parent and give one (cwd, --cwd)", c.id, c.spec.Parent, derr, c.spec.Parent)
	}
	if derr != nil {
		// Named as both the API field and the CLI flag that set it.
		return errorf(CodeInvalid, "session %q: cwd (--cwd) %w", c.id, derr)
	}
	c.startRel = rel
	return nil
}

// publish writes the record durably, drops the intent and fills in the
// session (still invisible until Create clears creating).
func (c *creation) publish(ctx context.Context) error {
	m, id := c.m, c.id
	rec := record{
		Version: recordVersion, ID: id, Origin: c.origin, Root: c.root,
		Mountpoint: c.key, MadeMountpoint: !c.existed, Policy: c.pspec,
		Symlinks: c.symlinks, Parent: c.spec.Parent, StartCwd: c.startRel,
		TmpDir: c.tmpDir, AllowWrite: c.allowWrite, Users: slices.Clone(c.spec.Users), Created: time.Now().UTC().Truncate(time.Millisecond),
		Labels: maps.Clone(c.spec.Labels),
	}
	if c.layer != nil && c.layerOf == "" {
		rec.Layer = c.layer.Dir
	}
	rec.LayerOf = c.layerOf
	if err := m.writeRecord(rec); err != nil {
		return errorf(CodeInternal, "session %q: record: %v", id, err)
	}
	if rerr := os.Remove(c.intentPath); rerr != nil {
		m.log.Warn("create: remove intent", "session", id, "path", c.intentPath, "err", rerr)
	}
	s := c.s
	s.mu.Lock()
	s.rec, s.srv, s.pol, s.events, s.cwd, s.rootID = rec, c.srv, c.pol, c.events, c.startRel, c.rootID
	s.hostView = m.hostViewOf(id)
	s.layer = c.layer
	s.mu.Unlock()
	return nil
}
