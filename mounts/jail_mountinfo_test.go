package mounts_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/identity"
)

// TestJailMountinfo: the exact mounts a jail's /proc/self/mountinfo lists
// under the daemon's directories and the projects (issue 20 item 12). The
// mounts inside a hidden place are gone from the jail (another session's
// layer overlay, whose options name its root; another session's mounts);
// what stays is one read-only tmpfs per outermost hidden place (other
// sessions' roots, the state directory, the mount base, the socket's
// directory, the session's own none root), the session's own views and
// its temp directory: the README's jail table says so.
func TestJailMountinfo(t *testing.T) {
	needJail(t)
	dir := canon(t, newDaemonDir(t))
	projects := canon(t, t.TempDir())
	d := startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"))
	a, b, c, l := filepath.Join(projects, "a"), filepath.Join(projects, "b"), filepath.Join(projects, "secret"), filepath.Join(projects, "l")
	mkTree(t, projects, "a/f", "b/f", "secret/f", "l/f")
	for _, args := range [][]string{
		{"session", "create", "a", "--root", a, "--add-root", c + "=none"},
		{"session", "create", "b", "--root", b},
		{"session", "create", "l", "--root", l, "--layer"},
	} {
		if r := d.wsfs(t, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	r := d.exec(t, "a", []string{"--confine"}, "cat", "/proc/self/mountinfo")
	if r.code != 0 {
		t.Fatalf("jail: exit %d: %s", r.code, r.stderr)
	}
	// Mountpoints under the daemon's directory (D: socket, state, mount
	// base) and the projects' (P).
	var got []string
	for _, m := range identity.ParseMountinfo(r.stdout) {
		if identity.Within(m.Point, dir) || identity.Within(m.Point, projects) {
			got = append(got, strings.Replace(strings.Replace(m.Point, dir, "D", 1), projects, "P", 1))
		}
	}
	slices.Sort(got)
	want := []string{
		"D",                 // tmpfs: the socket's directory, holding the state directory and the mount base
		"D/mnt/@host/a",     // a's host view, from its twin
		"D/mnt/@jail/a",     // a's jail view (the source of P/a), under the tmpfs
		"D/mnt/@jailhost/a", // a's host view's twin, under the tmpfs
		"D/state/tmp/a",     // a's temp directory
		"P/a",               // a's root: its jail view
		"P/b",               // tmpfs: session b's root
		"P/l",               // tmpfs: session l's root
		"P/secret",          // tmpfs: a's none root
	}
	if !slices.Equal(got, want) {
		t.Errorf("the jail's mountinfo lists\n%s\nwant\n%s\n(full listing)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), r.stdout)
	}
	// Nothing else names b's or l's places: mountpoints, temp directories,
	// l's layer (its overlay's lowerdir is l's root).
	for _, p := range []string{"/mnt/b", "/mnt/@host/b", "/mnt/l", "/state/tmp/b", "/state/tmp/l", "/state/layers"} {
		if strings.Contains(r.stdout, dir+p) {
			t.Errorf("the jail's mountinfo names %s", dir+p)
		}
	}
}
