package mounts_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// treeSnap describes every object below root except the root's own
// times: type, mode, owner, content digest or link text, user xattrs, and
// for a file of several links its link count and its first path (which
// names are one file; inode numbers are left out: a commit writes each
// file anew).
func treeSnap(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha=%x", sha256.Sum256(b))
		case unix.S_IFLNK:
			text, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " link=" + text
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
			if _, ok := first[st.Ino]; !ok {
				first[st.Ino] = rel
			}
			desc += fmt.Sprintf(" nlink=%d first=%s", st.Nlink, first[st.Ino])
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			buf := make([]byte, 4096)
			n, _ := unix.Listxattr(p, buf)
			names := strings.Split(strings.Trim(string(buf[:n]), "\x00"), "\x00")
			sort.Strings(names)
			for _, name := range names {
				if !strings.HasPrefix(name, "user.") {
					continue
				}
				v := make([]byte, 4096)
				m, _ := unix.Getxattr(p, name, v)
				desc += " " + name + "=" + string(v[:m])
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// layerProject makes a project with files, a directory tree, a symlink, an
// executable and an extended attribute.
func layerProject(t *testing.T, root string) {
	t.Helper()
	mkTree(t, root, "src/main.go", "src/lib/util.go", "dir1/a", "dir1/sub/b", "big", "keep", "link -> keep", "tool")
	if err := os.Chmod(filepath.Join(root, "dir1", "sub", "b"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tool"), 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "big"), []byte(strings.Repeat("0123456789", 1000)), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(root, "keep"), "user.tag", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
}

// layerScript is what a session does: edits, rm -rf, chmod -R, mv of a
// directory, a hard link, a symlink, an xattr, a truncate, a new tree.
const layerScript = `set -e
echo appended >> keep
rm -rf src
chmod -R go-w dir1 tool
mv dir1 dir2
ln keep hard
ln -s dir2/a sym
python3 -c 'import os; os.setxattr("tool", "user.note", b"set")'
truncate -s 5 big
mkdir -p new/deep && echo n > new/deep/file
`

// A layered session: its writes of every kind leave the project
// unchanged (contents, types, modes, owners, link texts, xattrs), a second
// layered session and an unlayered one see none of them, diff lists them,
// commit makes the project equal to the same script run natively, and
// the layer goes with the session.
func TestLayerLeavesProjectAndCommits(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	layerProject(t, root)
	native := filepath.Join(dir, "native")
	if out, err := exec.Command("cp", "-a", root, native).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	if r := run(t, exec.Command("bash", "-c", "cd "+native+" && "+layerScript)); r.code != 0 {
		t.Fatalf("native run: %+v", r)
	}
	before := treeSnap(t, root)

	s, err := d.c.Create(ctx, api.CreateRequest{ID: "l1", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(d.stateDir, "layers", "l1"); s.Layer != want {
		t.Fatalf("layer %q, want %q", s.Layer, want)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "l2", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "plain", Root: root}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "l1", nil, "bash", "-c", layerScript); r.code != 0 {
		t.Fatalf("layered run: %+v", r)
	}
	if r := d.exec(t, "l2", nil, "bash", "-c", "echo two > only-l2"); r.code != 0 {
		t.Fatalf("l2 write: %+v", r)
	}
	if after := treeSnap(t, root); !reflect.DeepEqual(after, before) {
		t.Fatalf("the project changed under a layer:\nbefore %v\nafter  %v", before, after)
	}
	// What each session sees (asked from child processes).
	for _, tc := range []struct{ id, want string }{
		{"l1", "keepappended|src:absent|dir1/a|only-l2:absent"},
		{"l2", "keep|src:present|dir1/a|only-l2:present"},
		{"plain", "keep|src:present|dir1/a|only-l2:absent"},
	} {
		script := `printf '%s|' "$(tr '\n' ' ' < keep | sed 's/ $//')"; [ -e src ] && printf 'src:present|' || printf 'src:absent|'; cat dir1/a 2>/dev/null || cat dir2/a; printf '|'; [ -e only-l2 ] && printf 'only-l2:present' || printf 'only-l2:absent'`
		r := d.exec(t, tc.id, nil, "bash", "-c", script)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("%s sees %q (exit %d, %s), want %q", tc.id, r.stdout, r.code, r.stderr, tc.want)
		}
	}

	// diff --json lists exactly what the native run changed.
	r := d.wsfs(t, "session", "diff", "l1", "--json")
	var res api.DiffResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("diff: %+v", r)
	}
	var got []string
	for _, c := range res.Changes {
		got = append(got, c.Kind+" "+c.Path+" "+c.Type+" "+strings.Join(c.Fields, ",")+" "+c.From)
	}
	want := []string{
		"modified big file content ",
		"deleted dir1 dir  ",
		"renamed dir2 dir  dir1",
		"modified dir2/sub/b file mode ",
		"added hard file  ",
		"modified keep file content ",
		"added new dir  ",
		"added new/deep dir  ",
		"added new/deep/file file  ",
		"deleted src dir  ",
		"added sym symlink  ",
		"modified tool file mode,xattr ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff:\n got %q\nwant %q", got, want)
	}
	// The unified diff of a text file.
	r = d.wsfs(t, "session", "diff", "l1", "keep")
	if wantOut := "M keep (file: content) linked with hard\n--- a/keep\n+++ b/keep\n@@ -1 +1 @@\n-keep\n\\ No newline at end of file\n+keepappended\n"; r.code != 0 || r.stdout != wantOut {
		t.Fatalf("diff keep: %+v\nwant %q", r, wantOut)
	}

	r = d.wsfs(t, "session", "commit", "l1")
	if r.code != 0 {
		t.Fatalf("commit: %+v", r)
	}
	if got, want := treeSnap(t, root), treeSnap(t, native); !reflect.DeepEqual(got, want) {
		t.Fatalf("after commit the project differs from the native run:\n got %v\nwant %v", got, want)
	}
	if r := d.wsfs(t, "session", "diff", "l1"); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after commit: %+v, want nothing", r)
	}
	// The unlayered session sees the commit; l2 its own file on top.
	if r := d.exec(t, "plain", nil, "bash", "-c", "cat dir2/a new/deep/file; [ -e only-l2 ] || echo no-l2"); r.stdout != "dir1/an\nno-l2\n" {
		t.Fatalf("plain after commit: %+v", r)
	}
	for _, id := range []string{"l1", "l2", "plain"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, filepath.Join(d.stateDir, "layers")); len(got) != 0 {
		t.Fatalf("layers after remove: %v, want none", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "only-l2")); !os.IsNotExist(err) {
		t.Fatalf("l2's uncommitted file reached the project: %v", err)
	}
}

// Discard undoes the session's changes in its layer (the session sees the
// project again), and never touches the project.
func TestLayerDiscard(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	layerProject(t, root)
	before := treeSnap(t, root)
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "dl", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "dl", nil, "bash", "-c", layerScript); r.code != 0 {
		t.Fatalf("layered run: %+v", r)
	}
	// One path first: only it is undone.
	res, err := d.c.Discard(ctx, "dl", []string{"keep"})
	if err != nil || !reflect.DeepEqual(res.Applied, []string{"keep"}) || len(res.Refused) != 0 {
		t.Fatalf("discard keep: %+v %v", res, err)
	}
	if r := d.exec(t, "dl", nil, "cat", "keep"); r.stdout != "keep" {
		t.Fatalf("keep after discard: %+v", r)
	}
	if r := d.wsfs(t, "session", "discard", "dl"); r.code != 0 {
		t.Fatalf("discard: %+v", r)
	}
	diff, err := d.c.Diff(ctx, "dl", nil, false)
	if err != nil || len(diff.Changes) != 0 {
		t.Fatalf("diff after discard: %+v %v", diff, err)
	}
	// What the session sees (the overlay it is served from) equals the
	// project again.
	if got := treeSnap(t, filepath.Join(s.Layer, "merged")); !reflect.DeepEqual(got, before) {
		t.Fatalf("the session's view after discard:\n got %v\nwant %v", got, before)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed: %v", got)
	}
	if err := d.c.Remove(ctx, "dl", false); err != nil {
		t.Fatal(err)
	}
}

