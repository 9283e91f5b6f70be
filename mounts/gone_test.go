package mounts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// A session whose mount was unmounted from outside the daemon (wsfs
// unmount) is reported failed, refuses cwd, resolve and exec (the
// mountpoint shows the bare directory, which no policy guards: nothing may
// be written there in the session's name), and session rm still removes
// everything.
func TestOutsideUnmountFailsSession(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "p2root")
	mkTree(t, root, "f")
	if r := d.wsfs(t, "session", "create", "p2", "--root", root); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	mp := filepath.Join(d.mountBase, "p2")
	if r := d.wsfs(t, "unmount", mp); r.code != 0 {
		t.Fatalf("wsfs unmount %s: %d %s", mp, r.code, r.stderr)
	}
	why := "the mount at " + mp + " went away (unmounted from outside the daemon); session rm removes the session"
	r := d.wsfs(t, "session", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "p2  failed") {
		t.Fatalf("session list after the outside unmount: %d %q, want p2 failed", r.code, r.stdout)
	}
	r = d.wsfs(t, "--json", "session", "show", "p2")
	var s api.Session
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.State != api.StateFailed || s.Error != why {
		t.Fatalf("session show: %v %+v, want state failed, error %q", err, s, why)
	}
	r = d.exec(t, "p2", nil, "bash", "-c", "echo leak > leaked.txt")
	if want := `wsfs: session "p2": not mounted: ` + why + "\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("exec after the outside unmount: exit %d stderr %q, want 1 %q", r.code, r.stderr, want)
	}
	if _, err := os.Lstat(filepath.Join(mp, "leaked.txt")); !os.IsNotExist(err) {
		t.Fatalf("leaked.txt in the bare mountpoint: %v, want missing", err)
	}
	if r, want := d.wsfs(t, "session", "cwd", "p2"), `wsfs: session "p2": not mounted: `+why+"\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("session cwd: exit %d stderr %q, want 1 %q (one \"not mounted\")", r.code, r.stderr, want)
	}
	if r := d.wsfs(t, "session", "rm", "p2"); r.code != 0 {
		t.Fatalf("session rm: %d %s", r.code, r.stderr)
	}
	if got := entries(t, d.mountBase); len(got) != 0 {
		t.Fatalf("mount base after rm: %v, want empty", got)
	}
	if m := fuseMountsUnder(t, dir); len(m) != 0 {
		t.Fatalf("mounts after rm: %v", m)
	}
}
