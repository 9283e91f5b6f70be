package mounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
)

// recoverWorkers is how many sessions Recover mounts at once.
const recoverWorkers = 4

// Recover brings the state directory back to the sessions it records, after
// a clean stop or a crash (kill -9) at any moment:
//
//   - a create that a crash interrupted (an intent file without a record) is
//     undone: its mount is cleared, the mountpoint it made is removed, its
//     temp directory and event log are deleted;
//   - leftovers of interrupted record writes and of removed sessions are
//     deleted;
//   - every recorded session is mounted again: a dead (ENOTCONN) mount on its
//     mountpoint is cleared first, a mountpoint Create made is made again when
//     missing, and the working directory is replayed from the event log (a
//     torn last line, from a crash in the middle of an append, is dropped:
//     its call never returned).
//
// A session that cannot be mounted again stays, in the failed state (Get and
// List show why; Remove deletes it). The error joins one line per such
// session; sessions that recovered are served either way. Call Recover once,
// before serving.
func (m *Manager) Recover(ctx context.Context) error {
	entries, err := os.ReadDir(m.sessDir)
	if err != nil {
		return errorf(CodeInternal, "state directory %s: %v", m.sessDir, errnoText(err))
	}
	have := map[string]bool{}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && ValidID(id) == nil {
			have[id] = true
			ids = append(ids, id)
		}
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(m.sessDir, name)
		switch {
		case strings.Contains(name, ".json.tmp-"):
			os.Remove(path)
		case strings.HasSuffix(name, ".pending"):
			id := strings.TrimSuffix(name, ".pending")
			if !have[id] {
				m.undoPending(id, path)
			}
			os.Remove(path)
		case strings.HasSuffix(name, ".events"):
			if !have[strings.TrimSuffix(name, ".events")] {
				os.Remove(path)
			}
		}
	}
	if tmps, err := os.ReadDir(m.tmpBase); err == nil {
		for _, e := range tmps {
			if !have[e.Name()] {
				os.RemoveAll(filepath.Join(m.tmpBase, e.Name()))
			}
		}
	}
	syncDir(m.sessDir)

	sort.Strings(ids)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, recoverWorkers)
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = m.recoverOne(ctx, id)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return errorf(CodeFailed, "recover: %v", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// undoPending undoes a create that a crash interrupted, from its intent file.
func (m *Manager) undoPending(id, path string) {
	data, err := os.ReadFile(path)
	var p pending
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	if err != nil {
		m.log.Warn("recover: unreadable create intent", "session", id, "path", path, "err", err)
		return
	}
	if p.Mountpoint != "" {
		if err := clearMount(p.Mountpoint, true, true); err != nil {
			m.log.Warn("recover: clear interrupted mount", "session", id, "mountpoint", p.Mountpoint, "err", err)
		}
		if !p.Existed {
			os.Remove(p.Mountpoint) // only when empty
		}
	}
	if p.TmpDir != "" && filepath.Dir(p.TmpDir) == m.tmpBase {
		os.RemoveAll(p.TmpDir)
	}
	os.Remove(filepath.Join(m.sessDir, id+".events"))
	m.log.Info("recover: undid an interrupted create", "session", id, "mountpoint", p.Mountpoint)
}

// recoverOne mounts recorded session id again and publishes it, failed or
// not. The error says why it failed.
func (m *Manager) recoverOne(ctx context.Context, id string) error {
	rec, err := readRecord(filepath.Join(m.sessDir, id+".json"))
	if err != nil {
		m.log.Error("recover: unreadable record", "session", id, "err", err)
		return fmt.Errorf("session %q: %v", id, err)
	}
	s := &session{rec: rec, cwd: rec.StartCwd}
	m.mu.Lock()
	m.sessions[id] = s
	m.mountpoints[rec.Mountpoint] = id
	m.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	fail := func(format string, a ...any) error {
		s.failed = fmt.Sprintf(format, a...)
		m.log.Error("recover: session not mounted", "session", id, "reason", s.failed)
		return fmt.Errorf("session %q: %s", id, s.failed)
	}

	events, list, err := openEventLog(filepath.Join(m.sessDir, id+".events"), false)
	if errors.Is(err, os.ErrNotExist) {
		events, list, err = openEventLog(filepath.Join(m.sessDir, id+".events"), true)
	}
	if err != nil {
		return fail("event log: %v", err)
	}
	s.events = events
	if n := len(list); n > 0 {
		to := list[n-1].To
		if rel, rerr := filepath.Rel(rec.Mountpoint, to); rerr == nil && within(to, rec.Mountpoint) {
			s.cwd = rel
		}
	}

	if err := ctx.Err(); err != nil {
		return fail("%v", err)
	}
	if err := clearMount(rec.Mountpoint, true, true); err != nil {
		return fail("clear stale mount on %s: %v", rec.Mountpoint, err)
	}
	if !isDir(rec.Mountpoint) {
		if !rec.MadeMountpoint {
			return fail("mountpoint %s: no such directory", rec.Mountpoint)
		}
		if err := os.Mkdir(rec.Mountpoint, 0o755); err != nil {
			return fail("mountpoint %s: %v", rec.Mountpoint, errnoText(err))
		}
	}
	if err := os.MkdirAll(rec.TmpDir, 0o700); err != nil {
		return fail("temp directory %s: %v", rec.TmpDir, errnoText(err))
	}
	pol, err := policy.Compile(rec.Policy)
	if err != nil {
		return fail("%v", err)
	}
	srv, err := fusefs.Mount(fusefs.Config{
		Root: rec.Root, Mountpoint: rec.Mountpoint, Policy: pol,
		Symlinks: rec.Symlinks, Logger: m.log, Session: id,
	})
	if err != nil {
		return fail("mount %s on %s: %v", rec.Root, rec.Mountpoint, err)
	}
	s.srv, s.pol = srv, pol
	m.log.Info("session recovered", "session", id, "mountpoint", rec.Mountpoint, "cwd", inMount(rec.Mountpoint, s.cwd))
	return nil
}
