package mounts_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestUnmountWhileDaemonDown: `wsfs unmount` of a session whose daemon was
// killed (its connection kept, nobody serving it) unmounts at once: it
// asks the mount nothing (it used to lstat the mountpoint, a GETATTR that
// waits, in D state, for the next daemon). The next daemon mounts the
// session again. Found by a new user's trial.
func TestUnmountWhileDaemonDown(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	mkTree(t, filepath.Join(dir, "p"), "f")
	s, err := d.c.Create(context.Background(), api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")})
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	d.waitExit(t)
	cmd := exec.Command(wsfsBin, "unmount", s.Mountpoint)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || out.String() != "unmounted "+s.Mountpoint+"\n" {
			t.Fatalf("wsfs unmount with no daemon: %v, stdout %q, stderr %q", err, out.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		// Release it: the next daemon answers what it waits on.
		startDaemonAt(t, dir, d.stateDir, d.mountBase)
		<-done
		t.Fatalf("wsfs unmount with no daemon waited on the mount (answered only by the next daemon)")
	}
	if slices.Contains(fuseMountsUnder(t, dir), s.Mountpoint) {
		t.Fatalf("%s still mounted after wsfs unmount", s.Mountpoint)
	}
	d2 := startDaemonAt(t, dir, d.stateDir, d.mountBase)
	if r := run(t, commandf("cat %s/f", s.Mountpoint)); r.code != 0 || r.stdout != "f" {
		t.Fatalf("cat f after the next start: %+v\n%s", r, d2.logText())
	}
}