// A path the host changed since the session's first change there is a
// conflict: diff says so, commit refuses it naming it and commits the rest
// (exit 1), --force overwrites the host's change.
func TestLayerConflict(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a", "b")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "cf", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "cf", nil, "bash", "-c", "echo session-a > a && echo session-b > b"); r.code != 0 {
		t.Fatal(r)
	}
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("host-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.wsfs(t, "session", "diff", "cf", "--stat")
	if want := "M a (file: content) CONFLICT: changed on the host since the session's first change there\nM b (file: content)\n"; r.stdout != want {
		t.Fatalf("diff: %+v\nwant %q", r, want)
	}
	r = d.wsfs(t, "session", "commit", "cf")
	if want := "committed b\nconflict a: changed on the host since the session's first change there\n"; r.code != 1 || r.stdout != want {
		t.Fatalf("commit: %+v\nwant exit 1 and %q", r, want)
	}
	if got := readFile(t, filepath.Join(root, "a")) + readFile(t, filepath.Join(root, "b")); got != "host-a\nsession-b\n" {
		t.Fatalf("project after commit: %q", got)
	}
	res, err := d.c.Commit(ctx, "cf", []string{"a"}, true)
	if err != nil || !reflect.DeepEqual(res.Applied, []string{"a"}) {
		t.Fatalf("commit --force: %+v %v", res, err)
	}
	if got := readFile(t, filepath.Join(root, "a")); got != "session-a\n" {
		t.Fatalf("a after --force: %q", got)
	}
	// Bad input: no layer, a path outside, a layer with a parent.
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "flat", Root: root}); err != nil {
		t.Fatal(err)
	}
	r = d.wsfs(t, "session", "diff", "flat")
	if want := "wsfs: session \"flat\": diff: the session has no layer (create it with --layer)\n"; r.code != 2 || r.stderr != want {
		t.Fatalf("diff without a layer: %+v, want exit 2 and %q", r, want)
	}
	r = d.wsfs(t, "session", "commit", "cf", "/etc")
	if r.code != 2 || !strings.Contains(r.stderr, `path "/etc": outside the root`) {
		t.Fatalf("commit /etc: %+v", r)
	}
	_, err = d.c.Create(ctx, api.CreateRequest{ID: "child", Root: root, Parent: "flat", Layer: true})
	if err == nil || !strings.Contains(err.Error(), `session "child": layer with parent "flat": a sub-session cannot have a layer of its own`) {
		t.Fatalf("layer with parent: %v", err)
	}
	if got := entries(t, filepath.Join(d.stateDir, "layers")); !reflect.DeepEqual(got, []string{"cf"}) {
		t.Fatalf("layers after a refused create: %v, want [cf]", got)
	}
	for _, id := range []string{"cf", "flat"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// kill -9 of the daemon during a loop of writes in a layered session, then
// a restart: the loop goes on (its requests wait for the next daemon), the
// layer is consistent (every file written either absent or complete) and
// diff works; the project never changed.
func TestLayerKill9(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "base")
	if err := os.WriteFile(filepath.Join(root, "base"), []byte(strings.Repeat("x", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeSnap(t, root)
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "k9", Root: root, Layer: true})
	if err != nil {
		t.Fatal(err)
	}
	// The loop: copy-ups (append to a copy of base) and new files. The
	// copies are made by cat, not cp, whose O_EXCL create the killed daemon
	// may have made without recording it: its repetition then gets EEXIST,
	// the documented window (README, "outlive"; fusefs keepReply.again),
	// which is not what this test is about.
	loop := exec.Command(wsfsBin, "exec", "--session", "k9", "--", "bash", "-c",
		`for i in $(seq 1 60); do cat base > c$i && echo $i >> c$i && echo $i > f$i; done; echo done`)
	loop.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	out := &strings.Builder{}
	loop.Stdout, loop.Stderr = out, out
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loop.Process.Kill(); loop.Wait() })
	upper := filepath.Join(s.Layer, "upper")
	pollUntil(t, "the loop's first files", func() bool { _, err := os.Stat(filepath.Join(upper, "f3")); return err == nil })
	d.kill()
	d2 := startDaemon(t, dir)
	if err := loop.Wait(); err != nil || out.String() != "done\n" {
		t.Fatalf("the loop across kill -9: %v, output %q", err, out.String())
	}
	d.waitExit(t)
	for i := 1; i <= 60; i++ {
		c := readFile(t, filepath.Join(upper, fmt.Sprintf("c%d", i)))
		if want := strings.Repeat("x", 1<<20) + fmt.Sprintf("%d\n", i); c != want {
			t.Fatalf("c%d: %d bytes, want %d", i, len(c), len(want))
		}
	}
	res, err := d2.c.Diff(ctx, "k9", nil, false)
	if err != nil || len(res.Changes) != 120 {
		t.Fatalf("diff after restart: %d changes, %v", len(res.Changes), err)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed")
	}
	if err := d2.c.Remove(ctx, "k9", false); err != nil {
		t.Fatal(err)
	}
}

