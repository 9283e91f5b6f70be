package mounts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestResolveOutsideAsHostView: `session resolve` of a path outside the
// root in a place the session's views hide (its jails cover it, its host
// view refuses it) says so: the daemon's session records are EACCES
// (hostview:hidden), not the bare policy's outside:read-only, as a look
// through the host view agrees; a plain outside path reads. Found by a new
// user's trial (resolve allowed reading the state directory).
func TestResolveOutsideAsHostView(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, filepath.Join(dir, "p"), "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")}); err != nil {
		t.Fatal(err)
	}
	hostView := filepath.Join(d.mountBase, "@host", "p")
	for _, c := range []struct {
		path, read, write, through string
	}{
		{filepath.Join(d.stateDir, "sessions"), "false hostview:hidden EACCES", "false hostview:hidden EACCES", "EACCES"},
		{"/usr", "true outside:read-only ", "false outside:read-only EROFS", "ok"},
	} {
		r, err := d.c.Resolve(ctx, "p", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(r.Read.Allow, " ", r.Read.Rule, " ", r.Read.Errno); got != c.read {
			t.Errorf("resolve %s: read %q, want %q", c.path, got, c.read)
		}
		if got := fmt.Sprint(r.Write.Allow, " ", r.Write.Rule, " ", r.Write.Errno); got != c.write {
			t.Errorf("resolve %s: write %q, want %q", c.path, got, c.write)
		}
		// The host view agrees (from another process).
		through := "ok"
		if res := run(t, commandf("ls %s >/dev/null", filepath.Join(hostView, c.path))); res.code != 0 {
			through = "EACCES"
		}
		if through != c.through {
			t.Errorf("ls %s through the host view: %s, want %s", c.path, through, c.through)
		}
	}
}
