package mounts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// Two sessions on two roots in one daemon: a shell write via `wsfs exec`
// lands in each session's own root, and the API resolves the same relative
// path to the file the shell wrote.
func TestTwoSessionsTwoRoots(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	roots := map[string]string{"one": filepath.Join(dir, "r1"), "two": filepath.Join(dir, "r2")}
	for id, root := range roots {
		mkTree(t, root, "sub/")
		s, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root})
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		if want := filepath.Join(d.mountBase, id); s.Mountpoint != want || s.Root != root || s.Cwd != want || s.State != mounts.StateMounted {
			t.Fatalf("create %s: got %+v, want mountpoint and cwd %s, root %s, mounted", id, s, want, root)
		}
		if _, err := d.c.Chdir(ctx, id, "sub"); err != nil {
			t.Fatal(err)
		}
	}
	for id, root := range roots {
		r := d.exec(t, id, nil, "bash", "-c", "echo "+id+" > f && pwd")
		mp := filepath.Join(d.mountBase, id)
		if r.code != 0 || r.stdout != mp+"/sub\n" {
			t.Fatalf("exec %s: exit %d, stdout %q, stderr %q; want 0 and %q", id, r.code, r.stdout, r.stderr, mp+"/sub\n")
		}
		if got := readFile(t, filepath.Join(root, "sub", "f")); got != id+"\n" {
			t.Fatalf("%s: root file has %q, want %q", id, got, id+"\n")
		}
		res, err := d.c.Resolve(ctx, id, "f")
		if err != nil {
			t.Fatal(err)
		}
		want := api.Resolution{
			Session: id, Path: "f", Cwd: mp + "/sub", Display: mp + "/sub/f",
			Key: filepath.Join(root, "sub", "f"), MountPath: mp + "/sub/f",
			Read:  api.Decision{Allow: true, Rule: "primary:read-write"},
			Write: api.Decision{Allow: true, Rule: "primary:read-write"},
		}
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("resolve %s f:\n got %+v\nwant %+v", id, res, want)
		}
	}
	list, err := d.c.List(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "one" || list[1].ID != "two" {
		t.Fatalf("list: %v %+v, want one and two", err, list)
	}
	for id := range roots {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, d.mountBase); len(got) != 0 {
		t.Fatalf("mount base after remove: %v, want empty", got)
	}
	if got := entries(t, filepath.Join(d.stateDir, "sessions")); len(got) != 0 {
		t.Fatalf("records after remove: %v, want none", got)
	}
}

// An origin spelled .../link/.. mounts the physical parent of link's target,
// and `wsfs session resolve ../x` from a directory reached through a symlink
// agrees with `cat ../x` there in the mount (physical, not lexical, "..").
func TestLinkDotDotOriginAndSymlinkedCwd(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	w := filepath.Join(dir, "w")
	mkTree(t, w, "t/d/", "t/x", "t/p/x", "t/p/sl -> ../d", "link -> t/d", "x")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "dd", Root: w + "/link/.."})
	if err != nil {
		t.Fatal(err)
	}
	if s.Root != w+"/t" || s.Origin != w+"/link/.." {
		t.Fatalf("root %q origin %q, want %q and %q", s.Root, s.Origin, w+"/t", w+"/link/..")
	}
	mp := s.Mountpoint
	wd, err := d.c.Chdir(ctx, "dd", "p/sl")
	if err != nil {
		t.Fatal(err)
	}
	if wd.Path != mp+"/d" || wd.Physical != w+"/t/d" {
		t.Fatalf("cd p/sl: %+v, want path %s physical %s", wd, mp+"/d", w+"/t/d")
	}
	r := d.wsfs(t, "session", "resolve", "dd", "../x")
	if want := mp + "/x\t" + w + "/t/x\twrite=allow (primary:read-write)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("session resolve: exit %d stdout %q stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	// The shell in the session's directory, and a shell that cd's through
	// the symlink itself, both read the physical ../x ("t/x"), not the
	// lexical one ("t/p/x").
	for _, script := range []string{"cat ../x", "cd " + mp + "/p/sl && cat ../x"} {
		r = d.exec(t, "dd", nil, "bash", "-c", script)
		if r.code != 0 || r.stdout != "t/x" {
			t.Fatalf("exec %q: exit %d stdout %q stderr %q, want t/x", script, r.code, r.stdout, r.stderr)
		}
	}
	if err := d.c.Remove(ctx, "dd", false); err != nil {
		t.Fatal(err)
	}
}

