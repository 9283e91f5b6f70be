package mounts_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// Small CLI promises: `session ls` is `session list`; unconfined exec
// exports the session's temp directory as TMPDIR, as --confine does;
// `session rm` says what it removed (--json too).
func TestCLISessionLsRmTmpdir(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	for _, id := range []string{"a1", "a2"} {
		root := filepath.Join(dir, id)
		mkTree(t, root, "f")
		if r := d.wsfs(t, "session", "create", id, "--root", root); r.code != 0 {
			t.Fatalf("create %s: %d %s", id, r.code, r.stderr)
		}
	}
	list := d.wsfs(t, "session", "list")
	if ls := d.wsfs(t, "session", "ls"); ls.code != 0 || ls.stdout != list.stdout || !strings.Contains(ls.stdout, "a1  mounted") {
		t.Fatalf("session ls: %d %q %q, want session list's %q", ls.code, ls.stdout, ls.stderr, list.stdout)
	}
	s, err := d.c.Get(t.Context(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "a1", nil, "printenv", "TMPDIR"); r.code != 0 || r.stdout != s.TmpDir+"\n" {
		t.Fatalf("exec printenv TMPDIR: %d %q %q, want %s", r.code, r.stdout, r.stderr, s.TmpDir)
	}
	if r := d.wsfs(t, "session", "rm", "a1"); r.code != 0 || r.stdout != "removed a1\n" {
		t.Fatalf("session rm a1: %d %q %q, want \"removed a1\"", r.code, r.stdout, r.stderr)
	}
	if r := d.wsfs(t, "--json", "session", "rm", "a2"); r.code != 0 || r.stdout != `{"id":"a2","removed":true}`+"\n" {
		t.Fatalf("session rm --json a2: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
