package mounts

// The Manager's side of layers (layer.go): where a session's layer lives,
// and the diff, commit and discard verbs.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// layerDirOf returns session id's layer directory: <state>/layers/<id>,
// inside the state directory that every session is refused and hidden.
func (m *Manager) layerDirOf(id string) string {
	return filepath.Join(m.stateDir, layersDir, id)
}

// removeLayerDir unmounts an overlay left at dir/merged (lazily) and
// deletes dir; a missing dir is no error.
func removeLayerDir(dir string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	l := &Layer{Dir: dir}
	return l.Remove()
}

// Config returns cfg serving the layer's merged tree in the project's place
// (what a session mount on the layer needs; see layered).
func (l *Layer) Config(cfg fusefs.Config) fusefs.Config { return layered(cfg, l) }

// layered returns cfg serving layer l's merged tree in the project's place
// (cfg unchanged when l is nil): the merged directory at cfg.Root's place
// in the project (the merged root for the project itself, a directory of
// it for a sub-session's root inside the project: backingOf), no watcher
// (host changes below an overlay raise no events on it), so the kernel's
// caches keep the short timeouts, every allowed write first records
// the project's baseline, and the overlay's objects are identified by
// their origins in the project (fusefs.Config.Lower: the policy protects
// project objects, a hard link to one included).
func layered(cfg fusefs.Config, l *Layer) fusefs.Config {
	if l == nil {
		return cfg
	}
	cfg.Backing = l.backingOf(cfg.Root)
	cfg.Lower = l.Lower
	cfg.BeforeWrite = l.Before
	cfg.NoWatch = true
	return cfg
}

// backingOf returns the merged directory that stands for root, the
// project or a directory inside it (canonical): Merged() joined with
// root's path below the project. Which object is there is the overlay's to
// say (fusefs.Mount opens it refusing a symlink on the way).
func (l *Layer) backingOf(root string) string {
	rel, err := filepath.Rel(l.Lower, root)
	if err != nil || rel == "." {
		return l.Merged()
	}
	return filepath.Join(l.Merged(), rel)
}

// addSub records sub-session id as serving the layer (Remove of its
// session is refused meanwhile); dropSub forgets it.
func (l *Layer) addSub(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs == nil {
		l.subs = map[string]bool{}
	}
	l.subs[id] = true
}

// dropSub forgets sub-session id (addSub).
func (l *Layer) dropSub(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.subs, id)
}

// users returns the sub-sessions serving the layer, sorted.
func (l *Layer) users() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.subs))
}

// offLayer refuses, for session id on session owner's layer over the
// project lower, a place its policy (pol) or its jails' allow_write open
// inside that project past its own mount: a root other than none, a temp
// entry, an allow_write directory at or below lower. Its host view and
// jails reach such a place on disk, where writes would land in the
// project, not in the layer (and reads would not see the layer). A place
// that holds the project is hidden there already (the owner's root is
// another session's place).
func offLayer(id, owner, lower string, pol *policy.Policy, allowWrite []string) error {
	why := func(what, p string) error {
		return errorf(CodeInvalid, "session %q: %s %s: inside %s, the project of session %q's layer, which a session on that layer reaches only through its own root's mount (a root there would read and write the project on disk, past the layer)", id, what, p, lower, owner)
	}
	spec := pol.Spec()
	for _, r := range spec.Additional {
		if r.Access != policy.AccessNone && identity.Within(r.Path, lower) {
			return why("additional root", r.Path)
		}
	}
	for _, t := range spec.Temp {
		if identity.Within(t, lower) {
			return why("temp", t)
		}
	}
	for _, w := range allowWrite {
		if identity.Within(w, lower) {
			return why("allow_write", w)
		}
	}
	return nil
}

// layerLower returns the project of the layer session s runs on without
// owning it (rec.LayerOf); "" when it is on none or not mounted (a policy
// change is refused then). s.mu held.
func layerLower(s *session) string {
	if s.rec.LayerOf == "" || s.layer == nil {
		return ""
	}
	return s.layer.Lower
}

