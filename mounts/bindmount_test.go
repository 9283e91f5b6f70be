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

// TestResolveNestedBindAsMount: `session resolve` gives the decision the
// mount gives below nested binds (attack finding F6): proj/x is a bind of
// the none root out2 holding a bind of the read-write root ok at x/y, so
// x/y/f is EACCES (root:none) for read and write, as cat and a write
// through the mount and the jail get, not ok's read-write; outside the
// root, a bind of out2 at else/w is EACCES as the host view answers, not
// the bare policy's outside:read-only. ok/f is unchanged.
func TestResolveNestedBindAsMount(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, out2, ok, els := filepath.Join(dir, "proj"), filepath.Join(dir, "out2"), filepath.Join(dir, "ok"), filepath.Join(dir, "else")
	mkTree(t, proj, "x/")
	mkTree(t, out2, "y/", "s")
	mkTree(t, ok, "f")
	mkTree(t, els, "w/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj, Policy: &api.Policy{
		Additional: []api.Root{{Path: out2, Access: api.AccessNone}, {Path: ok, Access: api.AccessReadWrite}}}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][2]string{{out2, filepath.Join(proj, "x")}, {ok, filepath.Join(proj, "x/y")}, {out2, filepath.Join(els, "w")}} {
		if err := unix.Mount(b[0], b[1], "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount %s on %s: %v", b[0], b[1], err)
		}
		t.Cleanup(func() { unix.Unmount(b[1], unix.MNT_DETACH) })
	}
	for _, p := range []string{"x/y/f", filepath.Join(els, "w/s")} {
		res, err := d.c.Resolve(ctx, "s1", p)
		if err != nil {
			t.Fatalf("resolve %s: %v", p, err)
		}
		for op, got := range map[string]api.Decision{"read": res.Read, "write": res.Write} {
			if got.Allow || got.Errno != "EACCES" || got.Rule != "root:none" {
				t.Errorf("resolve %s: %s %+v, want EACCES root:none", p, op, got)
			}
		}
	}
	hv := filepath.Join(d.mountBase, "@host", "s1")
	for _, script := range []string{"cat x/y/f", "echo PWN >> x/y/f", "cat " + hv + els + "/w/s"} {
		if r := d.exec(t, "s1", nil, "sh", "-c", script); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("exec %s: %+v, want Permission denied", script, r)
		}
	}
	if haveJail() {
		if r := d.exec(t, "s1", []string{"--confine"}, "sh", "-c", "echo PWN >> "+proj+"/x/y/f"); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("jail write to x/y/f: %+v, want Permission denied", r)
		}
	}
	if got := readFile(t, filepath.Join(ok, "f")); got != "f" {
		t.Errorf("ok/f = %q, want it unchanged", got)
	}
}
