package mounts

// The Manager's side of layers (layer.go): where a session's layer lives,
// and the diff, commit and discard verbs.

import (
	"context"
	"errors"
	"fmt"
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
// (cfg unchanged when l is nil): no watcher (host changes below an overlay
// raise no events on it), so the kernel's caches keep the short timeouts,
// and every allowed write first records the project's baseline.
func layered(cfg fusefs.Config, l *Layer) fusefs.Config {
	if l == nil {
		return cfg
	}
	cfg.Backing = l.Merged()
	cfg.BeforeWrite = l.Before
	cfg.NoWatch = true
	return cfg
}

// reopenLayer opens the recorded layer of a session being recovered (the
// overlay mounted again unless it outlived the daemon) and sets s.layer;
// nil, nil without one.
func (m *Manager) reopenLayer(s *session, rec record) (*Layer, error) {
	if rec.Layer == "" {
		return nil, nil
	}
	if s.layer != nil {
		return s.layer, nil
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
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		var rel string
		switch {
		case p == "":
			return nil, errorf(CodeInvalid, "session %q: path %q: empty", id, p)
		case !filepath.IsAbs(p):
			rel = filepath.Clean(p)
		case identity.Within(filepath.Clean(p), rec.Mountpoint):
			rel, _ = filepath.Rel(rec.Mountpoint, filepath.Clean(p))
		case identity.Within(filepath.Clean(p), rec.Root):
			rel, _ = filepath.Rel(rec.Root, filepath.Clean(p))
		default:
			return nil, errorf(CodeInvalid, "session %q: path %q: outside the root %s and the mountpoint %s", id, p, rec.Root, rec.Mountpoint)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, errorf(CodeInvalid, "session %q: path %q: leaves the root", id, p)
		}
		out = append(out, rel)
	}
	return out, nil
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
	var all []api.Change
	if err := l.run(func() (err error) { all, err = l.DiffUnder(ctx, rels, text); return err }); err != nil {
		return api.DiffResult{}, layerErr(id, "diff", err)
	}
	out := api.DiffResult{Session: id, Changes: []api.Change{}}
	for _, c := range all {
		if within(c.Path, rels) {
			out.Changes = append(out.Changes, c)
		}
	}
	return out, nil
}

// layerErr is the Manager's error for a layer verb's err: ErrInvalid for
// a layer closed meanwhile, else CodeInternal.
func layerErr(id, verb string, err error) error {
	if err == errLayerClosed {
		return errorf(CodeInvalid, "session %q: %s: %v", id, verb, err)
	}
	return errorf(CodeInternal, "session %q: %v", id, err)
}

// syncAfter drops session id's kernel caches after a layer verb changed
// its tree (the session's lock taken again; nothing when it is no longer
// mounted): the session mount's and its jail view's, which serves the
// same merged tree (layered) to the session's jails.
func (m *Manager) syncAfter(s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	for _, srv := range []*fusefs.Server{s.srv, s.jailView} {
		if srv != nil {
			srv.SyncHostChanges()
		}
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
	var res api.LayerResult
	err = l.run(func() (err error) {
		res, err = l.Commit(rels, force, func(op policy.Op, p string) error {
			if d := pol.DecideAt(op, p, policy.Object{}); !d.Allow {
				return fmt.Errorf("%s refused by the session's policy (%s, %s)", op, d.Rule, d.Errno)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return res, layerErr(id, "commit", err)
	}
	res.Session = id
	m.syncAfter(s)
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
	var res api.LayerResult
	if err := l.run(func() (err error) { res, err = l.Discard(rels); return err }); err != nil {
		return res, layerErr(id, "discard", err)
	}
	res.Session = id
	m.syncAfter(s)
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
	m.syncAfter(s)
	m.log.Info("layer rolled back", "session", id, "checkpoint", name, "applied", len(res.Applied), "refused", len(res.Refused))
	return res, nil
}
