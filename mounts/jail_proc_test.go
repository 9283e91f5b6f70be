package mounts_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A bind mount of /proc (or /dev) at another session's root (found by an
// attack, issue 23 F4) made the jail hide /proc as that root's alias (the
// same file system's root shown at another path, issue 20 item 5): bwrap,
// which reads the host's /proc/sys/kernel/overflowuid and executes the
// helper through /proc/self/fd before it mounts the jail's own /proc,
// failed in every other session's jail. The jail mounts /proc and /dev
// afresh: no alias there is hidden, and another session's project
// affects the jail only by its own paths. A proc mount inside another
// session's project is hidden with it, one the pre-stage cannot reach (a
// mount over its parent) too.
func TestJailProcInOtherProject(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	needJail(t)
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	base := canon(t, t.TempDir())
	a, b, c, e := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c"), filepath.Join(base, "e")
	mkTree(t, a, "p/", "q/", "r/s/", "f")
	mkTree(t, b, "g")
	mkTree(t, c, "x")
	mkTree(t, e, "x")
	for _, s := range [][2]string{{"A", a}, {"B", b}, {"C", c}, {"E", e}} {
		if r := d.wsfs(t, "session", "create", s[0], "--root", s[1]); r.code != 0 {
			t.Fatalf("create %s: %s", s[0], r.stderr)
		}
	}
	for _, m := range []struct{ src, at, fstype string }{
		{"/proc", filepath.Join(a, "p"), ""},
		{"proc", filepath.Join(a, "q"), "proc"},
		{"/proc", c, ""},
		{"/dev", e, ""},
		// Out of the pre-stage's reach under a mount over its parent.
		{"/proc", filepath.Join(a, "r/s"), ""},
		{"tmpfs", filepath.Join(a, "r"), "tmpfs"},
	} {
		flags := uintptr(0)
		if m.fstype == "" {
			flags = unix.MS_BIND
		}
		if err := unix.Mount(m.src, m.at, m.fstype, flags, ""); err != nil {
			t.Fatalf("mount %s at %s: %v", m.src, m.at, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(m.at, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", m.at, err)
			}
		})
	}
	d.jailChecks(t, "B", nil, [][2]string{
		{"test -r /proc/sys/kernel/overflowuid", "rc=0"},
		{"test -d /proc/self/fd -a -c /dev/null", "rc=0"},
		{"cat " + b + "/g", "rc=0"},
		{"ls " + a + "/p/self", "rc=2 ls: cannot access '" + a + "/p/self': No such file or directory"},
		{"ls " + a + "/q/self", "rc=2 ls: cannot access '" + a + "/q/self': No such file or directory"},
		{"ls " + c + "/self", "rc=2 ls: cannot access '" + c + "/self': No such file or directory"},
		{"ls " + e + "/null", "rc=2 ls: cannot access '" + e + "/null': No such file or directory"},
	})
}
