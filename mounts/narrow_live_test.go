package mounts_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNarrowToNoneCutsReadsAtOnce: README's "the next operation of every
// process sees it" for reads: after `wsfs session policy ID --add-root
// STORE=none` returns, reading through an escaping link into the host view
// (node_modules/left-pad -> STORE/left-pad), read a moment before, is EACCES
// at once, though the kernel had the path cached (the host view's entry and
// attribute timeouts); widened again, it reads.
func TestNarrowToNoneCutsReadsAtOnce(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	store, root := filepath.Join(dir, "store"), filepath.Join(dir, "proj")
	mkTree(t, store, "left-pad/index.js")
	mkTree(t, root, "node_modules/left-pad -> "+store+"/left-pad")
	if r := d.wsfs(t, "session", "create", "nn", "--root", root, "--add-root", store+"=rw"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	read := `cat node_modules/left-pad/index.js >/dev/null && echo ok || echo fail`
	if r := d.exec(t, "nn", nil, "sh", "-c", read+"; "+read); r.stdout != "ok\nok\n" {
		t.Fatalf("read before: %+v", r)
	}
	if r := d.wsfs(t, "session", "policy", "nn", "--add-root", store+"=none"); r.code != 0 {
		t.Fatalf("session policy --add-root %s=none: %d %s", store, r.code, r.stderr)
	}
	r := d.exec(t, "nn", nil, "sh", "-c", `exec 2>&1; cat node_modules/left-pad/index.js; echo "cat $?"; ls node_modules/left-pad/; echo "ls $?"`)
	if !strings.Contains(r.stdout, "cat: node_modules/left-pad/index.js: Permission denied\ncat 1\n") ||
		!strings.Contains(r.stdout, "Permission denied\nls 2\n") {
		t.Errorf("read and list right after narrowing to none: %+v, want both EACCES", r)
	}
	if r := d.wsfs(t, "session", "policy", "nn", "--add-root", store+"=ro"); r.code != 0 {
		t.Fatalf("session policy --add-root %s=ro: %d %s", store, r.code, r.stderr)
	}
	if r := d.exec(t, "nn", nil, "sh", "-c", read); r.stdout != "ok\n" {
		t.Errorf("read after widening: %+v", r)
	}
}
