package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// A none root is hidden by identity (issue 20 item 5): a host bind mount
// of a directory above it (outer, holding the none root secret) at an
// alias outside every root shows the root's directory at alias/secret.
// In the jail it is covered there too (empty, read-only), while the rest
// of outer stays readable through the alias; in the session's host view a
// fresh session answers EACCES at both paths, the alias asked first. A
// listing through an alias shows what one at the real path shows: in the
// jail the covered directories (secret, a later session's root p2), in
// the host view the none root (EACCES, listed at its own path too) but
// not another session's root, which the host view hides and lists at no
// path.
func TestJailAliasAboveNoneRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	needJail(t)
	dir := newDaemonDir(t)
	// Outside /tmp, which the host view hides; removed after the daemon's
	// cleanup (registered before it).
	base, later := outsideDaemonDir(t), outsideDaemonDir(t)
	d := startDaemon(t, dir)
	proj, outer := filepath.Join(base, "proj"), filepath.Join(base, "outer")
	secret := filepath.Join(outer, "secret")
	mkTree(t, proj, "f")
	mkTree(t, outer, "pub", "secret/s")
	alias := bindAliasT(t, outer)
	// A session created while the jail runs is hidden at an alias too.
	mkTree(t, later, "p2/f", "q")
	alias2 := bindAliasT(t, later)
	if r := d.wsfs(t, "session", "create", "s1", "--root", proj, "--add-root", secret+"=none"); r.code != 0 {
		t.Fatalf("create s1: %s", r.stderr)
	}
	j := d.startJailShell(t, "s1")
	if _, err := d.c.Create(context.Background(), api.CreateRequest{ID: "s2", Root: filepath.Join(later, "p2")}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{alias2 + "/p2/f", later + "/p2/f"} {
		if got, want := j.ask(t, "cat "+p), "rc=1 cat: "+p+": No such file or directory"; got != want {
			t.Errorf("in the jail: cat %s: %q, want %q", p, got, want)
		}
	}
	for dir, want := range map[string]string{alias: "pub secret", outer: "pub secret", alias2: "p2 q", later: "p2 q"} {
		if got := j.ask(t, "ls -A "+dir); got != "rc=0 "+want {
			t.Errorf("in the jail: ls -A %s: %q, want %q", dir, got, "rc=0 "+want)
		}
	}
	d.jailChecks(t, "s1", nil, [][2]string{
		{"cat " + alias + "/secret/s", "rc=1 cat: " + alias + "/secret/s: No such file or directory"},
		{"cat " + secret + "/s", "rc=1 cat: " + secret + "/s: No such file or directory"},
		{"test -z \"$(ls -A " + alias + "/secret)\"", "rc=0"},
		{"touch " + alias + "/secret/x", "rc=1 touch: cannot touch '" + alias + "/secret/x': Read-only file system"},
		{"cat " + alias + "/pub", "rc=0"},
	})
	hv := filepath.Join(d.mountBase, "@host", "s1")
	for _, p := range []string{alias + "/secret/s", secret + "/s", alias2 + "/p2/f", later + "/p2/f"} {
		_, err := os.ReadFile(hv + p)
		if errno, ok := err.(*os.PathError); !ok || errno.Err != syscall.EACCES {
			t.Errorf("read %s in the host view: %v, want EACCES", p, err)
		}
	}
	for _, c := range [][2]string{{alias, "pub secret"}, {outer, "pub secret"}, {alias2, "q"}, {later, "q"}} {
		ents, err := os.ReadDir(hv + c[0])
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if got := strings.Join(names, " "); err != nil || got != c[1] {
			t.Errorf("ls %s in the host view: %q, %v; want %q", hv+c[0], got, err, c[1])
		}
	}
	if got := readFile(t, secret+"/s"); got != "secret/s" {
		t.Errorf("host %s = %q", secret+"/s", got)
	}
}

// bindAliasT bind-mounts src at a new directory under /var/tmp (outside
// every root), returned, and unmounts and removes it in Cleanup.
func bindAliasT(t *testing.T, src string) string {
	t.Helper()
	alias, err := os.MkdirTemp("/var/tmp", "wsfs-alias-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(alias) })
	if err := unix.Mount(src, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s on %s: %v", src, alias, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(alias, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", alias, err)
		}
	})
	return alias
}

// TestHostViewAliasLaterSession: a session created later under a
// directory that a host bind mount shows at an alias disappears from the
// other sessions' host views at both paths, listed before: its root is
// listed at neither and EACCES at both, as the rest stays listed.
func TestHostViewAliasLaterSession(t *testing.T) {
	dir := newDaemonDir(t)
	base, later := outsideDaemonDir(t), outsideDaemonDir(t)
	d := startDaemon(t, dir)
	proj := filepath.Join(base, "proj")
	mkTree(t, proj, "f")
	mkTree(t, later, "p2/f", "q")
	alias := bindAliasT(t, later)
	ctx := context.Background()
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: proj}); err != nil {
		t.Fatal(err)
	}
	hv := filepath.Join(d.mountBase, "@host", "s1")
	lists := func(want string) {
		t.Helper()
		for _, p := range []string{alias, later} {
			ents, err := os.ReadDir(hv + p)
			names := make([]string, len(ents))
			for i, e := range ents {
				names[i] = e.Name()
			}
			if got := strings.Join(names, " "); err != nil || got != want {
				t.Errorf("ls %s in the host view: %q, %v; want %q", hv+p, got, err, want)
			}
		}
	}
	lists("p2 q")
	if got := readFile(t, hv+alias+"/p2/f"); got != "p2/f" {
		t.Errorf("%s before s2 = %q", hv+alias+"/p2/f", got)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s2", Root: filepath.Join(later, "p2")}); err != nil {
		t.Fatal(err)
	}
	lists("q")
	for _, p := range []string{alias + "/p2", alias + "/p2/f", later + "/p2"} {
		_, err := os.Stat(hv + p)
		if errno, ok := err.(*os.PathError); !ok || errno.Err != syscall.EACCES {
			t.Errorf("stat %s in the host view: %v, want EACCES", p, err)
		}
	}
}