// subLayer returns the layer session owner's mount serves, for its
// descendant id being created or recovered, and records id as serving it
// (addSub, under the owner's lock: a Remove of the owner sees it): the
// owner must exist, run on its own layer and be mounted. Errors name both
// sessions.
func (m *Manager) subLayer(id, owner string) (*Layer, error) {
	m.mu.Lock()
	o := m.sessions[owner]
	m.mu.Unlock()
	if o == nil {
		return nil, fmt.Errorf("session %q: runs on the layer of session %q, which does not exist", id, owner)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.gone || o.creating:
		return nil, fmt.Errorf("session %q: runs on the layer of session %q, which does not exist", id, owner)
	case o.rec.Layer == "":
		return nil, fmt.Errorf("session %q: runs on the layer of session %q, which has none", id, owner)
	case o.layer == nil || o.failed != "":
		return nil, fmt.Errorf("session %q: runs on the layer of session %q, which is not mounted: %s", id, owner, o.failed)
	}
	o.layer.addSub(id)
	return o.layer, nil
}

// reopenLayer opens the recorded layer of a session being recovered (the
// overlay mounted again unless it outlived the daemon) and sets s.layer;
// nil, nil without one.
func (m *Manager) reopenLayer(s *session, rec record) (*Layer, error) {
	if s.layer != nil {
		return s.layer, nil
	}
	if rec.LayerOf != "" {
		// Its owner was recovered first (Recover's order).
		l, err := m.subLayer(rec.ID, rec.LayerOf)
		if err != nil {
			return nil, err
		}
		s.layer = l
		return l, nil
	}
	if rec.Layer == "" {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(rec.Layer, layerUpper)); err != nil {
		// Never a fresh, empty layer in place of the session's changes.
		return nil, fmt.Errorf("layer %q: its upper directory: %s", rec.Layer, identity.ErrnoText(err))
	}
	l, err := OpenLayer(rec.Layer, rec.Root)
	if err != nil {
		return nil, err
	}
	l.Users = slices.Clone(rec.Users)
	s.layer = l
	return l, nil
}

// layerOf returns session id's layer, locked (s.mu held: unlock it
// before the verb's file system work, which runs under Layer.run).
func (m *Manager) layerOf(id, verb string) (*session, *Layer, error) {
	s, err := m.locked(id, true)
	if err != nil {
		return nil, nil, err
	}
	if s.rec.LayerOf != "" {
		// The layer's changes are its owner's to apply or throw away:
		// a sub-session only narrows what its parent may do.
		owner := s.rec.LayerOf
		s.mu.Unlock()
		return nil, nil, errorf(CodeInvalid, "session %q: %s: the session has no layer of its own; it runs on the layer of session %q, whose diff, commit, discard, checkpoints and rollback are that session's", id, verb, owner)
	}
	if s.rec.Layer == "" {
		s.mu.Unlock()
		return nil, nil, errorf(CodeInvalid, "session %q: %s: %v", id, verb, errLayerless)
	}
	if s.layer == nil || s.srv == nil {
		s.mu.Unlock()
		return nil, nil, errorf(CodeInvalid, "session %q: %s: the session is not mounted", id, verb)
	}
	return s, s.layer, nil
}

// layerPaths returns paths (relative to the root, or absolute inside the
// root or the mountpoint) relative to the root, cleaned; ErrInvalid names
// a path outside the session.
func layerPaths(id string, rec record, paths []string) ([]string, error) {
	out, err := LayerPaths(rec.Root, rec.Mountpoint, paths)
	if err != nil {
		return nil, errorf(CodeInvalid, "session %q: %v", id, err)
	}
	return out, nil
}

// LayerPaths returns paths, each relative to the project root or absolute
// inside root or the mountpoint mp (mp may be ""), relative to root and
// cleaned, as the layer verbs take them. An empty path, one outside both,
// or one that leaves the root is an error naming it.
func LayerPaths(root, mp string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		var rel string
		switch {
		case p == "":
			return nil, fmt.Errorf("path %q: empty", p)
		case !filepath.IsAbs(p):
			rel = filepath.Clean(p)
		case mp != "" && identity.Within(filepath.Clean(p), mp):
			rel, _ = filepath.Rel(mp, filepath.Clean(p))
		case identity.Within(filepath.Clean(p), root):
			rel, _ = filepath.Rel(root, filepath.Clean(p))
		case mp == "":
			return nil, fmt.Errorf("path %q: outside the root %s", p, root)
		default:
			return nil, fmt.Errorf("path %q: outside the root %s and the mountpoint %s", p, root, mp)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("path %q: leaves the root", p)
		}
		out = append(out, rel)
	}
	return out, nil
}

