package fusefs_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/policy"
)

// bindT bind-mounts src at dst and detaches it in Cleanup, even when the
// test fails.
func bindT(t *testing.T, src, dst string) {
	t.Helper()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s on %s: %v", src, dst, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dst, err)
		}
	})
}

// varTmpDirT is a directory outside /tmp (which the host view hides):
// a place outside every root that the policy decides itself.
func varTmpDirT(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "wsfs-cross-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return canonT(t, d)
}

// A mount inside the session root is decided at its source, as the host
// view decides it (security review: a bind mount of a none root inside the
// project was served as part of the primary root, writable): a bind of a
// none root is EACCES for every access, of a read-only root EROFS on
// write, of a hidden place (the daemon's state directory) EACCES, of a
// place outside every root EROFS on write; a tmpfs mounted there has no
// other host path and stays part of the project. Server.Decide (what
// `session resolve` reports) agrees with the mount, before any lookup
// crossed the mount too. Nothing changes at the sources.
func TestCrossMountDecidedAtSource(t *testing.T) {
	base := canonT(t, t.TempDir())
	none := filepath.Join(base, "out2")
	ro := filepath.Join(base, "ro")
	state := filepath.Join(base, "state")
	outside := varTmpDirT(t)
	for _, d := range []string{none, filepath.Join(ro, "t"), filepath.Join(state, "sessions")} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(none, "f"), "secret\n", 0o644)
	writeFileT(t, filepath.Join(ro, "f"), "ro\n", 0o644)
	writeFileT(t, filepath.Join(state, "sessions/s1.events"), "ev\n", 0o644)
	writeFileT(t, filepath.Join(outside, "f"), "out\n", 0o644)
	var logs syncBuffer
	backing, mnt, srv := mountT(t, withRoot(none, policy.AccessNone), withRoot(ro, policy.AccessReadOnly),
		func(s *mountSetup) {
			s.cfg.Hidden = []string{state}
			s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		},
		withPopulate(func(t *testing.T, b string) {
			for _, d := range []string{"bm", "bro", "bst", "bout", "tmp", "plain"} {
				mkdirT(t, filepath.Join(b, "work", d), 0o755)
			}
		}))
	w := filepath.Join(backing, "work")
	bindT(t, none, filepath.Join(w, "bm"))
	bindT(t, ro, filepath.Join(w, "bro"))
	bindT(t, state, filepath.Join(w, "bst"))
	bindT(t, outside, filepath.Join(w, "bout"))
	if err := unix.Mount("wsfs-cross", filepath.Join(w, "tmp"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(w, "tmp"), unix.MNT_DETACH) })
	// A tmpfs mounted inside the read-only bind: no other host path, so
	// decided where it is mounted, as the bind decides it.
	if err := unix.Mount("wsfs-cross", filepath.Join(w, "bro/t"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(w, "bro/t"), unix.MNT_DETACH) })
	before := map[string]map[string]string{}
	for _, d := range []string{none, ro, state, outside} {
		before[d] = treeSnapshot(t, d)
	}

	// What resolve reports, asked before any lookup crossed the mounts.
	for _, c := range []struct {
		p     string
		op    policy.Op
		errno syscall.Errno
		rule  string
	}{
		{"bm/f", policy.OpWrite, syscall.EACCES, "root:none"},
		{"bm/f", policy.OpRead, syscall.EACCES, "root:none"},
		{"bro/f", policy.OpWrite, syscall.EROFS, "additional:read-only"},
		{"bro/f", policy.OpRead, 0, "additional:read-only"},
		{"bst/sessions/s1.events", policy.OpWrite, syscall.EACCES, "hostview:hidden"},
		{"bst/sessions/s1.json", policy.OpCreate, syscall.EACCES, "hostview:hidden"},
		{"bout/f", policy.OpWrite, syscall.EROFS, "outside:read-only"},
		{"bout/f", policy.OpRead, 0, "outside:read-only"},
		{"bro/t/x", policy.OpCreate, syscall.EROFS, "additional:read-only"},
		{"tmp/f", policy.OpWrite, 0, "primary:read-write"},
		{"plain/f", policy.OpWrite, 0, "primary:read-write"},
	} {
		d := srv.Decide(c.op, filepath.Join(w, c.p))
		if d.Allow != (c.errno == 0) || d.Errno != c.errno || d.Rule != c.rule {
			t.Errorf("Decide(%s, work/%s) = %+v, want errno %v rule %s", c.op, c.p, d, c.errno, c.rule)
		}
	}

	m := filepath.Join(mnt, "work")
	for _, c := range []struct {
		script, want string
	}{
		{"echo PWN > bm/f", "Permission denied"},
		{"cat bm/f", "Permission denied"},
		{"ls bm", "Permission denied"},
		{"echo PWN > bro/f", "Read-only file system"},
		{"touch bro/new", "Read-only file system"},
		{"echo PWN >> bst/sessions/s1.events", "Permission denied"},
		{"echo '{}' > bst/sessions/s1.json", "Permission denied"},
		{"echo PWN > bout/f", "Read-only file system"},
		{"mkdir bout/d", "Read-only file system"},
		{"touch bro/t/x", "Read-only file system"},
	} {
		_, errOut, code := shEnv(t, m, nil, c.script)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d stderr %q, want %q", c.script, code, errOut, c.want)
		}
	}
	if out := shOK(t, m, "ls"); out != "bm\nbout\nbro\nbst\nplain\ntmp\n" {
		t.Errorf("ls work = %q, want every name listed", out)
	}
	if out := shOK(t, m, "cat bro/f bout/f"); out != "ro\nout\n" {
		t.Errorf("cat bro/f bout/f = %q", out)
	}
	if out := shOK(t, m, "echo T > tmp/f && cat tmp/f && mv tmp/f tmp/g && cat tmp/g"); out != "T\nT\n" {
		t.Errorf("tmpfs inside the root: %q, want it writable", out)
	}
	_, err := os.Stat(filepath.Join(m, "bm/f"))
	wantErrno(t, "stat work/bm/f", err, syscall.EACCES)
	err = os.WriteFile(filepath.Join(m, "bro/f"), []byte("x"), 0o644)
	wantErrno(t, "write work/bro/f", err, syscall.EROFS)
	err = os.WriteFile(filepath.Join(m, "bout/f"), []byte("x"), 0o644)
	wantErrno(t, "write work/bout/f", err, syscall.EROFS)
	_, err = os.Stat(filepath.Join(m, "bst/sessions"))
	wantErrno(t, "stat work/bst/sessions", err, syscall.EACCES)
	// A rename out of a read-only bind into the project: the two ends are
	// decided differently.
	err = os.Rename(filepath.Join(m, "bro/f"), filepath.Join(m, "plain/f"))
	wantErrno(t, "rename work/bro/f to work/plain/f", err, syscall.EXDEV)

	for d, snap := range before {
		wantUnchanged(t, "source "+d, d, snap)
	}
	for _, want := range []string{"path=" + filepath.Join(w, "bm"), "source=" + none, "rule=root:none"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("denial log lacks %q:\n%s", want, logs.String())
		}
	}
	// The mount still agrees after the lookups.
	if d := srv.Decide(policy.OpWrite, filepath.Join(w, "bm/f")); d.Errno != syscall.EACCES {
		t.Errorf("Decide(write, work/bm/f) after lookups = %+v, want EACCES", d)
	}
}

