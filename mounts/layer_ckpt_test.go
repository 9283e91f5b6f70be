package mounts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// ckptChangesA is what a session does before its checkpoint: new files
// (a hard-linked pair among them), a directory, an edit, a deletion, a
// symlink, a renamed directory, an xattr.
const ckptChangesA = `set -e
echo A > keep2
ln keep2 keep2-hard
mkdir a-dir && echo a > a-dir/f
echo mod >> src/main.go
rm dir1/a
ln -s keep alink
mv dir4 dir4r
python3 -c 'import os; os.setxattr("dir3/x", "user.a", b"A")'
`

// ckptChangesB is what it does after: every kind of change, on the
// project's objects and on the ones it made before the checkpoint.
const ckptChangesB = `set -e
mkdir -p nb/deep && echo nb > nb/deep/f
echo B >> big
rm tool
rm -rf src
mv dir1 dir1r
chmod 600 keep
python3 -c 'import os; os.setxattr("keep", "user.b", b"B"); os.setxattr("dir3/x", "user.a", b"B")'
ln -s big bsym
ln big bighard
rm -rf dir3 && mkdir dir3 && echo new > dir3/z
echo B > keep2
rm -rf a-dir
rm alink
mv dir4r dir4rr
echo b > dir4rr/new
`

// ckptSession makes a project (layerProject and more), a layered session
// id on it with full access, and runs ckptChangesA in it.
func ckptSession(t *testing.T, d *daemon, dir, id string) (root string, s api.Session) {
	t.Helper()
	root = filepath.Join(dir, "proj")
	layerProject(t, root)
	mkTree(t, root, "dir3/x", "dir4/y", "dir4/sub/z")
	s, err := d.c.Create(context.Background(), api.CreateRequest{ID: id, Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, id, nil, "bash", "-c", ckptChangesA); r.code != 0 {
		t.Fatalf("changes A: %+v", r)
	}
	return root, s
}

// A checkpoint, every kind of change after it, a rollback: the session's
// view is the checkpoint's exactly (every object's type, mode, owner,
// content, link text, user xattrs), its diff is the checkpoint's, the
// project never changed; a second rollback to it changes nothing.
func TestLayerCheckpointRollback(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, s := ckptSession(t, d, dir, "ck")
	project := treeSnap(t, root)
	merged := filepath.Join(s.Layer, "merged")

	r := d.wsfs(t, "session", "checkpoint", "ck", "c1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "checkpoint c1: ") {
		t.Fatalf("checkpoint: %+v", r)
	}
	atC1 := treeSnap(t, merged)
	diffC1, err := d.c.Diff(ctx, "ck", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "ck", nil, "bash", "-c", ckptChangesB); r.code != 0 {
		t.Fatalf("changes B: %+v", r)
	}
	if reflect.DeepEqual(treeSnap(t, merged), atC1) {
		t.Fatal("changes B changed nothing")
	}
	r = d.wsfs(t, "session", "rollback", "ck", "c1")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("rollback: %+v", r)
	}
	if got := treeSnap(t, merged); !reflect.DeepEqual(got, atC1) {
		t.Fatalf("the view after rollback differs from the checkpoint's:\n got %v\nwant %v", got, atC1)
	}
	diff, err := d.c.Diff(ctx, "ck", nil, false)
	if err != nil || !reflect.DeepEqual(diff, diffC1) {
		t.Fatalf("diff after rollback:\n got %+v %v\nwant %+v", diff, err, diffC1)
	}
	// The checkpoint's hard links are linked again.
	var st1, st2 syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(merged, "keep2"), &st1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(merged, "keep2-hard"), &st2); err != nil {
		t.Fatal(err)
	}
	if st1.Ino != st2.Ino || st1.Nlink != 2 {
		t.Fatalf("keep2 and keep2-hard after rollback: inodes %d and %d, %d links; want one inode of 2 links", st1.Ino, st2.Ino, st1.Nlink)
	}
	// What a process in the session sees is the checkpoint's too.
	if r := d.exec(t, "ck", nil, "bash", "-c", "cat keep2 keep2-hard a-dir/f alink; ls dir4r; [ -e nb ] || echo no-nb"); r.stdout != "A\nA\na\nkeepsub\ny\nno-nb\n" {
		t.Fatalf("the session after rollback: %+v", r)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, project) {
		t.Fatalf("the project changed:\n got %v\nwant %v", got, project)
	}
	res, err := d.c.Rollback(ctx, "ck", "c1")
	if err != nil || len(res.Applied) != 0 || len(res.Refused) != 0 || res.Session != "ck" || res.Checkpoint != "c1" {
		t.Fatalf("second rollback: %+v %v, want nothing applied", res, err)
	}
	// The layer goes with its checkpoints.
	if err := d.c.Remove(ctx, "ck", false); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(d.stateDir, "layers")); len(got) != 0 {
		t.Fatalf("layers after remove: %v", got)
	}
}