// The working directory: change, no-op change, refused changes, recovery
// after the host removes it, a vanished origin, and a child session that
// inherits its parent's directory.
func TestWorkingDirectory(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "a/b/", "file")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "wd", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	mp := s.Mountpoint

	wd, err := d.c.Chdir(ctx, "wd", "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if wd.Path != mp+"/a/b" || wd.Physical != root+"/a/b" || !wd.Changed || len(wd.Events) != 1 || wd.Events[0].Type != "cd" || wd.Events[0].From != mp || wd.Events[0].To != mp+"/a/b" || wd.Events[0].Seq != 1 {
		t.Fatalf("cd a/b: %+v", wd)
	}
	for _, p := range []string{".", mp + "/a/b", root + "/a/b", "../b"} {
		wd, err = d.c.Chdir(ctx, "wd", p)
		if err != nil || wd.Changed || len(wd.Events) != 0 || wd.Path != mp+"/a/b" {
			t.Fatalf("no-op cd %q: %+v, %v; want unchanged, no event", p, wd, err)
		}
	}
	for p, msg := range map[string]string{
		"../../file": `session "wd": cd "../../file": not a directory (` + mp + `/file)`,
		"missing":    `session "wd": cd "missing": no such directory (` + mp + `/a/b/missing)`,
		// Outside the root: wherever the session may read (TestCwdOutsideRoots),
		// not where its host view hides.
		"/proc": `session "wd": cd "/proc": permission denied: the session may not read /proc (rule hostview:hidden)`,
	} {
		_, err := d.c.Chdir(ctx, "wd", p)
		wantCode(t, "cd "+p, err, mounts.CodeInvalid)
		if err.Error() != msg {
			t.Fatalf("cd %q: message %q, want %q", p, err.Error(), msg)
		}
	}
	events, err := d.c.Events(ctx, "wd")
	if err != nil || len(events) != 1 {
		t.Fatalf("events after refused changes: %+v %v, want the one cd", events, err)
	}

	// A child session inherits the parent's directory.
	child, err := d.c.Create(ctx, api.CreateRequest{ID: "wd-child", Root: root, Parent: "wd"})
	if err != nil {
		t.Fatal(err)
	}
	if want := child.Mountpoint + "/a/b"; child.Cwd != want || child.CwdPhysical != root+"/a/b" || child.Parent != "wd" {
		t.Fatalf("child: cwd %q physical %q parent %q, want %q", child.Cwd, child.CwdPhysical, child.Parent, want)
	}
	explicit, err := d.c.Create(ctx, api.CreateRequest{ID: "wd-explicit", Root: root, Cwd: "a"})
	if err != nil || explicit.Cwd != explicit.Mountpoint+"/a" {
		t.Fatalf("explicit cwd: %+v %v", explicit, err)
	}
	for _, id := range []string{"wd-child", "wd-explicit"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}

	// The host removes the directory: the next read recovers to the origin.
	if err := os.RemoveAll(root + "/a"); err != nil {
		t.Fatal(err)
	}
	wd, err = d.c.Cwd(ctx, "wd")
	if err != nil {
		t.Fatal(err)
	}
	if wd.Path != mp || wd.Physical != root || !wd.Changed || len(wd.Events) != 1 {
		t.Fatalf("cwd after host rm: %+v, want recovered to %s", wd, mp)
	}
	ev := wd.Events[0]
	if ev.Seq != 2 || ev.Type != "recover" || ev.From != mp+"/a/b" || ev.To != mp || ev.Reason != root+"/a/b no longer exists" {
		t.Fatalf("recover event: %+v", ev)
	}
	r := d.wsfs(t, "session", "events", "wd", "--json")
	var el api.EventList
	if err := json.Unmarshal([]byte(r.stdout), &el); err != nil || r.code != 0 || len(el.Events) != 2 || el.Events[1].Type != "recover" {
		t.Fatalf("session events: exit %d %q: %+v %v", r.code, r.stdout, el, err)
	}
	if r := d.wsfs(t, "session", "cwd", "wd"); r.code != 0 || r.stdout != mp+"\t"+root+"\n" {
		t.Fatalf("session cwd: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	// The origin is gone too: a clear error.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Cwd(ctx, "wd")
	wantCode(t, "cwd without origin", err, mounts.CodeOriginGone)
	if want := `session "wd": origin ` + root + ` (physical ` + root + `) no longer exists; the working directory cannot be recovered`; err.Error() != want {
		t.Fatalf("cwd without origin: %q, want %q", err.Error(), want)
	}
	r = d.wsfs(t, "session", "cwd", "wd", "--json")
	if r.code != 1 || !strings.Contains(r.stdout, `"code":"origin_gone"`) {
		t.Fatalf("session cwd without origin: exit %d stdout %q", r.code, r.stdout)
	}
	if err := d.c.Remove(ctx, "wd", false); err != nil {
		t.Fatal(err)
	}
}

// --confine: writes outside the session's root and the temp directory fail
// with EROFS (the jail's read-only host); the root's physical path is the
// mount in the jail, so a write there is the policy's to decide (allowed
// here, and made through FUSE); writes in TMPDIR work.
func TestExecConfine(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "cf", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "outside-of-session")
	for _, tc := range []struct{ path, want string }{
		{outside, "EROFS"},
		{filepath.Join(root, "sub", "physical"), "ok"},
		{"in-mount", "ok"},
		{filepath.Join(s.TmpDir, "tmpfile"), "ok"},
	} {
		cmd := exec.Command(wsfsBin, "exec", "--session", "cf", "--confine", "--env", helperEnv, "--", self, tc.path)
		cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, helperEnv+"=write")
		r := run(t, cmd)
		if r.code != 0 || r.stdout != tc.want+"\n" {
			t.Fatalf("confined write %s: exit %d stdout %q stderr %q, want %s", tc.path, r.code, r.stdout, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("%s exists after a refused write: %v", outside, err)
	}
	for _, p := range []string{"in-mount", "sub/physical"} {
		if got := readFile(t, filepath.Join(root, p)); got != "x\n" {
			t.Fatalf("%s write: %q", p, got)
		}
	}
	// The environment of the command.
	r := d.exec(t, "cf", []string{"--confine"}, "bash", "-c", `echo "$WSFS_SESSION $WSFS_ROOT $TMPDIR"; echo x > /tmp/wsfs-test-outside-$$ 2>/dev/null || echo denied`)
	if want := "cf " + s.Root + " " + s.TmpDir + "\ndenied\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("confined env: exit %d stdout %q stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	// Unconfined, the same write outside works (so the refusal is the jail's).
	cmd := exec.Command(wsfsBin, "exec", "--session", "cf", "--", self, outside)
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, helperEnv+"=write")
	if r := run(t, cmd); r.stdout != "ok\n" {
		t.Fatalf("unconfined write: %+v", r)
	}
	if r := d.wsfs(t, "exec", "--session", "cf", "--confine=bogus", "--", "true"); r.code != 2 {
		t.Fatalf("--confine=bogus: exit %d, want 2: %q", r.code, r.stderr)
	}
	if err := d.c.Remove(ctx, "cf", false); err != nil {
		t.Fatal(err)
	}
}

