package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// session resolve decides a write with the object's identity, as the
// mount does: a second name of a protected file (hl protected, sub/sec.txt
// linked to it) is EACCES "protected:hl" in the answer and through the
// mount, in an unlayered and in a layered session; an unprotected file and
// a new name stay writable. Before the fix resolve said write=allow for
// sub/sec.txt while the write through the mount was EACCES.
func TestResolveHardLinkOfProtected(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "hl", "sub/free")
	if err := os.Link(filepath.Join(root, "hl"), filepath.Join(root, "sub", "sec.txt")); err != nil {
		t.Fatal(err)
	}
	denied := api.Decision{Allow: false, Errno: "EACCES", Rule: "protected:hl"}
	allowed := api.Decision{Allow: true, Rule: "primary:read-write"}
	for _, layer := range []bool{false, true} {
		id := "FB"
		if layer {
			id = "FBL"
		}
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root, Layer: layer, Policy: &api.Policy{Protected: []string{"hl"}}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			path string
			want api.Decision
		}{
			{"sub/sec.txt", denied}, {"hl", denied}, {"sub/free", allowed}, {"sub/new", allowed},
		} {
			res, err := d.c.Resolve(ctx, id, c.path)
			if err != nil || res.Write != c.want {
				t.Errorf("%s: resolve %s: write %+v %v, want %+v", id, c.path, res.Write, err, c.want)
			}
		}
		if got, want := tryIn(t, d, id, "append", "sub/sec.txt", "append", "sub/free"), "append sub/sec.txt EACCES\nappend sub/free ok\n"; got != want {
			t.Errorf("%s through the mount:\n got %q\nwant %q", id, got, want)
		}
		mp := filepath.Join(d.mountBase, id)
		want := mp + "/sub/sec.txt\t" + filepath.Join(root, "sub/sec.txt") + "\twrite=EACCES (protected:hl)\n"
		if r := d.wsfs(t, "session", "resolve", id, "sub/sec.txt"); r.code != 0 || r.stdout != want {
			t.Errorf("%s: session resolve sub/sec.txt: %+v, want %q", id, r, want)
		}
	}
}
