package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// A session whose policy names no temp area gets its own temp directory as
// one, at Create and after a policy change, not the host's shared temp
// directory; an explicit empty list means none. Resolve answers as the
// session's host view does (a write there agrees): the shared temp
// directory is hidden from the session (/tmp is, but for its temp area),
// and so is its own temp directory once it is no temp area (the daemon's
// state directory).
func TestSessionTempArea(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "tmp", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(os.TempDir(), "wsfs-shared-temp-probe")
	check := func(step, path, want string) {
		t.Helper()
		r, err := d.c.Resolve(ctx, "tmp", path)
		if err != nil {
			t.Fatalf("%s: resolve %s: %v", step, path, err)
		}
		if got := r.Write.Rule; got != want {
			t.Errorf("%s: write %s: rule %q, want %q", step, path, got, want)
		}
		// The host view agrees (from another process).
		through := filepath.Join(d.mountBase, "@host", "tmp", path)
		res := run(t, commandf("echo x > %s && rm %s", through, through))
		if allowed := res.code == 0; allowed != r.Write.Allow {
			t.Errorf("%s: write %s through the host view: %+v, resolve says %+v", step, path, res, r.Write)
		}
	}
	check("create", filepath.Join(s.TmpDir, "f"), "temp:read-write")
	check("create", shared, "hostview:hidden")
	if _, err := d.c.SetPolicy(ctx, "tmp", api.Policy{Mode: api.ModeWorkspaceWrite}); err != nil {
		t.Fatal(err)
	}
	check("policy without temp", filepath.Join(s.TmpDir, "f"), "temp:read-write")
	check("policy without temp", shared, "hostview:hidden")
	if _, err := d.c.SetPolicy(ctx, "tmp", api.Policy{Mode: api.ModeWorkspaceWrite, Temp: []string{}}); err != nil {
		t.Fatal(err)
	}
	check("temp: []", filepath.Join(s.TmpDir, "f"), "hostview:hidden")
	if err := d.c.Remove(ctx, "tmp", false); err != nil {
		t.Fatal(err)
	}
}
