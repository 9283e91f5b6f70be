package mounts_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/policy"
)

// TestPatchDoesNotBlockList: while one session's policy PATCH compiles
// (held there by the test hook), session list, a read of the same
// session and another session's PATCH all answer, and the held patch then
// applies on top of the one made meanwhile (issue 20 item 8: no lock held
// while one session's policy compiles).
func TestPatchDoesNotBlockList(t *testing.T) {
	dir := canon(t, newDaemonDir(t))
	mkTree(t, dir, "a/f", "b/f")
	m, err := mounts.New(mounts.Config{StateDir: filepath.Join(dir, "state"), MountBase: filepath.Join(dir, "mnt"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()); clearMounts(t, dir) })
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, err := m.Create(ctx, mounts.Spec{ID: id, Root: filepath.Join(dir, id)}); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	held := false
	t.Cleanup(mounts.SetPolicyCompileHook(func(id string) {
		if id == "a" && !held {
			held = true
			close(entered)
			<-release
		}
	}))
	type answer struct {
		s   mounts.Session
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := m.PatchPolicy(ctx, "a", policy.Patch{Protected: []string{"held"}})
		done <- answer{s, err}
	}()
	<-entered
	// a's patch is inside its compilation now.
	if got := m.List(ctx); len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("session list during a's patch: %+v", got)
	}
	if _, err := m.Get(ctx, "a"); err != nil {
		t.Fatalf("get a during its patch: %v", err)
	}
	if _, err := m.PatchPolicy(ctx, "b", policy.Patch{Protected: []string{"other"}}); err != nil {
		t.Fatalf("patch b during a's patch: %v", err)
	}
	if _, err := m.PatchPolicy(ctx, "a", policy.Patch{Protected: []string{"meanwhile"}}); err != nil {
		t.Fatalf("a second patch of a during the first: %v", err)
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.s.Policy.Protected; len(got) != 2 || got[0] != "meanwhile" || got[1] != "held" {
		t.Errorf("a's protected after both patches: %q, want [meanwhile held]", got)
	}
}
