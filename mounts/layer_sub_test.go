package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// layerSub makes the project of a layered session par (src/a, src/keep,
// src/gone, top) with par's uncommitted change (src/a rewritten, src/pdir
// made, src/gone deleted), par's working directory in src, and sub-session
// kid of par at src, which narrows itself (--protect keep). It returns
// the project and its snapshot before any change.
func layerSub(t *testing.T, d *daemon, dir string) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "src/a", "src/keep", "src/gone/g", "top")
	before := treeSnap(t, root)
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "par", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "par", nil, "sh", "-c", "echo parent > src/a && mkdir src/pdir && echo p > src/pdir/f && rm -r src/gone"); r.code != 0 {
		t.Fatalf("par's change: %+v", r)
	}
	if _, err := d.c.Chdir(ctx, "par", "src"); err != nil {
		t.Fatal(err)
	}
	if r := d.wsfs(t, "session", "create", "kid", "--root", filepath.Join(root, "src"), "--parent", "par"); r.code != 0 {
		t.Fatalf("create kid: %+v", r)
	}
	if r := d.wsfs(t, "session", "policy", "kid", "--protect", "keep"); r.code != 0 {
		t.Fatalf("kid --protect keep: %+v", r)
	}
	return root, before
}

// A sub-session of a layered session sees what its parent sees (the
// parent's uncommitted change, a directory made only in the layer), its
// writes land in the parent's layer (the project unchanged, byte for
// byte; the parent sees them; the parent's diff lists them), its own
// narrower policy still refuses (EACCES on its protected keep, which the
// parent may write), and the layer verbs on it are refused naming the
// parent. The parent cannot be removed while kid runs on its layer.
func TestLayerSubSession(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, before := layerSub(t, d, dir)
	// A grandchild runs on the same layer.
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "gk", Root: filepath.Join(root, "src"), Parent: "kid"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kid", "gk"} {
		if s, err := d.c.Get(ctx, id); err != nil || s.LayerOf != "par" || s.Layer != "" {
			t.Fatalf("%s: layer_of %q layer %q, %v; want layer_of par and no layer", id, s.LayerOf, s.Layer, err)
		}
	}
	if r := d.wsfs(t, "session", "show", "kid"); !strings.Contains(r.stdout, "\nlayer_of: par\n") {
		t.Errorf("session show kid: %+v, want a layer_of line", r)
	}

	for _, id := range []string{"kid", "gk"} {
		if r := d.exec(t, id, nil, "sh", "-c", "cat a pdir/f; ls"); r.code != 0 || r.stdout != "parent\np\na\nkeep\npdir\n" {
			t.Fatalf("%s reads par's tree: %+v, want parent, p and a keep pdir", id, r)
		}
	}
	if r := d.exec(t, "kid", nil, "sh", "-c", "echo kid > b && echo kid2 >> a && mkdir kdir"); r.code != 0 {
		t.Fatalf("kid writes: %+v", r)
	}
	if haveJail() {
		// kid's jail: the layered tree at the project's own path.
		src := filepath.Join(root, "src")
		if r := d.exec(t, "kid", []string{"--confine"}, "sh", "-c", "cat "+src+"/a && echo j > "+src+"/j"); r.code != 0 || r.stdout != "parent\nkid2\n" {
			t.Fatalf("kid's jail: %+v", r)
		}
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed through kid:\n got %v\nwant %v", got, before)
	}
	if r := d.exec(t, "par", nil, "sh", "-c", "cat b a"); r.code != 0 || r.stdout != "kid\nparent\nkid2\n" {
		t.Fatalf("par reads kid's writes: %+v", r)
	}
	r := d.wsfs(t, "session", "diff", "par", "--stat", "src/a", "src/b", "src/gone", "src/kdir", "src/pdir")
	if want := "M src/a (file: content)\nA src/b (file)\nD src/gone (dir)\nA src/kdir (dir)\nA src/pdir (dir)\nA src/pdir/f (file)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("par's diff: %+v\nwant %q", r, want)
	}
	// kid's own narrowing: keep is protected for kid (EACCES), not for par.
	if r := d.exec(t, "kid", nil, "sh", "-c", "echo x > keep"); r.code == 0 || !strings.Contains(r.stderr, "keep: Permission denied") {
		t.Fatalf("kid writes its protected keep: %+v, want Permission denied", r)
	}
	if !strings.Contains(d.logText(), "session=kid") || !strings.Contains(d.logText(), "rule=protected") {
		t.Errorf("no denial logged for kid's keep:\n%s", d.logText())
	}
	if r := d.exec(t, "par", nil, "sh", "-c", "echo y > keep"); r.code != 0 {
		t.Fatalf("par writes keep: %+v", r)
	}
	// The layer verbs are the parent's.
	for _, verb := range []string{"diff", "commit", "discard", "checkpoints"} {
		r := d.wsfs(t, "session", verb, "kid")
		want := `wsfs: session "kid": ` + verb + `: the session has no layer of its own; it runs on the layer of session "par", whose diff, commit, discard, checkpoints and rollback are that session's` + "\n"
		if r.code != 2 || r.stderr != want {
			t.Errorf("session %s kid: %+v, want exit 2 and %q", verb, r, want)
		}
	}
	r = d.wsfs(t, "session", "rm", "par")
	if want := "wsfs: session \"par\": sub-sessions run on its layer (gk, kid); remove them first\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("rm par under kid: %+v, want exit 1 and %q", r, want)
	}
	if r := d.wsfs(t, "session", "rm", "--force", "par"); r.code != 1 {
		t.Fatalf("rm --force par under kid: %+v, want refused", r)
	}
	// Commit through the parent: the project gets kid's file too.
	res, err := d.c.Commit(ctx, "par", []string{"src/b"}, false)
	if err != nil || !reflect.DeepEqual(res.Applied, []string{"src/b"}) {
		t.Fatalf("commit src/b: %+v %v", res, err)
	}
	if got := readFile(t, filepath.Join(root, "src/b")); got != "kid\n" {
		t.Fatalf("src/b after the commit: %q", got)
	}
	for _, id := range []string{"gk", "kid", "par"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := entries(t, filepath.Join(d.stateDir, "layers")); len(got) != 0 {
		t.Fatalf("layers after removing both: %v", got)
	}
}