// pollUntil waits (up to 60s) for cond.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 6000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not after 60s", what)
}

// A jail (exec --confine) on a layered session sees the layered view at
// the project's physical path, and its writes there stay in the layer.
func TestLayerConfine(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "jl", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	r := d.exec(t, "jl", []string{"--confine"}, "bash", "-c", "cd "+root+" && echo jailed > sub/new && cat sub/new && rm sub/f && ls sub")
	if r.code != 0 || r.stdout != "jailed\nnew\n" {
		t.Fatalf("confined run: %+v", r)
	}
	if got := entries(t, filepath.Join(root, "sub")); !reflect.DeepEqual(got, []string{"f"}) {
		t.Fatalf("project sub/ after the jail: %v, want [f]", got)
	}
	res, err := d.c.Diff(ctx, "jl", nil, false)
	if err != nil || len(res.Changes) != 2 || res.Changes[0].Path != "sub/f" || res.Changes[1].Path != "sub/new" {
		t.Fatalf("diff: %+v %v", res, err)
	}
	if err := d.c.Remove(ctx, "jl", false); err != nil {
		t.Fatal(err)
	}
}

// TestLayerCommitThenHostChanges: what the host changes after a commit, at
// the paths the commit applied, is the host's, not the session's. Found by a
// trial: a committed new directory stayed opaque in the layer, so a file the
// host then made in it was listed as deleted by the session, and the next
// commit deleted it; a committed file stayed the layer's copy, so a host
// append was a conflict and commit --force undid it. Now the directory
// merges with the project's again, a committed copy the session has not
// changed since is not listed, and a whiteout committed as a deletion does
// not delete what the host makes there later.
func TestLayerCommitThenHostChanges(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "gone")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "ch", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "ch", nil, "bash", "-c", "mkdir d && echo a > d/a && echo session > f && rm gone"); r.code != 0 {
		t.Fatal(r)
	}
	r := d.wsfs(t, "session", "commit", "ch")
	if want := "committed d\ncommitted d/a\ncommitted f\ncommitted gone\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("commit: %+v\nwant %q", r, want)
	}
	// The host, after the commit: a new file in the committed directory,
	// an append to the committed file, the deleted name made again.
	writeFileT := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFileT(filepath.Join(root, "d/b"), "host-b\n")
	writeFileT(filepath.Join(root, "f"), "session\nhost\n")
	writeFileT(filepath.Join(root, "gone"), "host-again\n")
	if r := d.wsfs(t, "session", "diff", "ch", "--stat"); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after the host's changes: %+v, want no change listed", r)
	}
	if r := d.wsfs(t, "session", "commit", "ch", "--force"); r.code != 0 || r.stdout != "" {
		t.Fatalf("commit --force with nothing the session changed: %+v, want nothing committed", r)
	}
	for p, want := range map[string]string{"d/a": "a\n", "d/b": "host-b\n", "f": "session\nhost\n", "gone": "host-again\n"} {
		if got := readFile(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s in the project: %q, want %q", p, got, want)
		}
	}
	// A change the session makes afterwards is listed again, as a conflict
	// where the host changed the path since the commit.
	if r := d.exec(t, "ch", nil, "bash", "-c", "echo again > d/a && echo session2 > f"); r.code != 0 {
		t.Fatal(r)
	}
	r = d.wsfs(t, "session", "diff", "ch", "--stat")
	if want := "M d/a (file: content)\nM f (file: content) CONFLICT: changed on the host since the session's first change there\n"; r.stdout != want {
		t.Fatalf("diff after the session's new changes: %+v\nwant %q", r, want)
	}
}

// `session resolve` is a question, not a write: asking it about a path
// of a layered session records no baseline there, so a host change made
// after the question and before the session's first write is no conflict
// (it was: the write decision ran the layer's before-write hook), and the
// commit applies the session's file.
func TestLayerResolveRecordsNoBaseline(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "rb", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := d.c.Resolve(ctx, "rb", "a"); err != nil || !res.Write.Allow {
		t.Fatalf("resolve a: %+v %v, want the write allowed", res, err)
	}
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "rb", nil, "sh", "-c", "echo session > a"); r.code != 0 {
		t.Fatal(r)
	}
	r := d.wsfs(t, "session", "commit", "rb")
	if r.code != 0 || r.stdout != "committed a\n" {
		t.Fatalf("commit: %+v, want exit 0 and \"committed a\"", r)
	}
	if got := readFile(t, filepath.Join(root, "a")); got != "session\n" {
		t.Fatalf("a after the commit: %q, want session", got)
	}
}
