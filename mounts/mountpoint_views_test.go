package mounts_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestMountpointInViews: a mountpoint inside another session's host view,
// jail view or jail host view is refused like one inside its mount (the
// daemon would walk, and mount, inside a mount it serves).
func TestMountpointInViews(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, other := filepath.Join(dir, "proj"), filepath.Join(dir, "other")
	mkTree(t, proj, "f")
	mkTree(t, other, "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "y1", Root: proj}); err != nil {
		t.Fatal(err)
	}
	if haveJail() { // its first jail mounts its jail views
		if r := d.exec(t, "y1", []string{"--confine"}, "true"); r.code != 0 {
			t.Fatalf("jail: %+v", r)
		}
	}
	for _, sub := range []string{"@host", "@jail", "@jailhost"} {
		views := filepath.Join(d.mountBase, sub)
		mp := filepath.Join(views, "y1", dir, "m")
		r := d.wsfs(t, "session", "create", "z", "--root", other, "--mountpoint", mp)
		want := `wsfs: session "z": mountpoint "` + mp + `" is inside ` + views + ", where the daemon mounts its sessions' views; a mountpoint may not be inside a mount the daemon serves\n"
		if r.code != 2 || r.stderr != want {
			t.Errorf("create --mountpoint %s: exit %d stderr %q, want 2 %q", mp, r.code, r.stderr, want)
		}
	}
}
