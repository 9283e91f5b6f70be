package mounts

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wsfs/wsfs/mounts/client"
)

// TestListWhileCreateMounts: no daemon-wide lock is held across a mount
// (issue 22). While one create is stopped between its host view's mount
// and its root's (mountHook), GET /v1/sessions answers 200 with the
// sessions already made (not the one in progress), and another create runs
// to the end; once released, the first finishes and all three are listed.
func TestListWhileCreateMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount(2) for FUSE)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
	dir := t.TempDir()
	m, err := New(Config{StateDir: filepath.Join(dir, "state"), MountBase: filepath.Join(dir, "mnt"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	socket := filepath.Join(dir, "wsfs.sock")
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- NewAPI(m, m.log).Serve(ctx, l) }()
	c := client.New(socket)
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	finished := false // b's create returned and done was read
	t.Cleanup(func() {
		// Before the temp directory goes: nothing mounted under it.
		select {
		case <-entered:
			if !finished {
				close(release)
				<-done
			}
		default:
		}
		mountHook = nil
		c.Close()
		cancel()
		<-served
		for _, id := range []string{"a", "b", "c"} {
			m.Remove(context.Background(), id, true)
		}
		m.Close(context.Background())
	})
	create := func(id string) error {
		root := filepath.Join(dir, "root-"+id)
		if err := os.Mkdir(root, 0o755); err != nil {
			return err
		}
		_, err := m.Create(context.Background(), Spec{ID: id, Root: root})
		return err
	}
	list := func() []string {
		t.Helper()
		got, err := c.List(ctx)
		if err != nil {
			t.Fatalf("session list: %v", err)
		}
		ids := []string{}
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		return ids
	}
	if err := create("a"); err != nil {
		t.Fatal(err)
	}
	mountHook = func(id string) {
		if id == "b" {
			close(entered)
			<-release
		}
	}
	go func() { done <- create("b") }()
	<-entered
	if got := list(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("list while b mounts: %v, want [a]", got)
	}
	if err := create("c"); err != nil {
		t.Errorf("create c while b mounts: %v", err)
	}
	if got := list(); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("list while b mounts, after c: %v, want [a c]", got)
	}
	release <- struct{}{}
	err = <-done
	finished = true
	if err != nil {
		t.Fatalf("create b: %v", err)
	}
	if got := list(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("list after b: %v, want [a b c]", got)
	}
}
