package mounts_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// TestJailViewGone: a view the jail needs that was unmounted from outside
// (its jail view, its host view) makes exec --confine refuse (126, one
// line naming the view), never fall back to the session mount (links
// rewritten) or to binding a read-write root straight from the backing
// store (no policy there).
func TestJailViewGone(t *testing.T) {
	needJail(t)
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, extra := filepath.Join(dir, "proj"), filepath.Join(dir, "extra")
	mkTree(t, proj, "f")
	mkTree(t, extra, "g")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "g", Root: proj, Policy: &api.Policy{
		Additional: []api.Root{{Path: extra, Access: api.AccessReadWrite}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "g", []string{"--confine"}, "sh", "-c", "echo ok > "+extra+"/h && cat "+extra+"/h"); r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("jail: %+v", r)
	}
	umount := func(p string) {
		if out, err := exec.Command("umount", p).CombinedOutput(); err != nil {
			t.Fatalf("umount %s: %v %s", p, err, out)
		}
	}
	jv := mounts.JailViewPath(d.mountBase, "g")
	umount(jv)
	r := d.exec(t, "g", []string{"--confine"}, "true")
	if want := "wsfs: exec --confine: the session's jail view " + jv + " is not mounted (links as stored); the jail shows " + s.Mountpoint + " only through it\n"; r.code != 126 || r.stderr != want {
		t.Fatalf("jail without its jail view: exit %d stderr %q, want 126 %q", r.code, r.stderr, want)
	}
	hv := filepath.Join(d.mountBase, "@host", "g")
	umount(hv)
	r = d.exec(t, "g", []string{"--confine"}, "true")
	if want := "wsfs: exec --confine: additional root " + extra + ": the session's host view " + hv + " is not mounted; the jail shows a root only through its view\n"; r.code != 126 || r.stderr != want {
		t.Fatalf("jail without its host view: exit %d stderr %q, want 126 %q", r.code, r.stderr, want)
	}
}
