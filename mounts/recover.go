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
	"github.com/wsfs/wsfs/identity"
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
// List show why; Remove deletes it); so does one whose record cannot be read
// (its id, from the file name, stays taken). Only names of writeFileAtomic's
// temp files (isTempName) are deleted as leftovers of record writes. The error joins one line per such
// session; sessions that recovered are served either way. Call Recover once,
// before serving.
func (m *Manager) Recover(ctx context.Context) error {
	entries, err := os.ReadDir(m.sessDir)
	if err != nil {
		return errorf(CodeInternal, "state directory %s: %v", m.sessDir, identity.ErrnoText(err))
	}
	have := map[string]bool{}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && ValidID(id) == nil {
			have[id] = true
			ids = append(ids, id)
		}
	}
	m.takeKept(have)
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(m.sessDir, name)
		switch {
		case isTempName(name):
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
	// The jails the previous daemon left run on: those of a recorded
	// session are taken back with it, or ended when it cannot be served
	// on (recoverOne, jailkeep.go); the others are ended now, as a stop
	// ends them.
	jails := m.recordedJails()
	for id, js := range jails {
		if !have[id] {
			m.dropJails(id, js, false)
			delete(jails, id)
		}
	}
	for _, dir := range []string{jailViewDir, jailHostViewDir} {
		if views, err := os.ReadDir(filepath.Join(m.mountBase, dir)); err == nil {
			for _, e := range views {
				if path := filepath.Join(m.mountBase, dir, e.Name()); !m.isKept(path) {
					// Left by a crash; mounted again with the next jail.
					m.clearViewDir(e.Name(), path)
				}
			}
		}
	}
	if views, err := os.ReadDir(filepath.Join(m.mountBase, hostViewDir)); err == nil {
		for _, e := range views {
			if !have[e.Name()] {
				m.unmountHostView(e.Name()) // left by a crash
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
	// Two waves: the sub-sessions of layered sessions serve their owner's
	// layer, which the first wave opens again (reopenLayer).
	onLayer := map[string]bool{}
	for _, id := range ids {
		if rec, err := readRecord(filepath.Join(m.sessDir, id+".json")); err == nil && rec.LayerOf != "" {
			onLayer[id] = true
		}
	}
	for _, second := range []bool{false, true} {
		var wg sync.WaitGroup
		sem := make(chan struct{}, recoverWorkers)
		for i, id := range ids {
			if onLayer[id] != second {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = m.recoverOne(ctx, id, jails[id])
			}()
		}
		wg.Wait()
	}
	// The connections no session took are ended, unless this daemon was
	// stopped while starting (a takeover's SIGTERM): then they are the
	// successor's to take.
	m.leaveKept(ctx.Err() == nil)
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
func (m *Manager) recoverOne(ctx context.Context, id string, js []jail) error {
	// The session's jails go with it: taken back when it is served on,
	// else ended (or, when this daemon is stopped while starting, left
	// to the next one).
	adopted := false
	defer func() {
		if !adopted {
			m.dropJails(id, js, ctx.Err() != nil)
		}
	}()
	path := filepath.Join(m.sessDir, id+".json")
	rec, err := readRecord(path)
	if err != nil {
		// Kept, failed: its id stays taken, and Remove deletes its files.
		s := &session{
			rec:        record{ID: id, TmpDir: filepath.Join(m.tmpBase, id)},
			cwd:        ".",
			unreadable: true,
			failed:     fmt.Sprintf("record %s is unreadable: %v", path, err),
		}
		m.mu.Lock()
		m.sessions[id] = s
		m.mu.Unlock()
		m.log.Error("recover: session not mounted", "session", id, "reason", s.failed)
		return fmt.Errorf("session %q: %s", id, s.failed)
	}
	// The temp directory is this state directory's, whatever the record
	// says: Remove deletes it.
	rec.TmpDir = filepath.Join(m.tmpBase, id)
	s := &session{rec: rec, cwd: rec.StartCwd, hostView: m.hostViewOf(id)}
	m.mu.Lock()
	m.sessions[id] = s
	m.mountpoints[rec.Mountpoint] = id
	m.roots[id] = rec.Root
	m.mu.Unlock()
	// Hidden from every other session's host view (recorded paths are
	// canonical and absolute).
	if err := m.places.Add(id, placesOf(rec.Root, rec.Mountpoint)...); err != nil {
		m.log.Warn("recover: hidden places", "session", id, "err", err)
	}

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
		if cwd, ok := cwdOfPath(rec.Mountpoint, s.hostView, to); ok {
			s.cwd = cwd
		}
	}

	if err := ctx.Err(); err != nil {
		return fail("%v", err)
	}
	if done, err := m.adoptSession(id, s, rec); done {
		adopted = true
		m.adoptJails(s, js)
		return nil
	} else if err != nil {
		m.log.Warn("recover: the kept connections could not be served on; mounting again", "session", id, "err", err)
	}
	if err := clearMount(rec.Mountpoint, true, true); err != nil {
		return fail("clear stale mount on %s: %v", rec.Mountpoint, err)
	}
	if !isDir(rec.Mountpoint) {
		if !rec.MadeMountpoint {
			return fail("mountpoint %s: no such directory", rec.Mountpoint)
		}
		if err := os.Mkdir(rec.Mountpoint, 0o755); err != nil {
			return fail("mountpoint %s: %v", rec.Mountpoint, identity.ErrnoText(err))
		}
	}
	if err := makeTmpDir(rec.TmpDir, rec.Users); err != nil {
		return fail("temp directory %s: %v", rec.TmpDir, identity.ErrnoText(err))
	}
	pol, err := policy.Compile(rec.Policy)
	if err != nil {
		return fail("%v", err)
	}
	rootID, err := rootFileID(rec.Root)
	if err != nil {
		return fail("root %s: %v", rec.Root, err)
	}
	if _, err := m.mountHostView(id, rec.Root, rec.Mountpoint, pol, m.labelled(rec.Labels), rec.Users, nil); err != nil {
		return fail("%v", err)
	}
	lay, err := m.reopenLayer(s, rec)
	if err != nil {
		m.unmountHostView(id)
		return fail("%v", err)
	}
	srv, err := fusefs.Mount(layered(fusefs.Config{
		Root: rec.Root, Mountpoint: rec.Mountpoint, Policy: pol,
		Symlinks: rec.Symlinks, Logger: m.labelled(rec.Labels), Session: id, HostView: m.hostViewOf(id), Users: rec.Users,
		Keep: m.store, Transport: m.transport,
		Hidden: m.viewHidden(), Shared: m.places, Owner: id,
	}, lay))
	if err != nil {
		m.unmountHostView(id)
		return fail("mount %s on %s: %v", rec.Root, rec.Mountpoint, err)
	}
	s.srv, s.pol, s.rootID = srv, pol, rootID
	if after, aerr := rootFileID(rec.Root); aerr != nil || after != rootID {
		// Replaced while it was being mounted: the mount may serve another
		// directory than the one recorded.
		s.srv, s.pol = nil, nil
		if uerr := srv.Unmount(true); uerr != nil {
			m.log.Error("recover: unmount", "session", id, "mountpoint", rec.Mountpoint, "err", uerr)
		}
		m.unmountHostView(id)
		return fail("root %s was replaced while it was being mounted", rec.Root)
	}
	m.log.Info("session recovered", "session", id, "mountpoint", rec.Mountpoint, "cwd", cwdPath(rec.Mountpoint, s.hostView, s.cwd))
	return nil
}
