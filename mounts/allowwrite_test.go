package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestAllowWriteHidden: a directory written directly by a jail (session
// create --allow-write, exec --confine --allow-write) may neither lie in
// nor contain a place the session's host view hides: the daemon's state
// directory (session records), its own none root, another session's
// mountpoint, the mount base. Each is refused with the input and the rule.
func TestAllowWriteHidden(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"))
	ctx := context.Background()
	proj, secret, other, omp := filepath.Join(dir, "proj"), filepath.Join(dir, "secret"), filepath.Join(dir, "other"), filepath.Join(dir, "o", "mp")
	mkTree(t, proj, "f")
	mkTree(t, secret, "key")
	mkTree(t, other, "f")
	mkTree(t, filepath.Dir(omp), "x")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "o", Root: other, Mountpoint: omp}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s", Root: proj, Policy: &api.Policy{
		Additional: []api.Root{{Path: secret, Access: api.AccessNone}}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.stateDir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	hides := " which the session's host view hides (a jail may not write there)\n"
	own := "; a session may not reach the daemon's own files\n"
	for _, c := range []struct{ w, why string }{
		{filepath.Join(d.stateDir, "sessions"), " is inside the daemon's state directory " + d.stateDir + own},
		{d.stateDir, " is the daemon's state directory " + d.stateDir + own},
		{secret, ": lies in " + secret + "," + hides},
		{filepath.Dir(omp), ": contains " + omp + "," + hides},
		{d.mountBase, " is the daemon's mount base " + d.mountBase + own},
	} {
		r := d.wsfs(t, "session", "create", "c", "--root", proj, "--allow-write", c.w,
			"--add-root", secret+"=none")
		if want := `wsfs: session "c": --allow-write "` + c.w + `"` + c.why; r.code != 2 || r.stderr != want {
			t.Errorf("create --allow-write %s: exit %d stderr %q, want 2 %q", c.w, r.code, r.stderr, want)
		}
	}
	// exec --confine --allow-write: refused before the jail is built.
	for _, c := range []struct{ w, why string }{
		{filepath.Join(d.stateDir, "sessions"), "lies in " + d.stateDir},
		{secret, "lies in " + secret},
		{filepath.Dir(omp), "contains " + omp},
		{d.mountBase, "lies in " + d.mountBase},
		{dir, "contains " + d.stateDir},
	} {
		r := d.exec(t, "s", []string{"--confine", "--allow-write", c.w}, "true")
		if want := "wsfs: exec --confine: --allow-write " + c.w + ": " + c.why + ", which the jail hides (a jail may not write there)\n"; r.code != 1 || r.stderr != want {
			t.Errorf("exec --confine --allow-write %s: exit %d stderr %q, want 1 %q", c.w, r.code, r.stderr, want)
		}
	}
}
