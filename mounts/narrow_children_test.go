package mounts_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestParentNarrowsChildLive: after `session policy par --mode read-only`,
// the running write loop of sub-session kid (a child process in kid's
// mount) gets EROFS on its very next write, the narrowing is logged for
// kid, and kid shows read-only; kid may still narrow itself (--protect
// .env) and may not widen past the parent (--mode workspace-write); a
// grandchild is narrowed too.
func TestParentNarrowsChildLive(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/")
	for _, args := range [][]string{
		{"session", "create", "par", "--root", root},
		{"session", "create", "kid", "--root", root, "--parent", "par"},
		{"session", "create", "grandkid", "--root", root, "--parent", "kid"},
	} {
		if r := d.wsfs(t, args...); r.code != 0 {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
	}

	// The loop writes f<N> for each N read, answering "ok N" or "fail N
	// <error>", from kid's working directory in its mount.
	loop := exec.Command(wsfsBin, "exec", "--session", "kid", "--", "bash", "--noprofile", "--norc", "-c",
		`while read -r n; do if err=$(exec 2>&1; echo "$n" > "f$n"); then echo "ok $n"; else echo "fail $n $err"; fi; done`)
	loop.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, "LC_ALL=C")
	in, out := startPiped(t, loop)
	step := func(n int) string {
		t.Helper()
		fmt.Fprintf(in, "%d\n", n)
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("loop: %v", err)
		}
		return strings.TrimSuffix(l, "\n")
	}
	if got := step(1); got != "ok 1" {
		t.Fatalf("kid writes before: %q", got)
	}
	if r := d.wsfs(t, "session", "policy", "kid", "--protect", ".env"); r.code != 0 {
		t.Errorf("kid --protect .env under a workspace-write parent: %d %s", r.code, r.stderr)
	}
	if r := d.wsfs(t, "session", "policy", "par", "--mode", "read-only"); r.code != 0 {
		t.Fatalf("narrow par: %d %s", r.code, r.stderr)
	}
	if got, want := step(2), "fail 2 bash: line 1: f2: Read-only file system"; got != want {
		t.Errorf("kid's next write after par went read-only: %q, want %q", got, want)
	}
	for _, id := range []string{"kid", "grandkid"} {
		s, err := d.c.Get(t.Context(), id)
		if err != nil || s.Mode != "read-only" {
			t.Errorf("%s after par narrowed: mode %q, %v; want read-only", id, s.Mode, err)
		}
		if !strings.Contains(d.logText(), `msg="session policy narrowed by its parent" session=`+id+` `) {
			t.Errorf("no narrowing log line for %s:\n%s", id, d.logText())
		}
	}
	if _, err := os.Stat(filepath.Join(root, "f2")); !os.IsNotExist(err) {
		t.Errorf("f2 made in the root: %v", err)
	}

	// kid narrows itself: accepted; widening past par: refused.
	if r := d.wsfs(t, "session", "policy", "kid", "--protect", ".env"); r.code != 0 {
		t.Errorf("kid --protect .env (a narrowing): %d %s", r.code, r.stderr)
	}
	r := d.wsfs(t, "session", "policy", "kid", "--mode", "workspace-write")
	if want := `session "kid": policy mode "workspace-write" is wider than parent "par"'s "read-only"; a sub-session may only narrow its parent's policy`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("kid widening past par: %+v, want %q", r, want)
	}
	// par widened again: kid keeps its narrowing (widened explicitly).
	if r := d.wsfs(t, "session", "policy", "par", "--mode", "workspace-write"); r.code != 0 {
		t.Fatalf("widen par: %d %s", r.code, r.stderr)
	}
	if got := step(3); !strings.HasPrefix(got, "fail 3") {
		t.Errorf("kid after par widened (kid still read-only): %q", got)
	}
	if r := d.wsfs(t, "session", "policy", "kid", "--mode", "workspace-write"); r.code != 0 {
		t.Fatalf("widen kid up to par: %d %s", r.code, r.stderr)
	}
	if got := step(4); got != "ok 4" {
		t.Errorf("kid after widened up to par: %q", got)
	}
}

// TestParentNarrowsChildRoots: a parent's additional root narrowed from
// read-write to read-only, or to none, narrows the child's at once; the
// parent's outside made unreachable does the same.
func TestParentNarrowsChildRoots(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root, store := filepath.Join(dir, "proj"), filepath.Join(dir, "store")
	mkTree(t, root, "x")
	mkTree(t, store, "y")
	for _, args := range [][]string{
		{"session", "create", "p2", "--root", root, "--add-root", store + "=rw"},
		{"session", "create", "k2", "--root", root, "--parent", "p2"},
	} {
		if r := d.wsfs(t, args...); r.code != 0 {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
	}
	storeAccess := func() string {
		s, err := d.c.Get(t.Context(), "k2")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Policy.Additional {
			if r.Path == store {
				return r.Access
			}
		}
		return "(absent)"
	}
	if got := storeAccess(); got != "read-write" {
		t.Fatalf("k2's store before: %s", got)
	}
	for _, acc := range []string{"ro", "none"} {
		if r := d.wsfs(t, "session", "policy", "p2", "--add-root", store+"="+acc); r.code != 0 {
			t.Fatalf("p2 store=%s: %d %s", acc, r.code, r.stderr)
		}
		want := map[string]string{"ro": "read-only", "none": "none"}[acc]
		if got := storeAccess(); got != want {
			t.Errorf("k2's store after p2's went %s: %s, want %s", acc, got, want)
		}
	}
	res, err := d.c.Resolve(t.Context(), "k2", store+"/y")
	if err != nil || res.Read.Allow || res.Read.Errno != "EACCES" {
		t.Errorf("k2 reading the store after p2's went none: %+v, %v; want EACCES", res.Read, err)
	}
}