// A parent's discard and rollback change what the sub-session sees at
// once: kid, which read par's a and pdir/f just before, reads the
// project's a, and pdir is gone through kid's mount (no stale content
// from kid's kernel caches), as through par's; a rollback brings both
// back through kid's mount too.
func TestLayerSubSessionDiscard(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, _ := layerSub(t, d, dir)
	if _, err := d.c.Checkpoint(ctx, "par", "c1"); err != nil {
		t.Fatal(err)
	}
	// Read through kid's mount from this process, which is no session's.
	kidMnt := filepath.Join(d.mountBase, "kid")
	if r := d.exec(t, "kid", nil, "sh", "-c", "cat a pdir/f"); r.code != 0 || r.stdout != "parent\np\n" {
		t.Fatalf("kid before the discard: %+v", r)
	}
	if _, err := d.c.Discard(ctx, "par", nil); err != nil {
		t.Fatal(err)
	}
	r := run(t, commandf("cat %s/a; echo; ls %s; cat %s/pdir/f", kidMnt, kidMnt, kidMnt))
	if want := "src/a\na\ngone\nkeep\n"; r.stdout != want || !strings.Contains(r.stderr, "pdir/f: No such file or directory") {
		t.Fatalf("kid right after par's discard: %+v, want %q and pdir/f ENOENT", r, want)
	}
	if got := readFile(t, filepath.Join(root, "src/a")); got != "src/a" {
		t.Fatalf("the project's src/a: %q", got)
	}
	if _, err := d.c.Rollback(ctx, "par", "c1"); err != nil {
		t.Fatal(err)
	}
	r = run(t, commandf("cat %s/a %s/pdir/f; ls %s", kidMnt, kidMnt, kidMnt))
	if want := "parent\np\na\nkeep\npdir\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("kid right after par's rollback: %+v, want %q", r, want)
	}
	for _, id := range []string{"kid", "par"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// A sub-session of a layered session comes back after a takeover and
// after kill -9, on its parent's layer: it reads what it wrote before,
// and its writes after land in the layer (the project unchanged, par's
// diff lists both).
func TestLayerSubSessionRestart(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, before := layerSub(t, d, dir)
	if r := d.exec(t, "kid", nil, "sh", "-c", "echo 1 > k1"); r.code != 0 {
		t.Fatalf("kid writes k1: %+v", r)
	}
	d2 := startDaemon(t, dir) // a takeover
	d.waitExit(t)
	if r := d2.exec(t, "kid", nil, "sh", "-c", "cat k1 a && echo 2 > k2"); r.code != 0 || r.stdout != "1\nparent\n" {
		t.Fatalf("kid after a takeover: %+v", r)
	}
	d2.kill()
	d3 := startDaemon(t, dir)
	d2.waitExit(t)
	if r := d3.exec(t, "kid", nil, "sh", "-c", "cat k1 k2 && echo 3 > k3"); r.code != 0 || r.stdout != "1\n2\n" {
		t.Fatalf("kid after kill -9: %+v", r)
	}
	d3.stop() // a full stop unmounts the overlay too
	d3.waitExit(t)
	d4 := startDaemon(t, dir)
	s, err := d4.c.Get(ctx, "kid")
	if err != nil || s.State != api.StateMounted {
		t.Fatalf("kid after a full stop and a start: %+v %v", s, err)
	}
	if r := d4.exec(t, "kid", nil, "sh", "-c", "cat k1 k2 k3"); r.code != 0 || r.stdout != "1\n2\n3\n" {
		t.Fatalf("kid after a full stop and a start: %+v", r)
	}
	res, err := d4.c.Diff(ctx, "par", []string{"src/k1", "src/k2", "src/k3"}, false)
	if err != nil || len(res.Changes) != 3 {
		t.Fatalf("par's diff of kid's files: %+v %v", res, err)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed")
	}
	for _, id := range []string{"kid", "par"} {
		if err := d4.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// Bad input: --layer on a sub-session, a root outside the layered
// parent's project, a root the parent deleted in its layer or replaced
// by a symlink there, an additional root or allow_write directory in the
// parent's project beside the child's root (at create and by a later
// policy change: its host view and jails would write the project on
// disk): each refused naming the input and the rule, and nothing is left
// (no record, no mount, the parent removable).
func TestLayerSubSessionBadInput(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, _ := layerSub(t, d, dir)
	other := filepath.Join(dir, "other")
	mkTree(t, other, "o")
	mkTree(t, root, "src/ln/", "docs/d")
	docs := filepath.Join(root, "docs")
	if r := d.exec(t, "par", nil, "sh", "-c", "rmdir ln && ln -s /etc ln"); r.code != 0 {
		t.Fatalf("par replaces src/ln by a symlink: %+v", r)
	}
	for _, c := range []struct {
		req  api.CreateRequest
		want string
	}{
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src"), Parent: "par", Layer: true},
			`session "k2": layer with parent "par": a sub-session cannot have a layer of its own (it sees and writes its parent's tree, and the layer of its parent when that has one)`},
		{api.CreateRequest{ID: "k2", Root: other, Parent: "par", Cwd: "", Policy: &api.Policy{Mode: "read-only"}},
			`session "k2": root ` + other + `: outside ` + root + `, the project of session "par"'s layer (a sub-session of a layered session serves a directory of that tree)`},
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src/gone"), Parent: "kid"},
			`session "k2": root ` + filepath.Join(root, "src/gone") + `: no such file or directory in the layer of session "par" (removed there)`},
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src/ln"), Parent: "par"},
			`session "k2": root ` + filepath.Join(root, "src/ln") + `: a symlink in the layer of session "par", not a directory`},
		// A root or a jail's writable directory in the parent's project
		// beside the child's own root would be reached on disk.
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src"), Parent: "par", Policy: &api.Policy{Additional: []api.Root{{Path: docs, Access: api.AccessReadWrite}}}},
			`session "k2": additional root ` + docs + `: inside ` + root + `, the project of session "par"'s layer, which a session on that layer reaches only through its own root's mount (a root there would read and write the project on disk, past the layer)`},
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src"), Parent: "par", Policy: &api.Policy{Temp: []string{docs}}},
			`session "k2": temp ` + docs + `: inside ` + root + `, the project of session "par"'s layer`},
		{api.CreateRequest{ID: "k2", Root: filepath.Join(root, "src"), Parent: "par", AllowWrite: []string{docs}},
			`session "k2": allow_write "` + docs + `": lies in ` + root + `, which the session's host view hides (a jail may not write there)`},
	} {
		_, err := d.c.Create(ctx, c.req)
		if api.CodeOf(err) != api.CodeInvalid || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %+v: %v, want invalid %q", c.req, err, c.want)
		}
		if _, err := d.c.Get(ctx, "k2"); api.CodeOf(err) != api.CodeNotFound {
			t.Errorf("k2 after a refused create: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.mountBase, "k2")); !os.IsNotExist(err) {
		t.Errorf("k2's mountpoint after the refusals: %v", err)
	}
	// The same for a later policy change of kid; its policy stays.
	r := d.wsfs(t, "session", "policy", "kid", "--add-root", docs+"=ro")
	if want := `session "kid": additional root ` + docs + `: inside ` + root + `, the project of session "par"'s layer`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("kid --add-root docs=ro: %+v, want exit 2 and %q", r, want)
	}
	if s, err := d.c.Get(ctx, "kid"); err != nil || len(s.Policy.Additional) != 0 {
		t.Errorf("kid's policy after the refused change: %+v %v", s.Policy, err)
	}
	if got := readFile(t, filepath.Join(docs, "d")); got != "docs/d" {
		t.Errorf("docs/d = %q", got)
	}
	for _, id := range []string{"kid", "par"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatalf("remove %s after the refusals: %v", id, err)
		}
	}
}