// The acceptance (issue 23): a shell in the session whose working
// directory was made after the checkpoint, blocked meanwhile, finds after
// the rollback that its directory is gone as after an rm -rf (ENOENT for
// a listing, an open, a create), never the later generation's data, and
// reads a file that exists in both generations with the checkpoint's
// content.
func TestLayerRollbackShellCwd(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "both")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "sh", Root: root, Layer: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "sh", nil, "bash", "-c", "echo then > both"); r.code != 0 {
		t.Fatal(r)
	}
	if _, err := d.c.Checkpoint(ctx, "sh", "c1"); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "sh", nil, "bash", "-c", "mkdir later && echo later > later/f && echo now > both"); r.code != 0 {
		t.Fatal(r)
	}
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	// ls, cat and the redirection as after an rm -rf of the working
	// directory (ls ignores getdents's ENOENT; dash says "Directory
	// nonexistent" for ENOENT, and exits on a special built-in's
	// redirection error, hence the subshell), then the errnos themselves
	// from a child of the shell, then a file of both generations.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `cd later && read x < ` + fifo + `
ls; echo "ls=$?"
cat f; echo "cat=$?"
( : > g ); echo "g=$?"
` + self + ` .
cat ` + filepath.Join(s.Mountpoint, "both")
	sh := exec.Command(wsfsBin, "exec", "--session", "sh", "--", "sh", "-c", script)
	sh.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, helperEnv+"=cwdprobe")
	var out, errb strings.Builder
	sh.Stdout, sh.Stderr = &out, &errb
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	// Opening the FIFO for writing returns once the shell, in later/,
	// opened it for reading.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.c.Rollback(ctx, "sh", "c1")
	if err != nil || !reflect.DeepEqual(res.Applied, []string{"both", "later"}) || len(res.Refused) != 0 {
		w.Close()
		t.Fatalf("rollback: %+v %v", res, err)
	}
	w.WriteString("go\n")
	w.Close()
	if err := sh.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	wantOut := "ls=0\ncat=1\ng=2\ngetdents=ENOENT open=ENOENT creat=ENOENT\nthen\n"
	wantErr := "cat: f: No such file or directory\n" +
		"sh: 4: cannot create g: Directory nonexistent\n"
	if out.String() != wantOut || errb.String() != wantErr {
		t.Fatalf("the shell after rollback:\nstdout %q\nstderr %q\nwant   %q\nand    %q", out.String(), errb.String(), wantOut, wantErr)
	}
	for _, p := range []string{filepath.Join(s.Layer, "merged", "later"), filepath.Join(root, "later")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after rollback: %v, want ENOENT", p, err)
		}
	}
	if err := d.c.Remove(ctx, "sh", false); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint outlives kill -9 of the daemon and a takeover: the next
// daemons list it and roll back to it; one the killed daemon was making
// (its .tmp-* directory) is gone; it goes with the session's layer.
func TestLayerCheckpointRestart(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	_, s := ckptSession(t, d, dir, "rs")
	merged := filepath.Join(s.Layer, "merged")
	if _, err := d.c.Checkpoint(ctx, "rs", "before"); err != nil {
		t.Fatal(err)
	}
	atC1 := treeSnap(t, merged)
	if r := d.exec(t, "rs", nil, "bash", "-c", ckptChangesB); r.code != 0 {
		t.Fatalf("changes B: %+v", r)
	}
	// What a crash mid-checkpoint leaves.
	tmp := filepath.Join(s.Layer, "checkpoints", ".tmp-0123456789ab")
	mkTree(t, tmp, "upper/half", "baseline.jsonl")
	d.kill()
	d2 := startDaemon(t, dir)
	d.waitExit(t)
	if got := entries(t, filepath.Join(s.Layer, "checkpoints")); !reflect.DeepEqual(got, []string{"before"}) {
		t.Fatalf("checkpoints/ after the restart: %v, want [before]", got)
	}
	r := d2.wsfs(t, "session", "checkpoints", "rs", "--json")
	var list api.CheckpointList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Checkpoints) != 1 || list.Checkpoints[0].Name != "before" || list.Session != "rs" {
		t.Fatalf("checkpoints after the restart: %+v", r)
	}
	if c := list.Checkpoints[0]; c.Files == 0 || c.Bytes == 0 || c.Created.IsZero() {
		t.Fatalf("checkpoint: %+v", c)
	}
	// And a takeover: the next daemon rolls back to it.
	d3 := startDaemon(t, dir)
	d2.waitExit(t)
	if _, err := d3.c.Rollback(ctx, "rs", "before"); err != nil {
		t.Fatal(err)
	}
	if got := treeSnap(t, merged); !reflect.DeepEqual(got, atC1) {
		t.Fatalf("the view after rollback differs from the checkpoint's:\n got %v\nwant %v", got, atC1)
	}
	if err := d3.c.Remove(ctx, "rs", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.Layer); !os.IsNotExist(err) {
		t.Fatalf("the layer and its checkpoints after remove: %v", err)
	}
}

// Bad input: each refusal names the input and the rule with its code, and
// leaves nothing half made (no .tmp-*, no checkpoint view mounted).
func TestLayerCheckpointBadInput(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "bad", Root: root, Layer: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "flat", Root: root}); err != nil {
		t.Fatal(err)
	}
	rule := `must be 1 to 64 of A-Z a-z 0-9 . _ - and not start with '.'`
	for _, name := range []string{"", ".hidden", "a/b", "a b", strings.Repeat("x", 65), "é"} {
		_, err := d.c.Checkpoint(ctx, "bad", name)
		if want := `session "bad": checkpoint: checkpoint name "` + name + `": ` + rule; api.CodeOf(err) != api.CodeInvalid || err.Error() != want {
			t.Errorf("checkpoint %q: %v (%s), want invalid %q", name, err, api.CodeOf(err), want)
		}
	}
	if _, err := d.c.Checkpoint(ctx, "bad", strings.Repeat("x", 64)); err != nil {
		t.Fatalf("a 64-character name: %v", err)
	}
	r := d.wsfs(t, "session", "checkpoint", "bad", "c1")
	if r.code != 0 {
		t.Fatal(r)
	}
	r = d.wsfs(t, "session", "checkpoint", "bad", "c1")
	if want := "wsfs: session \"bad\": checkpoint: checkpoint \"c1\": exists (remove it first)\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("duplicate: %+v, want exit 1 and %q", r, want)
	}
	if st, _ := d.rawRequest(t, "POST", "/v1/sessions/bad/checkpoints", strings.NewReader(`{"name":"c1"}`)); st != 409 {
		t.Fatalf("duplicate over the API: %d, want 409", st)
	}
	r = d.wsfs(t, "session", "rollback", "bad", "nope")
	if want := "wsfs: session \"bad\": rollback: checkpoint \"nope\": no such checkpoint\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("unknown checkpoint: %+v, want exit 1 and %q", r, want)
	}
	if st, _ := d.rawRequest(t, "POST", "/v1/sessions/bad/rollback", strings.NewReader(`{"name":"nope"}`)); st != 404 {
		t.Fatalf("unknown checkpoint over the API: %d, want 404", st)
	}
	if _, err := d.c.Checkpoint(ctx, "nosuch", "c1"); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("unknown session: %v", err)
	}
	r = d.wsfs(t, "session", "checkpoint", "flat", "c1")
	if want := "wsfs: session \"flat\": checkpoint: the session has no layer (create it with --layer)\n"; r.code != 2 || r.stderr != want {
		t.Fatalf("no layer: %+v, want exit 2 and %q", r, want)
	}
	for _, verb := range [][]string{{"checkpoints", "flat"}, {"rollback", "flat", "c1"}} {
		if r := d.wsfs(t, append([]string{"session"}, verb...)...); r.code != 2 || !strings.Contains(r.stderr, "the session has no layer") {
			t.Errorf("%v without a layer: %+v", verb, r)
		}
	}
	// Removed, then rolled back to.
	if r := d.wsfs(t, "session", "checkpoint", "--delete", "bad", "c1"); r.code != 0 || r.stdout != "removed c1\n" {
		t.Fatalf("checkpoint --delete: %+v", r)
	}
	if _, err := d.c.Rollback(ctx, "bad", "c1"); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("rollback of a removed checkpoint: %v", err)
	}
	if err := d.c.DeleteCheckpoint(ctx, "bad", "c1"); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("removing a removed checkpoint: %v", err)
	}
	r = d.wsfs(t, "session", "checkpoints", "bad")
	if want := "NAME" + strings.Repeat(" ", 62) + "CREATED"; r.code != 0 || !strings.HasPrefix(r.stdout, want) || strings.Count(r.stdout, "\n") != 2 ||
		!strings.HasSuffix(strings.SplitN(r.stdout, "\n", 2)[0], "  OBJECTS  BYTES") {
		t.Fatalf("checkpoints: %+v", r)
	}
	if got := entries(t, filepath.Join(s.Layer, "checkpoints")); !reflect.DeepEqual(got, []string{strings.Repeat("x", 64)}) {
		t.Fatalf("checkpoints/ after the refusals: %v", got)
	}
	if got := fuseMountsUnder(t, s.Layer); !reflect.DeepEqual(got, []string{filepath.Join(s.Layer, "merged")}) {
		t.Fatalf("mounts in the layer: %v, want merged alone", got)
	}
	for _, id := range []string{"bad", "flat"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// cwdProbe is the "cwdprobe" helper: it prints the errno (or "ok") of a
// listing of its working directory (getdents(2)), an open of f and a
// create of g there.
func cwdProbe() int {
	res := func(err error) string {
		var errno syscall.Errno
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &errno):
			return errnoName(errno)
		}
		return err.Error()
	}
	var gerr error
	if fd, err := syscall.Open(".", syscall.O_RDONLY|syscall.O_DIRECTORY, 0); err != nil {
		gerr = err
	} else {
		buf := make([]byte, 4096)
		_, gerr = syscall.Getdents(fd, buf)
		syscall.Close(fd)
	}
	_, oerr := os.Open("f")
	_, cerr := os.OpenFile("g", os.O_CREATE|os.O_WRONLY, 0o644)
	fmt.Printf("getdents=%s open=%s creat=%s\n", res(gerr), res(oerr), res(cerr))
	return 0
}

// A rollback drops the kernel caches of the session's jail view too (it
// serves the same layer to the session's confined processes): a confined
// process that read a file before the rollback reads the checkpoint's
// content right after it, not what the kernel cached.
func TestLayerRollbackJailView(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "jr", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "jr", nil, "bash", "-c", "echo then > f"); r.code != 0 {
		t.Fatal(r)
	}
	if _, err := d.c.Checkpoint(ctx, "jr", "c1"); err != nil {
		t.Fatal(err)
	}
	jailCat := func() result {
		return d.exec(t, "jr", []string{"--confine"}, "bash", "-c", "cd "+root+" && cat f && ls")
	}
	if r := d.exec(t, "jr", []string{"--confine"}, "bash", "-c", "cd "+root+" && echo now > f && echo n > n"); r.code != 0 {
		t.Fatal(r)
	}
	if r := jailCat(); r.stdout != "now\nf\nn\n" {
		t.Fatalf("the jail before rollback: %+v", r)
	}
	if _, err := d.c.Rollback(ctx, "jr", "c1"); err != nil {
		t.Fatal(err)
	}
	if r := jailCat(); r.code != 0 || r.stdout != "then\nf\n" {
		t.Fatalf("the jail right after rollback: %+v, want the checkpoint's f alone", r)
	}
	if err := d.c.Remove(ctx, "jr", false); err != nil {
		t.Fatal(err)
	}
}
