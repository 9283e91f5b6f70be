package mounts_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestLaterSessionHidden: the places sessions hide from each other are one
// daemon-wide index (issue 22). A session created after s1 is hidden in
// s1's host view as soon as its create returns — its root EACCES
// ("hostview:hidden"), even a file there the view served just before (the
// kernel's entry dropped), and left out of the listing of its parent — and
// shown again, with its content, as soon as its remove returns; s2's own
// view hides s1 from the start.
func TestLaterSessionHidden(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, filepath.Join(dir, "proj-s1"), "f")
	mkTree(t, filepath.Join(dir, "proj-s2"), "g")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: filepath.Join(dir, "proj-s1")}); err != nil {
		t.Fatal(err)
	}
	hv1 := filepath.Join(d.mountBase, "@host", "s1")
	g := hv1 + filepath.Join(dir, "proj-s2", "g")
	visible := func(when string) {
		t.Helper()
		if got, err := os.ReadFile(g); err != nil || string(got) != "g" {
			t.Errorf("%s: read %s in s1's host view: %q, %v; want \"g\"", when, g, got, err)
		}
		if got, want := entries(t, hv1+dir), []string{"mnt", "proj-s1", "proj-s2", "state"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: list %s in s1's host view: %v, want %v", when, hv1+dir, got, want)
		}
	}
	visible("before s2 exists")

	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s2", Root: filepath.Join(dir, "proj-s2")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{g, filepath.Dir(g)} {
		if _, err := os.Stat(p); !errors.Is(err, syscall.EACCES) {
			t.Errorf("after s2 is created: stat %s in s1's host view: %v, want EACCES", p, err)
		}
	}
	if _, err := os.ReadFile(g); !errors.Is(err, syscall.EACCES) {
		t.Errorf("after s2 is created: read %s in s1's host view: %v, want EACCES", g, err)
	}
	if got, want := entries(t, hv1+dir), []string{"mnt", "proj-s1", "state"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after s2 is created: list %s in s1's host view: %v, want %v", hv1+dir, got, want)
	}
	f := filepath.Join(d.mountBase, "@host", "s2") + filepath.Join(dir, "proj-s1", "f")
	if _, err := os.Stat(f); !errors.Is(err, syscall.EACCES) {
		t.Errorf("stat %s in s2's host view: %v, want EACCES", f, err)
	}
	if err := d.c.Remove(ctx, "s2", false); err != nil {
		t.Fatal(err)
	}
	visible("after s2 is removed")
}