// A bind mount whose source is inside the project is the project; a
// policy change reaches a mount already crossed (its entry is dropped):
// a read-write root made none is refused at once.
func TestCrossMountPolicyChange(t *testing.T) {
	base := canonT(t, t.TempDir())
	other := filepath.Join(base, "other")
	mkdirT(t, other, 0o755)
	writeFileT(t, filepath.Join(other, "f"), "o\n", 0o644)
	backing, mnt, srv := mountT(t, withRoot(other, policy.AccessReadWrite), withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "b"), 0o755)
		mkdirT(t, filepath.Join(b, "self"), 0o755)
		mkdirT(t, filepath.Join(b, "sub"), 0o755)
		writeFileT(t, filepath.Join(b, "sub/s"), "s\n", 0o644)
	}))
	bindT(t, other, filepath.Join(backing, "b"))
	bindT(t, filepath.Join(backing, "sub"), filepath.Join(backing, "self"))
	if out := shOK(t, mnt, "echo W > b/f && cat b/f && echo X > self/s && cat sub/s"); out != "W\nX\n" {
		t.Fatalf("writes through binds of a read-write root and of the project: %q", out)
	}
	spec := srv.Policy().Spec()
	spec.Additional = []policy.Root{{Path: other, Access: policy.AccessNone}}
	srv.SetPolicy(compileT(t, spec))
	_, errOut, code := shEnv(t, mnt, nil, "cat b/f")
	if code == 0 || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("cat b/f after the root became none: exit %d stderr %q", code, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "f")); !bytes.Equal(b, []byte("W\n")) {
		t.Errorf("other/f = %q", b)
	}
}