// DiffPaths lists what the layer changed under paths (relative to the
// project, cleaned: LayerPaths; every change when none), parents first,
// with text the unified diffs of text files; serialized with the other
// verbs. What Manager.Diff and `wsfs layer diff` answer.
func (l *Layer) DiffPaths(ctx context.Context, paths []string, text bool) ([]api.Change, error) {
	var all []api.Change
	if err := l.run(func() (err error) { all, err = l.DiffUnder(ctx, paths, text); return err }); err != nil {
		return nil, err
	}
	out := []api.Change{}
	for _, c := range all {
		if within(c.Path, paths) {
			out = append(out, c)
		}
	}
	return out, nil
}

// CommitPaths applies what the layer changed under paths to the project
// (Commit), each path through pol as it decides now (a refusal leaves
// the path in the layer, with pol's rule and errno as its reason),
// conflicts refused unless force; serialized with the other verbs. What
// Manager.Commit (the session's policy in force) and `wsfs layer commit`
// (the mount's recorded policy) apply.
func (l *Layer) CommitPaths(paths []string, force bool, pol *policy.Policy) (api.LayerResult, error) {
	var res api.LayerResult
	err := l.run(func() (err error) {
		res, err = l.Commit(paths, force, func(op policy.Op, p string) error {
			// With the project object's identity, as the mount decides:
			// a path naming a protected object (a hard link to it) is
			// refused too, its content, mode, owner and xattrs.
			rel, _ := filepath.Rel(l.Lower, p)
			if d := pol.DecideAt(op, p, fusefs.ObjectAt(l.Lower, rel)); !d.Allow {
				return fmt.Errorf("%s refused by the session's policy (%s, %s)", op, d.Rule, d.Errno)
			}
			return nil
		})
		return err
	})
	return res, err
}

// DiscardPaths undoes what the layer changed under paths (Discard);
// serialized with the other verbs.
func (l *Layer) DiscardPaths(paths []string) (api.LayerResult, error) {
	var res api.LayerResult
	err := l.run(func() (err error) { res, err = l.Discard(paths); return err })
	return res, err
}

// OpenLayerDir opens the layer directory dir that `wsfs mount --layer`
// served, for the layer verbs outside a daemon (`wsfs layer diff`,
// `commit`, `discard`): its manifest (LayerInfo) names the project, which
// must still be that directory (canonical), and the mount's policy, which
// a commit applies. The layer's lock is taken alone: a layer a mount or a
// daemon serves is refused (the mount keeps its baseline and kernel caches
// in memory, which the verbs would leave stale). The overlay is mounted
// at dir/merged until Close. Errors name dir and the rule: not a layer
// directory, a daemon session's layer (no mount policy: its session's
// verbs reach it), the project gone or moved, the layer in use.
func OpenLayerDir(dir string) (*Layer, LayerInfo, error) {
	if !filepath.IsAbs(dir) {
		return nil, LayerInfo{}, fmt.Errorf("layer %q: must be an absolute path", dir)
	}
	canon, err := identity.Canonical(dir)
	if err != nil {
		return nil, LayerInfo{}, fmt.Errorf("layer %q: %s", dir, identity.ErrnoText(err))
	}
	info, err := readLayerInfo(canon)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, info, fmt.Errorf("layer %q: no %s: not a layer directory (wsfs mount --layer DIR makes one)", dir, layerManifest)
	case err != nil:
		return nil, info, fmt.Errorf("layer %q: %v", dir, err)
	case info.Policy == nil:
		return nil, info, fmt.Errorf("layer %q: a daemon session's layer (no mount policy recorded): use wsfs session diff, commit or discard with its session", dir)
	}
	if _, err := os.Stat(filepath.Join(canon, layerUpper)); err != nil {
		return nil, info, fmt.Errorf("layer %q: its upper directory: %s", dir, identity.ErrnoText(err))
	}
	switch lc, err := identity.Canonical(info.Lower); {
	case err != nil:
		return nil, info, fmt.Errorf("layer %q: its project %s: %s", dir, info.Lower, identity.ErrnoText(err))
	case lc != info.Lower:
		return nil, info, fmt.Errorf("layer %q: its project %s is now %s (moved or replaced by a symlink)", dir, info.Lower, lc)
	case !isDir(lc):
		return nil, info, fmt.Errorf("layer %q: its project %s: not a directory", dir, info.Lower)
	}
	l, err := openLayer(canon, info.Lower, true)
	if err != nil {
		return nil, info, err
	}
	return l, info, nil
}

