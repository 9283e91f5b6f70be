package mounts_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionVerbMessages: `session cwd --cd` into another session's
// mountpoint names the rule (and --json carries the errno the API's answer
// has); `session policy` prints one line, `session show` field lines, both
// the API's object with --json; a mistyped verb gets a suggestion.
func TestSessionVerbMessages(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	p1, p2 := filepath.Join(dir, "p1"), filepath.Join(dir, "p2")
	mkTree(t, p1, "a")
	mkTree(t, p2, "b")
	for _, id := range []string{"s1", "s2"} {
		root := map[string]string{"s1": p1, "s2": p2}[id]
		if r := d.wsfs(t, "session", "create", id, "--root", root); r.code != 0 {
			t.Fatalf("create %s: %d %s", id, r.code, r.stderr)
		}
	}
	mp2 := filepath.Join(d.mountBase, "s2")
	want := `session "s1": cd "` + mp2 + `": permission denied: it is in session "s2"'s mountpoint ` + mp2 + `, which other sessions never see (rule hostview:hidden)`
	// Permission denied is a runtime failure (1), not a usage error (2).
	if r := d.wsfs(t, "session", "cwd", "s1", "--cd", mp2); r.code != 1 || r.stderr != "wsfs: "+want+"\n" {
		t.Errorf("cd into s2's mount: %+v, want %q", r, want)
	}
	r := d.wsfs(t, "session", "cwd", "s1", "--cd", mp2+"/b", "--json")
	if r.code != 1 || !strings.Contains(r.stdout, `"errno":"EACCES"`) || !strings.Contains(r.stdout, `"code":"invalid"`) {
		t.Errorf("cd --json error: %+v, want code invalid and errno EACCES", r)
	}
	r = d.wsfs(t, "session", "policy", "s1", "--protect", ".env")
	if want := "session s1: policy workspace-write, protected .env\n"; r.code != 0 || r.stdout != want {
		t.Errorf("session policy: %+v, want %q", r, want)
	}
	if r := d.wsfs(t, "--json", "session", "policy", "s1", "--mode", "read-only"); r.code != 0 || !strings.HasPrefix(r.stdout, `{"id":"s1",`) || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("session policy --json: %+v, want the session object on one line", r)
	}
	r = d.wsfs(t, "session", "show", "s1")
	for _, line := range []string{"id: s1\n", "state: mounted\n", "root: " + p1 + "\n", "policy: read-only, protected ", "mountpoint: " + filepath.Join(d.mountBase, "s1") + "\n"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("session show: no %q in:\n%s", line, r.stdout)
		}
	}
	if r := d.wsfs(t, "session", "creat", "x"); r.code != 2 || r.stderr != "wsfs: session: unknown subcommand \"creat\"; did you mean create?\n" {
		t.Errorf("session creat: %+v", r)
	}
	if r := d.wsfs(t, "sesion", "list"); r.code != 2 || !strings.HasPrefix(r.stderr, "wsfs: unknown command \"sesion\" for \"wsfs\"; did you mean session") {
		t.Errorf("sesion: %+v", r)
	}
}
