package mounts_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestHostViewListsOnlyTheWay: in a session's host view, the daemon's state
// directory, its temp directory and the mount base are passages: each lists
// only the names on the way to what the session may see (its temp area, its
// mountpoint), never the lock, the records, the socket, the host views or
// another session's places, so `ls -la` there shows no d????????? and exits
// 0 (docs/api.md, "passage").
func TestHostViewListsOnlyTheWay(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for _, id := range []string{"s1", "s2"} {
		mkTree(t, filepath.Join(dir, "proj-"+id), "f")
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: filepath.Join(dir, "proj-"+id)}); err != nil {
			t.Fatal(err)
		}
	}
	s1, err := d.c.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	hv := filepath.Join(d.mountBase, "@host", "s1")
	want := map[string][]string{
		d.mountBase: {filepath.Base(s1.Mountpoint)},
	}
	// The temp area's ancestors below the state directory, each listing
	// only the next name on the way.
	if rel, err := filepath.Rel(d.stateDir, s1.TmpDir); err == nil && filepath.IsLocal(rel) {
		p := d.stateDir
		for _, name := range splitPath(rel) {
			want[p] = []string{name}
			p = filepath.Join(p, name)
		}
	} else {
		want[d.stateDir] = nil
	}
	for place, names := range want {
		if got := entries(t, hv+place); !reflect.DeepEqual(got, names) {
			t.Errorf("list %s in s1's host view: %v, want %v", place, got, names)
		}
		if out, err := exec.Command("ls", "-la", hv+place).CombinedOutput(); err != nil {
			t.Errorf("ls -la %s in s1's host view: %v\n%s", place, err, out)
		}
	}
}

func splitPath(rel string) []string {
	var out []string
	for rel != "." && rel != "" {
		out = append([]string{filepath.Base(rel)}, out...)
		rel = filepath.Dir(rel)
	}
	return out
}