// A mount unmounted on the host leaves its point to the project: the next
// lookup there finds no mount and the directory is decided where it is.
func TestCrossMountUnmounted(t *testing.T) {
	base := canonT(t, t.TempDir())
	none := filepath.Join(base, "none")
	mkdirT(t, none, 0o755)
	writeFileT(t, filepath.Join(none, "f"), "secret\n", 0o644)
	backing, mnt, srv := mountT(t, withRoot(none, policy.AccessNone), withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "bm"), 0o755)
	}))
	bm := filepath.Join(backing, "bm")
	if err := unix.Mount(none, bm, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(bm, unix.MNT_DETACH)
		}
	})
	_, errOut, code := shEnv(t, mnt, nil, "cat bm/f")
	if code == 0 || !strings.Contains(errOut, "Permission denied") {
		t.Fatalf("cat bm/f: exit %d stderr %q, want Permission denied", code, errOut)
	}
	if err := unix.Unmount(bm, 0); err != nil {
		t.Fatalf("unmount %s: %v", bm, err)
	}
	mounted = false
	if out := shOK(t, mnt, "echo P > bm/f && cat bm/f"); out != "P\n" {
		t.Errorf("bm/f after the unmount = %q, want the project's own directory writable", out)
	}
	if d := srv.Decide(policy.OpWrite, bm+"/f"); !d.Allow || d.Rule != "primary:read-write" {
		t.Errorf("Decide(write, bm/f) after the unmount = %+v, want primary:read-write", d)
	}
	if b, _ := os.ReadFile(filepath.Join(none, "f")); string(b) != "secret\n" {
		t.Errorf("none/f = %q, want it unchanged", b)
	}
}

// A bind mount inside the root of a directory above a hidden place (outer,
// holding the daemon's state hid and the none root sec) lists outer's
// names but the hidden one, whose lookup is refused (EACCES
// "hostview:hidden"), as the host view lists no hidden name: ls al shows
// pub and sec (a none root is listed, EACCES, as everywhere), not hid.
// A directory with no hidden place below its source lists every name.
func TestCrossMountListsNoHidden(t *testing.T) {
	outer := varTmpDirT(t)
	hid, sec := filepath.Join(outer, "hid"), filepath.Join(outer, "sec")
	for _, d := range []string{hid, sec, filepath.Join(outer, "pub/d")} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(hid, "x"), "state\n", 0o644)
	writeFileT(t, filepath.Join(outer, "pub/f"), "pub\n", 0o644)
	backing, mnt, _ := mountT(t, withRoot(sec, policy.AccessNone),
		func(s *mountSetup) { s.cfg.Hidden = []string{hid} },
		withPopulate(func(t *testing.T, b string) { mkdirT(t, filepath.Join(b, "al"), 0o755) }))
	bindT(t, outer, filepath.Join(backing, "al"))
	for _, c := range [][2]string{
		{"ls -A al", "pub\nsec\n"},
		{"ls -A al/pub", "d\nf\n"},
		{"ls -A", "al\n"},
		{"ls -A al", "pub\nsec\n"},
	} {
		if out := shOK(t, mnt, c[0]); out != c[1] {
			t.Errorf("%s = %q, want %q", c[0], out, c[1])
		}
	}
	for _, p := range []string{"al/hid", "al/hid/x", "al/sec"} {
		_, err := os.Lstat(filepath.Join(mnt, p))
		wantErrno(t, "lstat "+p, err, syscall.EACCES)
	}
}

