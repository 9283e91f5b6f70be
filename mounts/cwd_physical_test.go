package mounts_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestCwdOverlappingRoots: inside its own root a session's cwd is decided
// as its mount decides it, not by its host view, which hides the root of
// another session inside this one (the README's host example cds into src
// while a session on src exists).
func TestCwdOverlappingRoots(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "src/a/")
	s1, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s2", Root: filepath.Join(proj, "src")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"src", "src/a"} {
		wd, err := d.c.Chdir(ctx, "s1", filepath.Join(s1.Mountpoint, p))
		if err != nil || wd.Path != filepath.Join(s1.Mountpoint, p) || wd.Physical != filepath.Join(proj, p) {
			t.Fatalf("s1: cd %s: %+v %v, want %s (%s)", p, wd, err, filepath.Join(s1.Mountpoint, p), filepath.Join(proj, p))
		}
	}
	if r := d.wsfs(t, "session", "cwd", "s1", "--cd", ".."); r.code != 0 || r.stdout != filepath.Join(s1.Mountpoint, "src")+"\t"+filepath.Join(proj, "src")+"\n" {
		t.Fatalf("wsfs session cwd s1 --cd ..: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestCwdDotDotIsPhysical: ".." at the mount root is the project's parent
// (DESIGN.md: relative paths start at the physical cwd), for cd and
// resolve, not the mount base; the places the host view shows only as the
// way to the session's own (the mount base, the state directory) are
// refused with EACCES.
func TestCwdDotDotIsPhysical(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "src/")
	mkTree(t, dir, "notes/", "README.md")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj})
	if err != nil {
		t.Fatal(err)
	}
	hv := filepath.Join(d.mountBase, "@host", "s1")
	res, err := d.c.Resolve(ctx, "s1", "../README.md")
	if want := filepath.Join(dir, "README.md"); err != nil || res.Key != want {
		t.Fatalf("resolve ../README.md: %+v %v, want key %s", res, err, want)
	}
	notes := filepath.Join(dir, "notes")
	wd, err := d.c.Chdir(ctx, "s1", "../notes")
	if err != nil || wd.Physical != notes || wd.Path != hv+notes {
		t.Fatalf("cd ../notes from the root: %+v %v, want %s (%s)", wd, err, hv+notes, notes)
	}
	if wd, err = d.c.Chdir(ctx, "s1", "../proj/src"); err != nil || wd.Path != filepath.Join(s.Mountpoint, "src") {
		t.Fatalf("cd ../proj/src from %s: %+v %v, want %s", notes, wd, err, filepath.Join(s.Mountpoint, "src"))
	}
	if wd, err = d.c.Chdir(ctx, "s1", "../.."); err != nil || wd.Physical != dir || wd.Path != hv+dir {
		t.Fatalf("cd ../.. from src: %+v %v, want %s", wd, err, hv+dir)
	}
	for _, p := range []string{d.mountBase, d.stateDir, "mnt", "state"} {
		_, err := d.c.Chdir(ctx, "s1", p)
		wantErrno(t, "cd "+p, err, syscall.EACCES)
		if err != nil && !strings.Contains(err.Error(), "(rule hostview:") {
			t.Errorf("cd %s: %v, want a hostview rule", p, err)
		}
	}
	// Outside none: the directories above the root are the way to it only.
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s3", Root: filepath.Join(proj, "src"), Policy: &api.Policy{Outside: "none"}}); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Chdir(ctx, "s3", "..")
	wantErrno(t, "s3: cd ..", err, syscall.EACCES)
	if err != nil && !strings.Contains(err.Error(), "(rule hostview:passage)") {
		t.Errorf("s3: cd ..: %v, want rule hostview:passage", err)
	}
}
