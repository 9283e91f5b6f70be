package mounts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
)

// outsideDaemonDir is newDaemonDir outside /tmp: the host view hides /tmp
// (but the session's temp area, DESIGN.md "Host view"), and the
// directories next to the root must be visible there.
func outsideDaemonDir(t *testing.T) string {
	t.Helper()
	newDaemonDir(t) // skips without root or /dev/fuse
	dir, err := os.MkdirTemp("/var/tmp", "wsfs-cwd-test-")
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the daemon's cleanup, so it runs after it.
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestCwdOutsideRoots: the working directory may go wherever the session
// may read (issue 9 item 2; seeds' ADR-0012: a cwd is not a write grant).
// `cd ../out` and an absolute host path outside the roots succeed; `exec
// pwd` prints the directory through the host view (inside the jail, its own
// path); a write there is EROFS, logged with rule and pid; `cd` back into
// the project works; the session's temp directory and a read-write
// additional root are working directories whose writes the policy allows;
// a none root, a place the host view hides (/tmp, the daemon's host views
// and records) and a missing directory inside a hidden place are EACCES; a
// restarted daemon keeps it; the directory vanishing, or becoming a none
// root, recovers to the origin.
func TestCwdOutsideRoots(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, out, secret := filepath.Join(dir, "proj"), filepath.Join(dir, "out"), filepath.Join(dir, "secret")
	extra := filepath.Join(dir, "extra")
	mkTree(t, extra, "wt/")
	mkTree(t, proj, "src/", "file")
	mkTree(t, out, "sub/", "data")
	mkTree(t, secret, "key")
	mp := filepath.Join(dir, "work") // next to the project: ../out from the mount root is dir/out
	_, err := d.c.Create(ctx, api.CreateRequest{ID: "cw", Root: proj, Mountpoint: mp, Policy: &api.Policy{
		Additional: []api.Root{{Path: secret, Access: api.AccessNone}, {Path: extra, Access: api.AccessReadWrite}}}})
	if err != nil {
		t.Fatal(err)
	}
	hv := filepath.Join(d.mountBase, "@host", "cw")
	// The none root bound elsewhere: the host view refuses it there too.
	bind := filepath.Join(dir, "bind")
	mkTree(t, dir, "bind/")
	if err := syscall.Mount(secret, bind, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(bind, syscall.MNT_DETACH) })

	// Out of the root: shown through the host view, logged as a cd.
	wd, err := d.c.Chdir(ctx, "cw", "../out")
	if err != nil {
		t.Fatalf("cd ../out: %v", err)
	}
	if wd.Path != hv+out || wd.Physical != out || !wd.Changed || len(wd.Events) != 1 ||
		wd.Events[0].Type != "cd" || wd.Events[0].From != mp || wd.Events[0].To != hv+out {
		t.Fatalf("cd ../out: %+v, want path %s physical %s and one cd event from %s", wd, hv+out, out, mp)
	}
	if got, err := d.c.Get(ctx, "cw"); err != nil || got.Cwd != hv+out || got.CwdPhysical != out {
		t.Fatalf("session after cd ../out: cwd %q physical %q (%v), want %s, %s", got.Cwd, got.CwdPhysical, err, hv+out, out)
	}
	// Relative to it, and by the absolute host path.
	if wd, err = d.c.Chdir(ctx, "cw", "sub"); err != nil || wd.Path != hv+out+"/sub" || wd.Physical != out+"/sub" {
		t.Fatalf("cd sub (from %s): %+v %v", out, wd, err)
	}
	if wd, err = d.c.Chdir(ctx, "cw", out); err != nil || wd.Path != hv+out || !wd.Changed {
		t.Fatalf("cd %s: %+v %v", out, wd, err)
	}
	if r := d.wsfs(t, "session", "cwd", "cw"); r.code != 0 || r.stdout != hv+out+"\t"+out+"\n" {
		t.Fatalf("session cwd: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}

	// A process started there sees it through FUSE; the policy decides
	// its writes (workspace-write: outside the roots read-only).
	if r := d.exec(t, "cw", nil, "pwd"); r.code != 0 || r.stdout != hv+out+"\n" {
		t.Fatalf("exec pwd: %+v, want %s", r, hv+out)
	}
	if r := d.exec(t, "cw", nil, "cat", "data"); r.code != 0 || r.stdout != "data" {
		t.Fatalf("exec cat data: %+v", r)
	}
	r := d.exec(t, "cw", nil, "sh", "-c", `echo $$; echo x > new`)
	if r.code == 0 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Fatalf("write outside the roots: %+v, want EROFS", r)
	}
	if _, err := os.Lstat(filepath.Join(out, "new")); !os.IsNotExist(err) {
		t.Fatalf("out/new exists after a refused write (%v)", err)
	}
	waitDenial(t, d, "cw", strings.TrimSpace(r.stdout), out+"/new", "outside:read-only")
	// The host view's denials are the session's in the metrics.
	wantDenials := func(n int) {
		t.Helper()
		line := fmt.Sprintf("\nwsfs_policy_denials_total{session=\"cw\",rule=\"outside:read-only\"} %d\n", n)
		if text, err := d.c.Metrics(ctx); err != nil || !strings.Contains(text, line) {
			t.Errorf("metrics (%v) lack %q:\n%s", err, line[1:], text)
		}
	}
	wantDenials(1)

	// Inside the jail the directory is at its own path, through FUSE.
	if haveJail() {
		r := d.exec(t, "cw", []string{"--confine"}, "sh", "-c", `pwd; stat -f -c %T .; cat data; echo; echo x > new2`)
		lines := strings.Split(r.stdout, "\n")
		if r.code == 0 || len(lines) < 4 || lines[0] != out || lines[1] != "fuseblk" && lines[1] != "fuse" || lines[2] != "data" ||
			!strings.Contains(r.stderr, "Read-only file system") {
			t.Fatalf("jail in %s: %+v, want pwd %s on FUSE, data readable, write EROFS", out, r, out)
		}
		if _, err := os.Lstat(filepath.Join(out, "new2")); !os.IsNotExist(err) {
			t.Fatalf("out/new2 exists after a refused write in the jail (%v)", err)
		}
		waitDenial(t, d, "cw", "", out+"/new2", "outside:read-only")
		wantDenials(2) // the jail host view's too

		// The session's temp directory, outside the root and writable by
		// the policy: a working directory there writes, in the jail too.
		sess, err := d.c.Get(ctx, "cw")
		if err != nil {
			t.Fatal(err)
		}
		if wd, err := d.c.Chdir(ctx, "cw", sess.TmpDir); err != nil || wd.Path != hv+sess.TmpDir {
			t.Fatalf("cd %s: %+v %v", sess.TmpDir, wd, err)
		}
		if r := d.exec(t, "cw", []string{"--confine"}, "sh", "-c", `pwd; echo t > t && cat t`); r.code != 0 || r.stdout != sess.TmpDir+"\nt\n" {
			t.Fatalf("jail in the temp directory: %+v", r)
		}
		if got := readFile(t, sess.TmpDir+"/t"); got != "t\n" {
			t.Fatalf("temp/t = %q", got)
		}
		if _, err := d.c.Chdir(ctx, "cw", out); err != nil {
			t.Fatal(err)
		}
	}

	// Refused: a none root, places the host view hides; a missing directory
	// in a hidden place is refused before it is found missing.
	for _, tc := range []struct{ path, rule string }{
		{secret, "root:none"},
		{"../secret", "root:none"},
		{bind, "hostview:mount-source"},
		{"/tmp", "hostview:hidden"},
		{d.mountBase + "/@host", "hostview:hidden"},
		{d.stateDir + "/sessions", "hostview:hidden"}, // the records and event logs
		{"/tmp/wsfs-no-such-dir", "hostview:hidden"},
	} {
		_, err := d.c.Chdir(ctx, "cw", tc.path)
		wantErrno(t, "cd "+tc.path, err, syscall.EACCES)
		if err != nil && !strings.Contains(err.Error(), "(rule "+tc.rule+")") {
			t.Errorf("cd %s: %v, want rule %s", tc.path, err, tc.rule)
		}
	}
	_, err = d.c.Chdir(ctx, "cw", "nowhere")
	wantErrno(t, "cd nowhere", err, syscall.ENOENT)

	// A directory in a read-write additional root (a linked worktree, say):
	// shown through the host view too, and there the policy allows writes.
	if wd, err = d.c.Chdir(ctx, "cw", extra+"/wt"); err != nil || wd.Path != hv+extra+"/wt" {
		t.Fatalf("cd %s/wt: %+v %v", extra, wd, err)
	}
	if r := d.exec(t, "cw", nil, "sh", "-c", `echo w > f && cat f`); r.code != 0 || r.stdout != "w\n" {
		t.Fatalf("write in the read-write root: %+v", r)
	}
	if haveJail() {
		if r := d.exec(t, "cw", []string{"--confine"}, "sh", "-c", `pwd; echo j > g && cat g`); r.code != 0 || r.stdout != extra+"/wt\nj\n" {
			t.Fatalf("jail in the read-write root: %+v", r)
		}
	}

	// Back into the project, by the mount path and by the host path.
	if wd, err = d.c.Chdir(ctx, "cw", mp+"/src"); err != nil || wd.Path != mp+"/src" || wd.Physical != proj+"/src" ||
		len(wd.Events) != 1 || wd.Events[0].From != hv+extra+"/wt" || wd.Events[0].To != mp+"/src" {
		t.Fatalf("cd back into the project: %+v %v", wd, err)
	}
	if r := d.exec(t, "cw", nil, "pwd"); r.code != 0 || r.stdout != mp+"/src\n" {
		t.Fatalf("exec pwd in the project: %+v", r)
	}
	if _, err = d.c.Chdir(ctx, "cw", proj+"/../out/sub"); err != nil {
		t.Fatal(err)
	}

	// A restarted daemon keeps it (from the event log).
	d.stop()
	d = startDaemon(t, dir)
	if wd, err = d.c.Cwd(ctx, "cw"); err != nil || wd.Path != hv+out+"/sub" || wd.Physical != out+"/sub" || wd.Changed {
		t.Fatalf("cwd after a restart: %+v %v, want %s", wd, err, hv+out+"/sub")
	}

	// It vanishes on the host: the next read recovers to the origin.
	if err := os.Remove(out + "/sub"); err != nil {
		t.Fatal(err)
	}
	wd, err = d.c.Cwd(ctx, "cw")
	if err != nil || wd.Path != mp || wd.Physical != proj || !wd.Changed || len(wd.Events) != 1 {
		t.Fatalf("cwd after the host removed it: %+v %v, want recovered to %s", wd, err, mp)
	}
	if ev := wd.Events[0]; ev.Type != "recover" || ev.From != hv+out+"/sub" || ev.To != mp || ev.Reason != out+"/sub no longer exists" {
		t.Fatalf("recover event: %+v", ev)
	}

	// Narrowed so that it may no longer read it: recovers too.
	if _, err = d.c.Chdir(ctx, "cw", out); err != nil {
		t.Fatal(err)
	}
	if r := d.wsfs(t, "session", "policy", "cw", "--add-root", out+"=none"); r.code != 0 {
		t.Fatalf("session policy --add-root %s=none: %+v", out, r)
	}
	if wd, err = d.c.Cwd(ctx, "cw"); err != nil || wd.Path != mp || len(wd.Events) != 1 || !strings.Contains(wd.Events[0].Reason, "rule root:none") {
		t.Fatalf("cwd after its directory became a none root: %+v %v", wd, err)
	}
}

// waitDenial waits (bounded) for the daemon's log line of an EROFS denial
// of session id at path with rule (by process pid, when not "").
func waitDenial(t *testing.T, d *daemon, id, pid, path, rule string) {
	t.Helper()
	found := func() bool {
		for _, l := range strings.Split(d.logText(), "\n") {
			if strings.Contains(l, "msg=denied") && strings.Contains(l, "session="+id+" ") &&
				strings.Contains(l, "rule="+rule+" ") && strings.Contains(l, "errno=EROFS") &&
				(pid == "" || strings.Contains(l, "pid="+pid+" ") || strings.HasSuffix(l, "pid="+pid)) &&
				strings.Contains(l, "path="+path) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(60 * time.Second); !found() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !found() {
		t.Errorf("no logged EROFS denial of %s (pid %q) at %s with rule %s; log:\n%s", id, pid, path, rule, d.logText())
	}
}

// TestCwdReplacedBySymlink: a working directory outside the roots whose
// path the host (or the session itself, through its host view in
// full-access) replaced by a symlink is not handed on under its old name:
// the next read recovers to the origin, logged, whether the link leads to
// another session's mountpoint (through a second link: the walk refuses
// it, EACCES) or to another readable directory (a cwd changes only by cd).
func TestCwdReplacedBySymlink(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj, out, victim, vmp := filepath.Join(dir, "proj"), filepath.Join(dir, "out"), filepath.Join(dir, "victim"), filepath.Join(dir, "vmp")
	mkTree(t, proj, "file")
	mkTree(t, out, "d/", "e/")
	mkTree(t, victim, "secret")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "v", Root: victim, Mountpoint: vmp}); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "work")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "a", Root: proj, Mountpoint: mp, Policy: &api.Policy{Mode: api.ModeFullAccess}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ link, reason string }{
		{filepath.Join(dir, "nr") + vmp, out + "/d: permission denied"},
		{out + "/e", out + "/d now resolves to " + out + "/e (a symlink in its path)"},
	} {
		if _, err := d.c.Chdir(ctx, "a", out+"/d"); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "nr"))
		if err := os.Symlink("/", filepath.Join(dir, "nr")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(out+"/d", out+"/d.old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(c.link, out+"/d"); err != nil {
			t.Fatal(err)
		}
		wd, err := d.c.Cwd(ctx, "a")
		if err != nil || wd.Path != mp || wd.Physical != proj || !wd.Changed || len(wd.Events) != 1 {
			t.Fatalf("cwd after %s/d became a link to %s: %+v %v, want recovered to %s", out, c.link, wd, err, mp)
		}
		if ev := wd.Events[0]; ev.Type != "recover" || ev.To != mp || ev.Reason != c.reason {
			t.Fatalf("recover event: %+v, want reason %q", ev, c.reason)
		}
		if r := d.exec(t, "a", nil, "pwd"); r.code != 0 || r.stdout != mp+"\n" {
			t.Fatalf("exec pwd: %+v", r)
		}
		os.Remove(out + "/d")
		if err := os.Rename(out+"/d.old", out+"/d"); err != nil {
			t.Fatal(err)
		}
	}
}
