package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestBindMountInRoot: a mount inside a session's root is decided at its
// source's host path, by the session mount, the jail view and `session
// resolve` alike (security review: `mount --bind out2 proj/work/bm` made
// the none root out2 readable and writable as part of the primary root,
// and a bind of the daemon's state directory let the session append to its
// own event log). A bind of a none root is EACCES, of a read-only root
// EROFS on write, of the state directory EACCES; a tmpfs mounted in the
// project has no other host path and stays writable; nothing changes at
// the sources.
func TestBindMountInRoot(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, out2, ro := filepath.Join(dir, "proj"), filepath.Join(dir, "out2"), filepath.Join(dir, "ro")
	mkTree(t, proj, "work/bm/", "work/bro/", "work/bst/", "work/tmp/")
	mkTree(t, out2, "f")
	mkTree(t, ro, "g")
	_, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj, Policy: &api.Policy{
		Additional: []api.Root{{Path: out2, Access: api.AccessNone}, {Path: ro, Access: api.AccessReadOnly}}}})
	if err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(proj, "work")
	for src, dst := range map[string]string{out2: "bm", ro: "bro", d.stateDir: "bst"} {
		if err := unix.Mount(src, filepath.Join(w, dst), "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount %s: %v", src, err)
		}
		t.Cleanup(func() { unix.Unmount(filepath.Join(w, dst), unix.MNT_DETACH) })
	}
	if err := unix.Mount("wsfs-bind-test", filepath.Join(w, "tmp"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(w, "tmp"), unix.MNT_DETACH) })
	events := filepath.Join(d.stateDir, "sessions", "s1.events")
	record := filepath.Join(d.stateDir, "sessions", "s1.json")
	eventsBefore, recordBefore := readFile(t, events), readFile(t, record)

	// resolve, before any access crossed the mounts.
	for _, c := range []struct{ path, allow, errno, rule string }{
		{"work/bm/f", "false", "EACCES", "root:none"},
		{"work/bro/g", "false", "EROFS", "additional:read-only"},
		{"work/bst/sessions/s1.events", "false", "EACCES", "hostview:hidden"},
		{"work/tmp/f", "true", "", "primary:read-write"},
	} {
		res, err := d.c.Resolve(ctx, "s1", c.path)
		if err != nil {
			t.Fatalf("resolve %s: %v", c.path, err)
		}
		if got := res.Write; (got.Allow && c.allow != "true") || (!got.Allow && c.allow != "false") || got.Errno != c.errno || got.Rule != c.rule {
			t.Errorf("resolve %s: write %+v, want allow %s errno %q rule %s", c.path, got, c.allow, c.errno, c.rule)
		}
	}

	for _, c := range []struct{ script, want string }{
		{"echo PWN > work/bm/f", "Permission denied"},
		{"cat work/bm/f", "Permission denied"},
		{"echo PWN > work/bro/g", "Read-only file system"},
		{"echo PWN >> work/bst/sessions/s1.events", "Permission denied"},
		{"echo '{}' > work/bst/sessions/s1.json", "Permission denied"},
	} {
		if r := d.exec(t, "s1", nil, "sh", "-c", c.script); r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("exec %s: %+v, want %q", c.script, r, c.want)
		}
	}
	if r := d.exec(t, "s1", nil, "sh", "-c", "cat work/bro/g; echo T > work/tmp/f && cat work/tmp/f"); r.code != 0 || r.stdout != "gT\n" {
		t.Errorf("exec read of the read-only bind and write in the tmpfs: %+v", r)
	}
	if haveJail() {
		// The same object has one answer inside the jail: refused both at
		// out2's own path and at the bind's.
		r := d.exec(t, "s1", []string{"--confine"}, "sh", "-c", "echo PWN > "+w+"/bm/f")
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("jail write to the bind of the none root: %+v, want Permission denied", r)
		}
		if r := d.exec(t, "s1", []string{"--confine"}, "sh", "-c", "echo PWN > "+out2+"/f"); r.code == 0 {
			t.Errorf("jail write to the none root: %+v, want refused", r)
		}
		r = d.exec(t, "s1", []string{"--confine"}, "sh", "-c", "echo PWN >> "+w+"/bst/sessions/s1.events")
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("jail append to the bound event log: %+v, want Permission denied", r)
		}
		if r := d.exec(t, "s1", []string{"--confine"}, "sh", "-c", "echo J > "+w+"/tmp/j && cat "+w+"/tmp/j"); r.code != 0 || r.stdout != "J\n" {
			t.Errorf("jail write in the tmpfs: %+v", r)
		}
	}
	if got := readFile(t, filepath.Join(out2, "f")); got != "f" {
		t.Errorf("out2/f = %q, want it unchanged", got)
	}
	if got := readFile(t, filepath.Join(ro, "g")); got != "g" {
		t.Errorf("ro/g = %q, want it unchanged", got)
	}
	if got := readFile(t, record); got != recordBefore {
		t.Errorf("s1.json changed:\n%s\nwas\n%s", got, recordBefore)
	}
	if got := readFile(t, events); !strings.HasPrefix(got, eventsBefore) || strings.Contains(got, "PWN") {
		t.Errorf("s1.events = %q, want no PWN", got)
	}
	if _, err := os.Stat(filepath.Join(out2, "PWN")); !os.IsNotExist(err) {
		t.Errorf("out2/PWN: %v", err)
	}
}
