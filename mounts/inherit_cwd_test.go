package mounts_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// TestSubSessionInheritedCwdRefused: a sub-session on a subdirectory of its
// parent's root, while the parent's working directory is that root (above
// the child's root, which the child's host view only passes through), is
// refused with a message saying the working directory was inherited and how
// to give another; a refusal by permission (EACCES, in the API's answer too),
// so the CLI exits 1 as the README says (it exited 2 before).
func TestSubSessionInheritedCwdRefused(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "src/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj}); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(proj, "src")
	r := d.wsfs(t, "session", "create", "c1", "--parent", "s1", "--root", src)
	head := `wsfs: session "c1": working directory inherited from the parent session "s1": `
	tail := "; cd the parent into the new root first (session cwd s1 --cd DIR), or create without the parent and give one (cwd, --cwd)\n"
	if r.code != 1 || !strings.HasPrefix(r.stderr, head) || !strings.HasSuffix(r.stderr, tail) || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("create c1 --parent s1 --root proj/src: exit %d stderr %q, want 1 %q…permission denied…%q", r.code, r.stderr, head, tail)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "c1", Parent: "s1", Root: src}); mounts.CodeOf(err) != mounts.CodeInvalid || identity.ErrnoName(err) != "EACCES" {
		t.Fatalf("create c1 by the API: %v (errno %q), want invalid with EACCES", err, identity.ErrnoName(err))
	}
	// The fix the message names: the parent into the new root first.
	if r := d.wsfs(t, "session", "cwd", "s1", "--cd", "src"); r.code != 0 {
		t.Fatalf("session cwd s1 --cd src: %+v", r)
	}
	if r := d.wsfs(t, "session", "create", "c1", "--parent", "s1", "--root", src); r.code != 0 {
		t.Fatalf("create c1 after cd src: %+v", r)
	}
	if got, err := d.c.Get(ctx, "c1"); err != nil || got.Cwd != got.Mountpoint {
		t.Fatalf("c1: cwd %q (%v), want its mount root %q", got.Cwd, err, got.Mountpoint)
	}
}

// TestCwdInOtherSessionsRoot: cd into another session's root, hidden from
// this one, says whose root it is.
func TestCwdInOtherSessionsRoot(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	a, b := filepath.Join(dir, "proj-a"), filepath.Join(dir, "proj-b")
	mkTree(t, a, "f")
	mkTree(t, b, "sub/")
	for id, root := range map[string]string{"a": a, "b": b} {
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"../proj-b", "../proj-b/sub", "../proj-b/missing"} {
		r := d.wsfs(t, "session", "cwd", "a", "--cd", p)
		tail := `: it is in session "b"'s root ` + b + ", which other sessions never see\n"
		if r.code == 0 || !strings.HasPrefix(r.stderr, `wsfs: session "a": `) || !strings.HasSuffix(r.stderr, tail) || !strings.Contains(r.stderr, "ermission denied") {
			t.Errorf("session cwd a --cd %s: exit %d stderr %q, want EACCES ending %q", p, r.code, r.stderr, tail)
		}
	}
	// A none root of the session's own is not another session's.
	if r := d.wsfs(t, "session", "cwd", "a", "--cd", "/proc"); strings.Contains(r.stderr, "root") && strings.Contains(r.stderr, "other sessions") {
		t.Errorf("session cwd a --cd /proc: %q names another session", r.stderr)
	}
}