// A path below a nested mount is decided on the way there too (attack
// finding F6: `session resolve` said a path was readable and writable
// where the mount refused it): work/bm is a bind of a none root holding a
// bind of a read-write root at work/bm/y, so a process never reaches
// work/bm/y/f (the lookup of bm is EACCES), and Server.Decide says so, for
// reads and writes, before any lookup crossed the mounts and after; the
// read-write root's own copy is untouched. A recursive bind (work/rb, of
// a directory holding a bind of the none root) agrees as well: what it
// shows of the none root is EACCES both ways, the rest readable.
func TestCrossMountNestedDecidedOnTheWay(t *testing.T) {
	base := canonT(t, t.TempDir())
	none, rw, outer := filepath.Join(base, "none"), filepath.Join(base, "rw"), varTmpDirT(t)
	for _, d := range []string{filepath.Join(none, "y"), rw, filepath.Join(outer, "n")} {
		mkdirT(t, d, 0o755)
	}
	writeFileT(t, filepath.Join(none, "s"), "secret\n", 0o644)
	writeFileT(t, filepath.Join(rw, "f"), "rw\n", 0o644)
	writeFileT(t, filepath.Join(outer, "o"), "outer\n", 0o644)
	backing, mnt, srv := mountT(t, withRoot(none, policy.AccessNone), withRoot(rw, policy.AccessReadWrite),
		withPopulate(func(t *testing.T, b string) {
			mkdirT(t, filepath.Join(b, "work/bm"), 0o755)
			mkdirT(t, filepath.Join(b, "work/rb"), 0o755)
		}))
	w := filepath.Join(backing, "work")
	bindT(t, none, filepath.Join(w, "bm"))
	bindT(t, rw, filepath.Join(w, "bm/y"))
	bindT(t, none, filepath.Join(outer, "n"))
	if err := unix.Mount(outer, filepath.Join(w, "rb"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatalf("rbind %s: %v", outer, err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(w, "rb"), unix.MNT_DETACH) })

	type want struct {
		p     string
		op    policy.Op
		errno syscall.Errno
		rule  string
	}
	cases := []want{
		{"bm/y/f", policy.OpRead, syscall.EACCES, "root:none"},
		{"bm/y/f", policy.OpWrite, syscall.EACCES, "root:none"},
		{"bm/y/new", policy.OpCreate, syscall.EACCES, "root:none"},
		{"rb/n/s", policy.OpRead, syscall.EACCES, "root:none"},
		{"rb/n/s", policy.OpWrite, syscall.EACCES, "root:none"},
		{"rb/o", policy.OpRead, 0, "outside:read-only"},
		{"rb/o", policy.OpWrite, syscall.EROFS, "outside:read-only"},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range cases {
			d := srv.Decide(c.op, filepath.Join(w, c.p))
			if d.Allow != (c.errno == 0) || d.Errno != c.errno || d.Rule != c.rule {
				t.Errorf("%s: Decide(%s, work/%s) = %+v, want errno %v rule %s", when, c.op, c.p, d, c.errno, c.rule)
			}
		}
	}
	check("before any lookup")

	m := filepath.Join(mnt, "work")
	for _, c := range []struct{ script, want string }{
		{"cat bm/y/f", "Permission denied"},
		{"echo PWN >> bm/y/f", "Permission denied"},
		{"touch bm/y/new", "Permission denied"},
		{"cat rb/n/s", "Permission denied"},
		{"echo PWN >> rb/o", "Read-only file system"},
	} {
		_, errOut, code := shEnv(t, m, nil, c.script)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d stderr %q, want %q", c.script, code, errOut, c.want)
		}
	}
	if out := shOK(t, m, "cat rb/o"); out != "outer\n" {
		t.Errorf("cat rb/o = %q, want outer", out)
	}
	check("after the lookups")
	for p, c := range map[string]string{filepath.Join(rw, "f"): "rw\n", filepath.Join(none, "s"): "secret\n", filepath.Join(outer, "o"): "outer\n"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != c {
			t.Errorf("%s = %q, %v; want %q", p, b, err, c)
		}
	}
	if _, err := os.Lstat(filepath.Join(rw, "new")); !os.IsNotExist(err) {
		t.Errorf("rw/new: %v, want it never made", err)
	}
}