// Policy: a live change is seen by the next write, a policy that does not
// compile is refused and the old one stays; denials are counted by rule in
// /v1/metrics.
func TestPolicyLiveAndMetrics(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, ".git/hooks/", "sub/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "pl", Root: root}); err != nil {
		t.Fatal(err)
	}
	r := d.exec(t, "pl", nil, "bash", "-c", "echo x > .git/hooks/pre-commit")
	if r.code != 1 || !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("write to a protected hook: exit %d stderr %q, want EACCES", r.code, r.stderr)
	}
	s, err := d.c.SetPolicy(ctx, "pl", api.Policy{Mode: api.ModeReadOnly})
	if err != nil || s.Mode != api.ModeReadOnly || s.Policy.Primary != root {
		t.Fatalf("set read-only: %+v %v", s, err)
	}
	r = d.exec(t, "pl", nil, "bash", "-c", "echo x > f")
	if r.code != 1 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Fatalf("write after read-only: exit %d stderr %q, want EROFS", r.code, r.stderr)
	}
	_, err = d.c.SetPolicy(ctx, "pl", api.Policy{Additional: []api.Root{{Path: root + "/sub", Access: api.AccessReadWrite}}})
	wantCode(t, "overlapping policy", err, mounts.CodeInvalid)
	if s, err := d.c.Get(ctx, "pl"); err != nil || s.Mode != api.ModeReadOnly {
		t.Fatalf("after refused policy: %+v %v, want read-only still", s, err)
	}
	rec := readFile(t, filepath.Join(d.stateDir, "sessions", "pl.json"))
	if !strings.Contains(rec, `"mode": "read-only"`) {
		t.Fatalf("record after refused policy: %s", rec)
	}

	var h api.Health
	if h, err = d.c.Health(ctx); err != nil || h != (api.Health{Status: "ok", Sessions: 1, StateDir: canon(t, d.stateDir), MountBase: canon(t, d.mountBase)}) {
		t.Fatalf("healthz: %+v %v", h, err)
	}
	text, err := d.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`wsfs_sessions{state="mounted"} 1`,
		`wsfs_sessions{state="failed"} 0`,
		`wsfs_policy_denials_total{session="pl",rule="protected:git:.git/hooks"} 1`,
		`wsfs_policy_denials_total{session="pl",rule="primary:read-only"} 1`,
		`wsfs_api_requests_total{route="/v1/sessions/{id}/policy",method="PUT",code="200"} 1`,
		`wsfs_api_requests_total{route="/v1/sessions/{id}/policy",method="PUT",code="400"} 1`,
		`wsfs_api_request_duration_seconds_count{route="/v1/sessions/{id}/policy"} 2`,
		`wsfs_api_request_duration_seconds_bucket{route="/v1/sessions/{id}/policy",le="+Inf"} 2`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("metrics: no line %q in:\n%s", line, text)
		}
	}
	if !strings.Contains(text, `wsfs_fuse_ops_total{session="pl",op="lookup"} `) {
		t.Errorf("metrics: no lookup counter:\n%s", text)
	}
	if err := d.c.Remove(ctx, "pl", false); err != nil {
		t.Fatal(err)
	}
}