// Diff lists what layered session id changed under paths (every change
// when none), parents first; with text, unified diffs of text files.
//
// Errors: ErrNotFound, ErrInvalid (no layer, not mounted, a path outside
// the session), CodeInternal (the layer could not be read).
func (m *Manager) Diff(ctx context.Context, id string, paths []string, text bool) (api.DiffResult, error) {
	s, l, err := m.layerOf(id, "diff")
	if err != nil {
		return api.DiffResult{}, err
	}
	rels, err := layerPaths(id, s.rec, paths)
	// The walk reads files: not under the session's lock (list, show and
	// rm go on meanwhile); the layer's own lock keeps it open.
	s.mu.Unlock()
	if err != nil {
		return api.DiffResult{}, err
	}
	changes, err := l.DiffPaths(ctx, rels, text)
	if err != nil {
		return api.DiffResult{}, layerErr(id, "diff", err)
	}
	return api.DiffResult{Session: id, Changes: changes}, nil
}

// layerErr is the Manager's error for a layer verb's err: ErrInvalid for
// a layer closed meanwhile, else CodeInternal.
func layerErr(id, verb string, err error) error {
	if err == errLayerClosed {
		return errorf(CodeInvalid, "session %q: %s: %v", id, verb, err)
	}
	return errorf(CodeInternal, "session %q: %v", id, err)
}

// syncAfter drops the kernel caches of every mount serving layer l after
// a layer verb changed its tree: of each session on it (its own session
// and the sub-sessions on its layer: session.layer), the session mount's
// and its jail view's, which serves the same merged tree (layered) to the
// session's jails. Each session is locked in turn (none is held by the
// caller); one no longer mounted is skipped.
func (m *Manager) syncAfter(l *Layer) {
	for _, s := range m.published() {
		s.mu.Lock()
		if !s.gone && s.layer == l {
			for _, srv := range []*fusefs.Server{s.srv, s.jailView} {
				if srv != nil {
					srv.SyncHostChanges()
				}
			}
		}
		s.mu.Unlock()
	}
}

// Commit applies what layered session id changed under paths to the
// project (Layer.Commit): every path through the session's policy in
// force now, conflicts refused unless force. The mount's kernel caches are
// dropped afterwards. A path not applied stays in the layer and is listed
// with its reason; that is no error.
//
// Errors: ErrNotFound, ErrInvalid (no layer, not mounted, a path outside
// the session), CodeInternal.
func (m *Manager) Commit(ctx context.Context, id string, paths []string, force bool) (api.LayerResult, error) {
	s, l, err := m.layerOf(id, "commit")
	if err != nil {
		return api.LayerResult{}, err
	}
	rels, err := layerPaths(id, s.rec, paths)
	pol := s.pol
	s.mu.Unlock()
	if err != nil {
		return api.LayerResult{}, err
	}
	res, err := l.CommitPaths(rels, force, pol)
	if err != nil {
		return res, layerErr(id, "commit", err)
	}
	res.Session = id
	m.syncAfter(l)
	m.log.Info("layer committed", "session", id, "applied", len(res.Applied), "refused", len(res.Refused), "conflicts", len(res.Conflicts), "force", force)
	return res, nil
}

// Discard undoes what layered session id changed under paths
// (Layer.Discard) and drops the mount's kernel caches.
//
// Errors: ErrNotFound, ErrInvalid (no layer, not mounted, a path outside
// the session), CodeInternal.
func (m *Manager) Discard(ctx context.Context, id string, paths []string) (api.LayerResult, error) {
	s, l, err := m.layerOf(id, "discard")
	if err != nil {
		return api.LayerResult{}, err
	}
	rels, err := layerPaths(id, s.rec, paths)
	s.mu.Unlock()
	if err != nil {
		return api.LayerResult{}, err
	}
	res, err := l.DiscardPaths(rels)
	if err != nil {
		return res, layerErr(id, "discard", err)
	}
	res.Session = id
	m.syncAfter(l)
	m.log.Info("layer discarded", "session", id, "applied", len(res.Applied), "refused", len(res.Refused))
	return res, nil
}

