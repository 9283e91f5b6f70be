package mounts_test

import (
	"path/filepath"
	"testing"
)

// A refusal of an API field the CLI takes as a flag names the flag.
func TestCLINamesFlagNotField(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/")
	r := d.wsfs(t, "session", "create", "s1", "--root", root, "--allow-write", "/")
	if want := `wsfs: session "s1": --allow-write "/": the whole file system cannot be writable` + "\n"; r.code != 2 || r.stderr != want {
		t.Fatalf("create --allow-write /: exit %d stderr %q, want 2 %q", r.code, r.stderr, want)
	}
}