// Remove of a mount a process holds is refused with code busy naming the
// holder; --force detaches it.
func TestRemoveBusy(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "busy", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	// The holder: this test binary, in the session's directory, until its
	// stdin closes.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(wsfsBin, "exec", "--session", "busy", "--", self, "-")
	holder.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, helperEnv+"=hold")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	err = d.c.Remove(ctx, "busy", false)
	wantCode(t, "remove busy", err, mounts.CodeBusy)
	comm := filepath.Base(self)
	if len(comm) > 15 {
		comm = comm[:15] // TASK_COMM_LEN
	}
	want := fmt.Sprintf(`session "busy": mountpoint %q is busy: held by pid %d (%s, cwd)`, s.Mountpoint, holder.Process.Pid, comm)
	if err.Error() != want {
		t.Fatalf("remove busy: %q, want %q", err.Error(), want)
	}
	if _, err := d.c.Get(ctx, "busy"); err != nil {
		t.Fatalf("session gone after a refused remove: %v", err)
	}
	r := d.wsfs(t, "session", "rm", "busy", "--json")
	if r.code != 1 || !strings.Contains(r.stdout, `"code":"busy"`) {
		t.Fatalf("session rm busy: exit %d stdout %q", r.code, r.stdout)
	}
	if wantErr := "wsfs: " + want + " (use --force to detach lazily)\n"; r.stderr != wantErr {
		t.Fatalf("session rm busy: stderr %q, want %q", r.stderr, wantErr)
	}
	if r := d.wsfs(t, "session", "rm", "--force", "busy"); r.code != 0 {
		t.Fatalf("session rm --force: exit %d stderr %q", r.code, r.stderr)
	}
	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	if got := fuseMountsUnder(t, dir); len(got) != 0 {
		t.Fatalf("mounts after forced remove: %v", got)
	}
	if got := entries(t, d.mountBase); len(got) != 0 {
		t.Fatalf("mount base after forced remove: %v", got)
	}
}

