package mounts_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestPseudoFSRefused: a root (primary or additional), a mountpoint or an
// allow_write directory in a pseudo file system (proc, sysfs) or in a FUSE
// mount is refused with the host view's rule (fusefs.RefusedMount): one
// `ls -l /proc/<daemon>/fd` through a /proc root exhausted the daemon's
// descriptors.
func TestPseudoFSRefused(t *testing.T) {
	dir := outsideDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "y1", Root: proj}); err != nil {
		t.Fatal(err)
	}
	rule := "; a session may not use a pseudo file system or a FUSE mount\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", "/proc"}, `root "/proc" lies in the proc mount at /proc`},
		{[]string{"--root", "/sys/kernel"}, `root "/sys/kernel" lies in the sysfs mount at /sys`},
		{[]string{"--root", proj, "--add-root", "/proc=ro"}, `additional root "/proc" lies in the proc mount at /proc`},
		{[]string{"--root", proj, "--mountpoint", "/proc/self/wsfs"}, `mountpoint "/proc/self/wsfs" lies in the proc mount at /proc`},
		{[]string{"--root", proj, "--allow-write", "/sys/fs"}, `--allow-write "/sys/fs" lies in the sysfs mount at /sys`},
	} {
		r := d.wsfs(t, append([]string{"session", "create", "s9"}, c.args...)...)
		if want := `wsfs: session "s9": ` + c.want + rule; r.code != 2 || r.stderr != want {
			t.Errorf("create %v: exit %d stderr %q, want 2 %q", c.args, r.code, r.stderr, want)
		}
	}
	r := d.exec(t, "y1", []string{"--confine", "--allow-write", "/sys/fs"}, "true")
	if want := "wsfs: exec --confine: --allow-write /sys/fs: lies in the sysfs mount at /sys; a jail may not write directly in a pseudo file system or a FUSE mount\n"; r.code != 1 || r.stderr != want {
		t.Errorf("exec --confine --allow-write /sys/fs: exit %d stderr %q, want 1 %q", r.code, r.stderr, want)
	}
	// Nor added later.
	r = d.wsfs(t, "session", "policy", "y1", "--add-root", "/proc=ro")
	if want := `wsfs: session "y1": additional root "/proc" lies in the proc mount at /proc` + rule; r.code != 2 || r.stderr != want {
		t.Errorf("session policy --add-root /proc=ro: exit %d stderr %q, want 2 %q", r.code, r.stderr, want)
	}
}
