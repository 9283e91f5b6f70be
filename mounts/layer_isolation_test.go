package mounts_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// Two layered sessions change the same file of one project, each sees
// only its own change there, and an unlayered session sees neither; a
// commit of one reaches the project and the unlayered session but not
// the other layered session's copy, whose commit is then a conflict at
// that path (the project's file was replaced by the commit), named, the
// rest committed; --force commits it over the first session's.
func TestLayerTwoSessionsOnePath(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "g")
	for _, req := range []api.CreateRequest{
		{ID: "l1", Root: root, Layer: true},
		{ID: "l2", Root: root, Layer: true},
		{ID: "plain", Root: root},
	} {
		if _, err := d.c.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if r := d.exec(t, "l1", nil, "bash", "-c", "echo one > f && echo n1 > n1"); r.code != 0 {
		t.Fatalf("l1: %+v", r)
	}
	if r := d.exec(t, "l2", nil, "bash", "-c", "echo two > f && rm g"); r.code != 0 {
		t.Fatalf("l2: %+v", r)
	}
	// What each session sees, asked from a child process of each.
	const look = `printf '%s|' "$(cat f)"; for n in g n1; do if [ -e $n ]; then printf '%s ' $n; fi; done`
	sees := func(id, want string) {
		t.Helper()
		if r := d.exec(t, id, nil, "bash", "-c", look); r.code != 0 || r.stdout != want {
			t.Errorf("%s sees %q (exit %d, %s), want %q", id, r.stdout, r.code, r.stderr, want)
		}
	}
	sees("l1", "one|g n1 ")
	sees("l2", "two|")
	sees("plain", "f|g ")
	if got := readFile(t, filepath.Join(root, "f")) + "|" + readFile(t, filepath.Join(root, "g")); got != "f|g" {
		t.Fatalf("the project before a commit: %q, want \"f|g\"", got)
	}
	if got := entries(t, root); len(got) != 2 {
		t.Fatalf("the project before a commit holds %v, want [f g]", got)
	}

	if r := d.wsfs(t, "session", "commit", "l1"); r.code != 0 || r.stdout != "committed f\ncommitted n1\n" {
		t.Fatalf("commit l1: %+v", r)
	}
	sees("plain", "one|g n1 ")
	// l2 keeps its own copy of f and its deletion of g.
	if r := d.exec(t, "l2", nil, "bash", "-c", `cat f; [ -e g ] || echo no-g`); r.code != 0 || r.stdout != "two\nno-g\n" {
		t.Fatalf("l2 after l1's commit: %+v, want two and no g", r)
	}
	const replaced = "replaced on the host since the session's first change there"
	r := d.wsfs(t, "session", "diff", "l2", "--stat")
	if want := "M f (file: content) CONFLICT: " + replaced + "\nD g (file)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("diff l2: %+v\nwant %q", r, want)
	}
	r = d.wsfs(t, "session", "commit", "l2")
	if want := "committed g\nconflict f: " + replaced + "\n"; r.code != 1 || r.stdout != want {
		t.Fatalf("commit l2: %+v\nwant exit 1 and %q", r, want)
	}
	if got := readFile(t, filepath.Join(root, "f")); got != "one\n" {
		t.Fatalf("f after l2's refused commit: %q, want l1's", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "g")); !os.IsNotExist(err) {
		t.Fatalf("g after l2's commit: %v, want it deleted", err)
	}
	if r := d.wsfs(t, "session", "commit", "l2", "--force"); r.code != 0 || r.stdout != "committed f\n" {
		t.Fatalf("commit l2 --force: %+v", r)
	}
	if got := readFile(t, filepath.Join(root, "f")); got != "two\n" {
		t.Fatalf("f after commit --force: %q, want l2's", got)
	}
	sees("plain", "two|n1 ")
	for _, id := range []string{"l1", "l2", "plain"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// Each way the host can change a path the session changed is a conflict
// with its own reason: an edit in place, a replacement by rename (an
// editor's save), a deletion, and a file made where the session made one.
// commit refuses each (exit 1) naming it and commits the rest; --force
// writes the session's version over each.
func TestLayerConflictKinds(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "edited", "replaced", "removed", "clean")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "ck", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	// umask 022: the session's new file has the host's mode (the test
	// process's umask may be 0 after an in-process mount).
	if r := d.exec(t, "ck", nil, "bash", "-c", "umask 022; for f in edited replaced removed clean made; do echo session > $f; done"); r.code != 0 {
		t.Fatal(r)
	}
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("edited", "host\n")
	write("replaced.tmp", "host\n")
	if err := os.Rename(filepath.Join(root, "replaced.tmp"), filepath.Join(root, "replaced")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "removed")); err != nil {
		t.Fatal(err)
	}
	write("made", "host\n")

	const since = " on the host since the session's first change there"
	r := d.wsfs(t, "session", "diff", "ck", "--stat")
	want := "M clean (file: content)\n" +
		"M edited (file: content) CONFLICT: changed" + since + "\n" +
		"M made (file: content) CONFLICT: made" + since + "\n" +
		"A removed (file) CONFLICT: removed" + since + "\n" +
		"M replaced (file: content) CONFLICT: replaced" + since + "\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("diff: %+v\nwant %q", r, want)
	}
	r = d.wsfs(t, "session", "commit", "ck")
	want = "committed clean\n" +
		"conflict edited: changed" + since + "\n" +
		"conflict made: made" + since + "\n" +
		"conflict removed: removed" + since + "\n" +
		"conflict replaced: replaced" + since + "\n"
	if r.code != 1 || r.stdout != want {
		t.Fatalf("commit: %+v\nwant exit 1 and %q", r, want)
	}
	project := func() map[string]string {
		out := map[string]string{}
		for _, name := range entries(t, root) {
			out[name] = readFile(t, filepath.Join(root, name))
		}
		return out
	}
	if got, want := project(), map[string]string{"clean": "session\n", "edited": "host\n", "made": "host\n", "replaced": "host\n"}; !maps.Equal(got, want) {
		t.Fatalf("the project after commit: %q, want %q", got, want)
	}
	r = d.wsfs(t, "session", "commit", "ck", "--force")
	if want := "committed edited\ncommitted made\ncommitted removed\ncommitted replaced\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("commit --force: %+v\nwant %q", r, want)
	}
	if got, want := project(), map[string]string{"clean": "session\n", "edited": "session\n", "made": "session\n", "removed": "session\n", "replaced": "session\n"}; !maps.Equal(got, want) {
		t.Fatalf("the project after commit --force: %q, want %q", got, want)
	}
	if r := d.wsfs(t, "session", "diff", "ck", "--stat"); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after commit --force: %+v, want nothing", r)
	}
	if err := d.c.Remove(ctx, "ck", false); err != nil {
		t.Fatal(err)
	}
}