// Bad input: each refusal has its status and code, and leaves no record,
// mountpoint, temp directory or mount behind.
func TestBadInputLeavesNothing(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/", "file")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "taken", Root: root}); err != nil {
		t.Fatal(err)
	}
	nothingNew := func(what string) {
		t.Helper()
		if got := entries(t, filepath.Join(d.stateDir, "sessions")); !reflect.DeepEqual(got, []string{"taken.events", "taken.json"}) {
			t.Fatalf("%s: records %v, want only taken's", what, got)
		}
		if got := entries(t, d.mountBase); !reflect.DeepEqual(got, []string{"@host", "taken"}) {
			t.Fatalf("%s: mount base %v, want only taken", what, got)
		}
		if got := entries(t, filepath.Join(d.stateDir, "tmp")); !reflect.DeepEqual(got, []string{"taken"}) {
			t.Fatalf("%s: temp dirs %v, want only taken", what, got)
		}
		if got := fuseMountsUnder(t, dir); !reflect.DeepEqual(got, []string{filepath.Join(d.mountBase, "@host/taken"), filepath.Join(d.mountBase, "taken")}) {
			t.Fatalf("%s: mounts %v, want only taken's", what, got)
		}
		if got := entries(t, root); !reflect.DeepEqual(got, []string{"file", "sub"}) {
			t.Fatalf("%s: root %v, want file and sub", what, got)
		}
	}
	for _, tc := range []struct {
		name string
		spec api.CreateRequest
		code mounts.Code
		msg  string
	}{
		{"duplicate id", api.CreateRequest{ID: "taken", Root: root}, mounts.CodeExists, `session "taken": already exists`},
		{"bad id", api.CreateRequest{ID: "a/b", Root: root}, mounts.CodeInvalid, `session id "a/b": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{"dot id", api.CreateRequest{ID: "..", Root: root}, mounts.CodeInvalid, `session id "..": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{"long id", api.CreateRequest{ID: strings.Repeat("x", 65), Root: root}, mounts.CodeInvalid, `session id "` + strings.Repeat("x", 65) + `": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{"relative origin", api.CreateRequest{ID: "n", Root: "root"}, mounts.CodeInvalid, `session "n": root "root": must be an absolute path`},
		{"missing origin", api.CreateRequest{ID: "n", Root: root + "/missing"}, mounts.CodeInvalid, `session "n": root "` + root + `/missing": no such directory`},
		{"file origin", api.CreateRequest{ID: "n", Root: root + "/file"}, mounts.CodeInvalid, `session "n": root "` + root + `/file": not a directory`},
		{"mountpoint in root", api.CreateRequest{ID: "n", Root: root, Mountpoint: root + "/sub/mnt"}, mounts.CodeInvalid, `session "n": mountpoint "` + root + `/sub/mnt" is inside the root ` + root + ` (the mount would contain itself)`},
		{"mountpoint in use", api.CreateRequest{ID: "n", Root: root, Mountpoint: filepath.Join(d.mountBase, "taken")}, mounts.CodeExists, `session "n": mountpoint "` + filepath.Join(d.mountBase, "taken") + `" is in use by session "taken"`},
		{"overlapping roots", api.CreateRequest{ID: "n", Root: root, Policy: &api.Policy{Additional: []api.Root{{Path: root + "/sub", Access: api.AccessReadOnly}}}}, mounts.CodeInvalid, ""},
		{"bad symlink mode", api.CreateRequest{ID: "n", Root: root, Symlinks: "sideways"}, mounts.CodeInvalid, `session "n": symlink mode "sideways": must be one of contain, follow`},
		{"missing parent", api.CreateRequest{ID: "n", Root: root, Parent: "nope"}, mounts.CodeInvalid, `session "n": parent "nope": no such session`},
		{"cwd not a directory", api.CreateRequest{ID: "n", Root: root, Cwd: "file"}, mounts.CodeInvalid, `session "n": cwd (--cwd) "file": not a directory (` + filepath.Join(d.mountBase, "n") + `/file)`},
	} {
		_, err := d.c.Create(ctx, tc.spec)
		wantCode(t, tc.name, err, tc.code)
		if tc.msg != "" && err.Error() != tc.msg {
			t.Fatalf("%s: %q, want %q", tc.name, err.Error(), tc.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: message has several lines: %q", tc.name, err.Error())
		}
		nothingNew(tc.name)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     mounts.Code
	}{
		{"unknown field", "POST", "/v1/sessions", `{"id":"n","root":"` + root + `","colour":"red"}`, 400, mounts.CodeInvalid},
		{"unknown policy field", "POST", "/v1/sessions", `{"id":"n","root":"` + root + `","policy":{"mode":"read-only","extra":1}}`, 400, mounts.CodeInvalid},
		{"trailing data", "POST", "/v1/sessions", `{"id":"n","root":"` + root + `"} {}`, 400, mounts.CodeInvalid},
		{"empty body", "POST", "/v1/sessions", ``, 400, mounts.CodeInvalid},
		{"oversized body", "POST", "/v1/sessions", `{"id":"n","root":"` + strings.Repeat("a", mounts.MaxBodyBytes) + `"}`, 413, mounts.CodeTooLarge},
		{"unknown session", "GET", "/v1/sessions/nope", ``, 404, mounts.CodeNotFound},
		{"bad session id", "GET", "/v1/sessions/a%20b", ``, 400, mounts.CodeInvalid},
		{"unknown route", "GET", "/v1/nope", ``, 404, mounts.CodeNotFound},
		{"wrong method", "PATCH", "/v1/sessions", ``, 405, mounts.CodeMethod},
		{"resolve without path", "GET", "/v1/sessions/taken/resolve", ``, 400, mounts.CodeInvalid},
		{"bad force", "DELETE", "/v1/sessions/taken?force=maybe", ``, 400, mounts.CodeInvalid},
		{"cd unknown field", "POST", "/v1/sessions/taken/cwd", `{"cd":"sub","x":1}`, 400, mounts.CodeInvalid},
	} {
		status, body := d.rawRequest(t, tc.method, tc.path, strings.NewReader(tc.body))
		var eb api.ErrorBody
		if err := json.Unmarshal([]byte(body), &eb); err != nil || status != tc.status || eb.Error.Code != tc.code || eb.Error.Message == "" {
			t.Fatalf("%s: status %d body %q, want %d and code %s", tc.name, status, body, tc.status, tc.code)
		}
		nothingNew(tc.name)
	}

	// The CLI: bad input exits 2 with the daemon's code in --json.
	r := d.wsfs(t, "session", "create", "n", "--root", root+"/missing", "--json")
	if want := `{"error":{"code":"invalid","message":"session \"n\": root \"` + root + `/missing\": no such directory"}}` + "\n"; r.code != 2 || r.stdout != want {
		t.Fatalf("session create missing root: exit %d stdout %q, want 2 %q", r.code, r.stdout, want)
	}
	if r := d.wsfs(t, "session", "create", "taken", "--root", root); r.code != 1 || r.stderr != "wsfs: session \"taken\": already exists\n" {
		t.Fatalf("session create duplicate: exit %d stderr %q", r.code, r.stderr)
	}
	nothingNew("cli")

	// Another uid: refused at the socket's mode (0600) ...
	fi, err := os.Stat(d.socket)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v, want 0600", fi.Mode(), err)
	}
	asNobody := func() result {
		cmd := exec.Command(wsfsBin, "session", "list", "--json", "--socket", d.socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return run(t, cmd)
	}
	// t.TempDir's directories are 0700: open the way to the socket so that
	// only the socket's own mode stands in between.
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if r := asNobody(); r.code != 1 || !strings.Contains(r.stdout, `"code":"unreachable"`) || !strings.Contains(r.stdout, "permission denied") {
		t.Fatalf("uid 65534 on a 0600 socket: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// ... and, were the socket opened up, by the peer credential check.
	if err := os.Chmod(d.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	r = asNobody()
	if want := `{"error":{"code":"forbidden","message":"peer uid 65534 (pid `; r.code != 1 || !strings.HasPrefix(r.stdout, want) || !strings.HasSuffix(r.stdout, `): only uid 0 may use this daemon"}}`+"\n") {
		t.Fatalf("uid 65534 with an open socket: exit %d stdout %q, want %s...", r.code, r.stdout, want)
	}
	os.Chmod(d.socket, 0o600)
	nothingNew("peer uid")

	if err := d.c.Remove(ctx, "taken", false); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Get(ctx, "taken")
	wantCode(t, "get removed", err, mounts.CodeNotFound)
	if status, _ := d.rawRequest(t, http.MethodDelete, "/v1/sessions/taken", nil); status != 404 {
		t.Fatalf("delete removed: %d, want 404", status)
	}
}

// Resolve and cd follow the mount's semantics: links are links, so a link
// out of the root leads out of it (its target's key, no path in the mount;
// ".." from inside it is the target's physical parent), and ".." above the
// mount root is physical too: the root's parent, as in the jail (DESIGN.md:
// relative paths start at the session's physical cwd).
func TestResolveMountSemantics(t *testing.T) {
	dir := outsideDaemonDir(t) // under /var/tmp whatever $TMPDIR is: no host view hides it
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "x", "sub/", "ext -> ../outside/in", "dangling -> ../nowhere/f")
	mkTree(t, filepath.Join(dir, "outside"), "in/", "x")
	// outside/in is a none root: the refusal below names that rule (the
	// tree is under /var/tmp, which no host view hides, whatever $TMPDIR).
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "ms", Root: root,
		Policy: &api.Policy{Additional: []api.Root{{Path: dir + "/outside/in", Access: api.AccessNone}}}})
	if err != nil {
		t.Fatal(err)
	}
	mp := s.Mountpoint
	_, err = d.c.Chdir(ctx, "ms", "ext")
	wantCode(t, "cd ext", err, mounts.CodeInvalid)
	if want := `session "ms": cd "ext": permission denied: the session may not read ` + dir + `/outside/in (rule root:none)`; err.Error() != want {
		t.Fatalf("cd ext: %q, want %q", err, want)
	}
	res, err := d.c.Resolve(ctx, "ms", "ext/../x")
	if err != nil || res.Key != dir+"/outside/x" || res.MountPath != "" || res.Display != dir+"/outside/x" {
		t.Fatalf("resolve ext/../x: %+v %v, want key %s outside the mount", res, err, dir+"/outside/x")
	}
	if _, err := d.c.Chdir(ctx, "ms", "sub"); err != nil {
		t.Fatal(err)
	}
	res, err = d.c.Resolve(ctx, "ms", "../x")
	if err != nil || res.Key != root+"/x" || res.MountPath != mp+"/x" || res.Display != mp+"/x" {
		t.Fatalf("resolve ../x in sub: %+v %v, want key %s", res, err, root+"/x")
	}
	if r := d.exec(t, "ms", nil, "cat", "../x"); r.code != 0 || r.stdout != "x" {
		t.Fatalf("cat ../x in sub: %+v", r)
	}
	if _, err := d.c.Chdir(ctx, "ms", ".."); err != nil {
		t.Fatal(err)
	}
	// Above the mount root: the root's parent, not the mount base.
	if err := os.WriteFile(filepath.Join(dir, "above"), []byte("above"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = d.c.Resolve(ctx, "ms", "../above")
	if err != nil || res.Key != dir+"/above" || res.MountPath != "" || res.Display != dir+"/above" {
		t.Fatalf("resolve ../above: %+v %v, want key %s outside the mount", res, err, dir+"/above")
	}
	// A dangling link's key is its target's, outside the root: readable,
	// not writable in workspace-write.
	res, err = d.c.Resolve(ctx, "ms", "dangling")
	if err != nil || res.Key != dir+"/nowhere/f" || res.MountPath != "" || res.Write.Errno != "EROFS" {
		t.Fatalf("resolve dangling: %+v %v, want key %s, write EROFS", res, err, dir+"/nowhere/f")
	}
	res, err = d.c.Resolve(ctx, "ms", "new/file")
	if err != nil || res.Key != root+"/new/file" || res.MountPath != mp+"/new/file" || res.Write.Allow != true {
		t.Fatalf("resolve new/file: %+v %v", res, err)
	}
	if err := d.c.Remove(ctx, "ms", false); err != nil {
		t.Fatal(err)
	}
}

// `wsfs doctor --json`: one object per check, each with a name, a known
// status, a detail, and a fix unless ok; exit code 1 exactly when one fails.
func TestDoctor(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	r := run(t, exec.Command(wsfsBin, "doctor", "--json"))
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	names := map[string]bool{}
	failed := false
	for _, line := range lines {
		var c struct{ Name, Status, Detail, Fix string }
		if err := json.Unmarshal([]byte(line), &c); err != nil || c.Name == "" || c.Detail == "" {
			t.Fatalf("doctor line %q: %v", line, err)
		}
		switch c.Status {
		case "ok":
			if c.Fix != "" {
				t.Errorf("doctor %s: ok with a fix %q", c.Name, c.Fix)
			}
		case "warn", "fail":
			if c.Fix == "" {
				t.Errorf("doctor %s: %s without a fix", c.Name, c.Status)
			}
			failed = failed || c.Status == "fail"
		default:
			t.Errorf("doctor %s: status %q", c.Name, c.Status)
		}
		names[c.Name] = true
	}
	for _, n := range []string{"/dev/fuse", "mount", "fuse passthrough", "landlock", "user_allow_other"} {
		if !names[n] {
			t.Errorf("doctor: no %q check in %q", n, r.stdout)
		}
	}
	if want := map[bool]int{false: 0, true: 1}[failed]; r.code != want {
		t.Errorf("doctor: exit %d, want %d", r.code, want)
	}
}