// ckptErr is the Manager's error for a checkpoint verb's err: the layer's
// own refusals (a bad name, an existing or unknown checkpoint) keep their
// code, prefixed with the session; else as layerErr.
func ckptErr(id, verb string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return errorf(e.Code, "session %q: %s: %s", id, verb, e.Message)
	}
	return layerErr(id, verb, err)
}

// Checkpoint takes checkpoint name of layered session id (Layer.Checkpoint):
// a copy of its layer and baseline, made while the session runs on
// (without the session's lock).
//
// Errors: ErrNotFound, ErrInvalid (no layer, not mounted, a bad name),
// ErrExists (a checkpoint of that name), CodeInternal.
func (m *Manager) Checkpoint(ctx context.Context, id, name string) (api.Checkpoint, error) {
	if err := checkCheckpointName(name); err != nil {
		return api.Checkpoint{}, ckptErr(id, "checkpoint", err)
	}
	s, l, err := m.layerOf(id, "checkpoint")
	if err != nil {
		return api.Checkpoint{}, err
	}
	// The copy reads the whole layer: not under the session's lock.
	s.mu.Unlock()
	var c api.Checkpoint
	if err := l.run(func() (err error) { c, err = l.Checkpoint(name); return err }); err != nil {
		return c, ckptErr(id, "checkpoint", err)
	}
	m.log.Info("layer checkpoint", "session", id, "checkpoint", name, "files", c.Files, "bytes", c.Bytes)
	return c, nil
}

// Checkpoints lists layered session id's checkpoints, oldest first.
//
// Errors: ErrNotFound, ErrInvalid (no layer, not mounted), CodeInternal.
func (m *Manager) Checkpoints(ctx context.Context, id string) (api.CheckpointList, error) {
	s, l, err := m.layerOf(id, "checkpoints")
	if err != nil {
		return api.CheckpointList{}, err
	}
	s.mu.Unlock()
	var cs []api.Checkpoint
	if err := l.run(func() (err error) { cs, err = l.Checkpoints(); return err }); err != nil {
		return api.CheckpointList{}, ckptErr(id, "checkpoints", err)
	}
	return api.CheckpointList{Session: id, Checkpoints: cs}, nil
}

// DeleteCheckpoint removes checkpoint name of layered session id.
//
// Errors: ErrNotFound (no such session or checkpoint), ErrInvalid (no
// layer, not mounted, a bad name), CodeInternal.
func (m *Manager) DeleteCheckpoint(ctx context.Context, id, name string) error {
	if err := checkCheckpointName(name); err != nil {
		return ckptErr(id, "checkpoint rm", err)
	}
	s, l, err := m.layerOf(id, "checkpoint rm")
	if err != nil {
		return err
	}
	s.mu.Unlock()
	if err := l.run(func() error { return l.DeleteCheckpoint(name) }); err != nil {
		return ckptErr(id, "checkpoint rm", err)
	}
	m.log.Info("layer checkpoint removed", "session", id, "checkpoint", name)
	return nil
}

// Rollback makes layered session id's view what it was at checkpoint name
// (Layer.Rollback) while its processes run on, and drops the kernel
// caches of every mount serving its layer (the session's and its jail
// view), so that the next operation of each process sees the checkpoint's
// tree: a directory one is in that the checkpoint lacks gives it ENOENT,
// as after an rm -rf. A path that could not be changed is listed with its
// reason; that is no error.
//
// Errors: ErrNotFound (no such session or checkpoint), ErrInvalid (no
// layer, not mounted, a bad name), CodeInternal.
func (m *Manager) Rollback(ctx context.Context, id, name string) (api.RollbackResult, error) {
	if err := checkCheckpointName(name); err != nil {
		return api.RollbackResult{}, ckptErr(id, "rollback", err)
	}
	s, l, err := m.layerOf(id, "rollback")
	if err != nil {
		return api.RollbackResult{}, err
	}
	s.mu.Unlock()
	var res api.RollbackResult
	if err := l.run(func() (err error) { res, err = l.Rollback(name); return err }); err != nil {
		return res, ckptErr(id, "rollback", err)
	}
	res.Session = id
	m.syncAfter(l)
	m.log.Info("layer rolled back", "session", id, "checkpoint", name, "applied", len(res.Applied), "refused", len(res.Refused))
	return res, nil
}
