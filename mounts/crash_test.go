package mounts_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// kill -9 of the daemon in the middle of 200 concurrent creates and cwd
// changes, then a restart: every create that returned 201 is mounted again,
// every acknowledged cwd change is there, and no stale mount, mountpoint,
// record or temp directory is left.
func TestKill9DuringCreatesAndCwdChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	const (
		creators    = 180 // sessions created concurrently
		walkers     = 20  // sessions whose cwd changes concurrently
		dirsPerRoot = 10
		killAfter   = 60 // acknowledged creates before the kill ...
		killAfterCd = 20 // ... and acknowledged cwd changes
	)
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	// The workers' requests: cancelled at the kill, since a killed daemon
	// stuck on its own mount keeps its connections open (see waitExit).
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rootOf := func(id string) string { return filepath.Join(dir, "roots", id) }
	var dirs []string
	for k := 0; k < dirsPerRoot; k++ {
		dirs = append(dirs, fmt.Sprintf("d%d/", k))
	}
	for i := 0; i < walkers; i++ {
		id := fmt.Sprintf("w%02d", i)
		mkTree(t, rootOf(id), dirs...)
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: rootOf(id)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < creators; i++ {
		mkTree(t, rootOf(fmt.Sprintf("c%03d", i)), "d0/")
	}

	var (
		createAcks, cdAcks atomic.Int64
		killOnce           sync.Once
		killNow            = make(chan struct{})
		stop               atomic.Bool
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		acked              = map[string]bool{}   // creates that returned 201
		lastCd             = map[string]string{} // walker → last acknowledged dir
		inflightCd         = map[string]string{} // walker → dir of the change in flight at the kill
	)
	maybeKill := func() {
		if createAcks.Load() >= killAfter && cdAcks.Load() >= killAfterCd {
			killOnce.Do(func() { close(killNow) })
		}
	}
	apiRefusal := func(what string, err error) {
		var me *mounts.Error
		if errors.As(err, &me) && !stop.Load() {
			t.Errorf("%s: refused by the daemon: %v", what, err)
		}
	}
	for i := 0; i < creators; i++ {
		id := fmt.Sprintf("c%03d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.c.Create(wctx, api.CreateRequest{ID: id, Root: rootOf(id)})
			if err != nil {
				apiRefusal("create "+id, err)
				return
			}
			mu.Lock()
			acked[id] = true
			mu.Unlock()
			createAcks.Add(1)
			maybeKill()
		}()
	}
	for i := 0; i < walkers; i++ {
		id := fmt.Sprintf("w%02d", i)
		mp := filepath.Join(d.mountBase, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; !stop.Load(); n++ {
				target := filepath.Join(mp, fmt.Sprintf("d%d", n%dirsPerRoot))
				mu.Lock()
				inflightCd[id] = target
				mu.Unlock()
				wd, err := d.c.Chdir(wctx, id, target)
				if err != nil {
					apiRefusal("cd "+id, err)
					return
				}
				if wd.Path != target {
					t.Errorf("cd %s %s: at %s", id, target, wd.Path)
				}
				mu.Lock()
				lastCd[id], inflightCd[id] = target, ""
				mu.Unlock()
				cdAcks.Add(1)
				maybeKill()
			}
		}()
	}
	<-killNow
	stop.Store(true)
	d.kill()
	cancel()
	wg.Wait()
	t.Logf("killed after %d acknowledged creates and %d acknowledged cwd changes", createAcks.Load(), cdAcks.Load())

	d2 := startDaemon(t, dir)
	d.waitExit(t)
	list, err := d2.c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Session{}
	var ids, mps []string
	for _, s := range list {
		got[s.ID] = s
		ids = append(ids, s.ID)
		mps = append(mps, s.Mountpoint)
		if s.State != mounts.StateMounted {
			t.Errorf("session %s after restart: state %s (%s)", s.ID, s.State, s.Error)
		}
	}
	for id := range acked {
		if _, ok := got[id]; !ok {
			t.Errorf("acknowledged create %s: lost after kill -9", id)
		}
	}
	for i := 0; i < walkers; i++ {
		id := fmt.Sprintf("w%02d", i)
		s, ok := got[id]
		if !ok {
			t.Errorf("walker %s: lost", id)
			continue
		}
		want := []string{lastCd[id]}
		if lastCd[id] == "" {
			want[0] = filepath.Join(d.mountBase, id)
		}
		if inflightCd[id] != "" {
			want = append(want, inflightCd[id])
		}
		if s.Cwd != want[0] && (len(want) == 1 || s.Cwd != want[1]) {
			t.Errorf("walker %s: cwd %s after restart, want one of %v", id, s.Cwd, want)
		}
	}
	// Nothing stale: the mounts, mountpoints, records and temp directories
	// are exactly the sessions', and every mount answers.
	for _, id := range ids {
		mps = append(mps, filepath.Join(d2.mountBase, "@host", id)) // each session's host view
	}
	sort.Strings(mps)
	if m := fuseMountsUnder(t, dir); !reflect.DeepEqual(m, mps) {
		sort.Strings(m)
		if !reflect.DeepEqual(m, mps) {
			t.Errorf("mounts after restart:\n%v\nwant the sessions' mountpoints:\n%v", m, mps)
		}
	}
	if e := entries(t, d2.mountBase); !reflect.DeepEqual(e, append([]string{"@host"}, ids...)) {
		t.Errorf("mount base after restart: %v, want %v", e, ids)
	}
	if e := entries(t, filepath.Join(d2.stateDir, "tmp")); !reflect.DeepEqual(e, ids) {
		t.Errorf("temp dirs after restart: %v, want %v", e, ids)
	}
	var recs []string
	for _, id := range ids {
		recs = append(recs, id+".events", id+".json")
	}
	sort.Strings(recs)
	if e := entries(t, filepath.Join(d2.stateDir, "sessions")); !reflect.DeepEqual(e, recs) {
		t.Errorf("records after restart: %v, want %v", e, recs)
	}
	r := run(t, commandf("for m in %s; do stat -c %%F \"$m\" >/dev/null || echo \"dead $m\"; done", strings.Join(mps, " ")))
	if r.code != 0 || r.stdout != "" {
		t.Errorf("mounts after restart do not all answer: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	t.Logf("%d sessions after restart (%d creates acknowledged)", len(list), len(acked))
}

// SIGINT (the full stop) unmounts every session and keeps the records; the next start
// mounts them again with their working directories. A session whose root
// vanished meanwhile comes back in the failed state: shown, refused for
// cwd, removable.
func TestCleanRestart(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for _, id := range []string{"keep", "lose"} {
		mkTree(t, filepath.Join(dir, id), "sub/")
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: filepath.Join(dir, id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.c.Chdir(ctx, "keep", "sub"); err != nil {
		t.Fatal(err)
	}
	d.stop()
	if m := fuseMountsUnder(t, dir); len(m) != 0 {
		t.Fatalf("mounts after SIGINT: %v", m)
	}
	if e := entries(t, filepath.Join(d.stateDir, "sessions")); !reflect.DeepEqual(e, []string{"keep.events", "keep.json", "lose.events", "lose.json"}) {
		t.Fatalf("records after SIGINT: %v", e)
	}
	if _, err := os.Stat(d.socket); !os.IsNotExist(err) {
		t.Fatalf("socket after SIGINT: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "lose")); err != nil {
		t.Fatal(err)
	}

	d2 := startDaemon(t, dir)
	keep, err := d2.c.Get(ctx, "keep")
	if err != nil || keep.State != mounts.StateMounted || keep.Cwd != keep.Mountpoint+"/sub" {
		t.Fatalf("keep after restart: %+v %v", keep, err)
	}
	if r := d2.exec(t, "keep", nil, "pwd"); r.code != 0 || r.stdout != keep.Mountpoint+"/sub\n" {
		t.Fatalf("exec in keep after restart: %+v", r)
	}
	lose, err := d2.c.Get(ctx, "lose")
	if err != nil || lose.State != mounts.StateFailed || !strings.Contains(lose.Error, "lose") {
		t.Fatalf("lose after restart: %+v %v", lose, err)
	}
	_, err = d2.c.Cwd(ctx, "lose")
	wantCode(t, "cwd of a failed session", err, mounts.CodeFailed)
	text, err := d2.c.Metrics(ctx)
	if err != nil || !strings.Contains(text, "\nwsfs_sessions{state=\"mounted\"} 1\nwsfs_sessions{state=\"failed\"} 1\n") {
		t.Fatalf("metrics: %v\n%s", err, text)
	}
	for _, id := range []string{"lose", "keep"} {
		if err := d2.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if e := entries(t, filepath.Join(d2.stateDir, "sessions")); len(e) != 0 {
		t.Fatalf("records after remove: %v", e)
	}
	if e := entries(t, d2.mountBase); len(e) != 0 {
		t.Fatalf("mount base after remove: %v", e)
	}
}
