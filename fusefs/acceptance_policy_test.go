package fusefs_test

// Acceptance 4: containment and policy, with the exact errnos of DESIGN.md's
// table:
//
//	write in a read-only area (read-only root, outside every root) EROFS
//	write to a protected subpath; any access to a none root        EACCES
//	rename or link whose two ends get different decisions          EXDEV
//	dangling escaping link plus O_CREAT (outside, workspace-write) EROFS

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
	"golang.org/x/sys/unix"
)

// wop is one write attempt and the errno it must give.
type wop struct {
	name string
	do   func() error
	want syscall.Errno
}

func runWops(t *testing.T, label string, ops []wop) {
	t.Helper()
	for _, o := range ops {
		err := o.do()
		if o.want == 0 {
			wantOK(t, label+": "+o.name, err)
		} else {
			wantErrno(t, label+": "+o.name, err, o.want)
		}
	}
}

func openErr(p string, flags int, mode uint32) func() error {
	return func() error {
		fd, err := syscall.Open(p, flags, mode)
		if err == nil {
			syscall.Close(fd)
		}
		return err
	}
}

// writeKinds returns every write kind against dir (a directory seen through
// the mount holding file "f" with xattr user.keep, and empty dir "e"):
// same-area ops give wantSame; renames and links between dir and other (a
// directory through the mount holding file "y", in a different area) give
// wantCross.
func writeKinds(dir, other string, wantSame, wantCross syscall.Errno) []wop {
	f := filepath.Join(dir, "f")
	ops := []wop{
		{"create (open O_CREAT|O_WRONLY new)", openErr(filepath.Join(dir, "new"), syscall.O_CREAT|syscall.O_WRONLY, 0o644), wantSame},
		{"create O_EXCL", openErr(filepath.Join(dir, "new2"), syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDWR, 0o644), wantSame},
		{"open existing O_WRONLY", openErr(f, syscall.O_WRONLY, 0), wantSame},
		{"open existing O_RDWR", openErr(f, syscall.O_RDWR, 0), wantSame},
		{"open existing O_WRONLY|O_TRUNC", openErr(f, syscall.O_WRONLY|syscall.O_TRUNC, 0), wantSame},
		{"open existing O_WRONLY|O_APPEND", openErr(f, syscall.O_WRONLY|syscall.O_APPEND, 0), wantSame},
		{"fallocate (fallocate(1) opens O_RDWR)", openErr(f, syscall.O_RDWR, 0), wantSame},
		{"mkdir", func() error { return syscall.Mkdir(filepath.Join(dir, "newdir"), 0o755) }, wantSame},
		{"mknod fifo", func() error { return syscall.Mknod(filepath.Join(dir, "fifo"), syscall.S_IFIFO|0o644, 0) }, wantSame},
		{"symlink", func() error { return syscall.Symlink("f", filepath.Join(dir, "newlink")) }, wantSame},
		{"rename f -> f2 (both ends in area)", func() error { return syscall.Rename(f, filepath.Join(dir, "f2")) }, wantSame},
		{"link f -> f3 (both ends in area)", func() error { return syscall.Link(f, filepath.Join(dir, "f3")) }, wantSame},
		{"unlink f", func() error { return syscall.Unlink(f) }, wantSame},
		{"rmdir e", func() error { return syscall.Rmdir(filepath.Join(dir, "e")) }, wantSame},
		{"chmod f 0600", func() error { return syscall.Chmod(f, 0o600) }, wantSame},
		{"chown f 1:1", func() error { return syscall.Chown(f, 1, 1) }, wantSame},
		{"lchown f 1:1", func() error { return syscall.Lchown(f, 1, 1) }, wantSame},
		{"utimes f", func() error {
			ts := []unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(1e9)}
			return unix.UtimesNanoAt(unix.AT_FDCWD, f, ts, 0)
		}, wantSame},
		{"utimes now (touch)", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, f, nil, 0) }, wantSame},
		{"truncate f 0", func() error { return syscall.Truncate(f, 0) }, wantSame},
		{"setxattr user.new", func() error { return unix.Setxattr(f, "user.new", []byte("x"), 0) }, wantSame},
		{"removexattr user.keep", func() error { return unix.Removexattr(f, "user.keep") }, wantSame},
		{"chmod dir e", func() error { return syscall.Chmod(filepath.Join(dir, "e"), 0o700) }, wantSame},
	}
	if other != "" {
		ops = append(ops,
			wop{"rename f -> other (source end here)", func() error { return syscall.Rename(f, filepath.Join(other, "moved")) }, wantCross},
			wop{"rename other/y -> here (target end here)", func() error { return syscall.Rename(filepath.Join(other, "y"), filepath.Join(dir, "y")) }, wantCross},
			wop{"rename other/y over f (target end replaces)", func() error { return syscall.Rename(filepath.Join(other, "y"), f) }, wantCross},
			wop{"link f -> other (source here)", func() error { return syscall.Link(f, filepath.Join(other, "linked")) }, wantCross},
			wop{"link other/y -> here (new name here)", func() error { return syscall.Link(filepath.Join(other, "y"), filepath.Join(dir, "ylink")) }, wantCross},
		)
	}
	return ops
}

// populateArea fills a directory with what writeKinds expects.
func populateArea(t *testing.T, dir string) {
	writeFileT(t, filepath.Join(dir, "f"), "area file\n", 0o644)
	if err := unix.Setxattr(filepath.Join(dir, "f"), "user.keep", []byte("kept"), 0); err != nil {
		t.Fatalf("setxattr on %s: %v", dir, err)
	}
	mkdirT(t, filepath.Join(dir, "e"), 0o755)
	writeFileT(t, filepath.Join(dir, "f.hard-src"), "src", 0o644)
}

func xattrOf(t *testing.T, p, name string) string {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, name, buf)
	if err != nil {
		return errName(errnoOf(err))
	}
	return string(buf[:n])
}

func TestPolicyEscapingSymlinks(t *testing.T) {
	outside := canonT(t, t.TempDir())
	populateArea(t, outside)
	writeFileT(t, filepath.Join(outside, "secret"), "outside\n", 0o644)
	mkdirT(t, filepath.Join(outside, "sub"), 0o755)
	writeFileT(t, filepath.Join(outside, "sub/s2"), "s2\n", 0o644)
	var relSecret, relDir string
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		var err error
		if relSecret, err = filepath.Rel(b, filepath.Join(outside, "secret")); err != nil {
			t.Fatal(err)
		}
		relDir, _ = filepath.Rel(b, outside)
		if !strings.HasPrefix(relSecret, "../../") {
			t.Fatalf("relative link %q does not start with ../..", relSecret)
		}
		symlinkT(t, filepath.Join(outside, "secret"), filepath.Join(b, "abs"))
		symlinkT(t, relSecret, filepath.Join(b, "rel"))
		symlinkT(t, outside, filepath.Join(b, "absdir"))
		symlinkT(t, relDir, filepath.Join(b, "reldir"))
		symlinkT(t, filepath.Join(outside, "nothere"), filepath.Join(b, "dang"))
		symlinkT(t, filepath.Join(relDir, "nothere-rel"), filepath.Join(b, "dangrel"))
		mkdirT(t, filepath.Join(b, "w"), 0o755)
		writeFileT(t, filepath.Join(b, "w/y"), "y\n", 0o644)
	}))
	before := treeSnapshot(t, outside)
	t.Logf("links: rel=%s reldir=%s", relSecret, relDir)

	t.Run("read", func(t *testing.T) {
		for _, c := range []struct{ p, want string }{
			{"abs", "outside\n"}, {"rel", "outside\n"}, {"absdir/secret", "outside\n"},
			{"reldir/sub/s2", "s2\n"}, {"absdir/sub/s2", "s2\n"},
		} {
			b, err := os.ReadFile(filepath.Join(mnt, c.p))
			if wantOK(t, "read "+c.p, err) && string(b) != c.want {
				t.Errorf("read %s: %q, want %q", c.p, b, c.want)
			}
		}
		// Links are links: each is a symlink whose text leads into the
		// host view, at the target's physical path.
		hv := hostViewOf(mnt)
		for p, want := range map[string]string{"abs": outside + "/secret", "rel": outside + "/secret", "absdir": outside, "reldir": outside} {
			st := lstatT(t, filepath.Join(mnt, p))
			if st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len(hv+want)) {
				t.Errorf("lstat %s: mode %#o size %d, want a symlink of size %d", p, st.Mode, st.Size, len(hv+want))
			}
			if got, err := os.Readlink(filepath.Join(mnt, p)); err != nil || got != hv+want {
				t.Errorf("readlink %s = %q, %v; want %q", p, got, err, hv+want)
			}
		}
		if out := shOK(t, mnt, "cat abs rel absdir/secret reldir/secret | wc -l; find . -type l | wc -l; find . -type f | wc -l"); out != "4\n6\n1\n" {
			t.Errorf("child reads through escaping links: %q, want \"4\\n6\\n1\\n\" (4 lines, 6 links, find does not descend)", out)
		}
	})

	t.Run("write-file-links", func(t *testing.T) {
		for _, l := range []string{"abs", "rel"} {
			p := filepath.Join(mnt, l)
			runWops(t, l, []wop{
				{"open O_WRONLY", openErr(p, syscall.O_WRONLY, 0), syscall.EROFS},
				{"open O_RDWR", openErr(p, syscall.O_RDWR, 0), syscall.EROFS},
				{"open O_TRUNC", openErr(p, syscall.O_WRONLY|syscall.O_TRUNC, 0), syscall.EROFS},
				{"open O_APPEND", openErr(p, syscall.O_WRONLY|syscall.O_APPEND, 0), syscall.EROFS},
				{"open O_CREAT|O_WRONLY (exists)", openErr(p, syscall.O_CREAT|syscall.O_WRONLY, 0o644), syscall.EROFS},
				{"chmod", func() error { return syscall.Chmod(p, 0o600) }, syscall.EROFS},
				{"truncate", func() error { return syscall.Truncate(p, 0) }, syscall.EROFS},
				{"setxattr", func() error { return unix.Setxattr(p, "user.x", []byte("x"), 0) }, syscall.EROFS},
				{"utimes", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, 0) }, syscall.EROFS},
			})
		}
		out, code := sh(t, mnt, "{ echo pwned > abs; } 2>&1; { echo pwned >> rel; } 2>&1; : > absdir/secret")
		if code == 0 || strings.Contains(out, "pwned") {
			t.Errorf("bash writes through escaping links: exit %d out %q, want failure", code, out)
		}
	})

	t.Run("write-kinds-outside", func(t *testing.T) {
		// Outside every root in workspace-write: EROFS; renames/links between
		// outside and the primary root: EXDEV.
		runWops(t, "absdir", writeKinds(filepath.Join(mnt, "absdir"), filepath.Join(mnt, "w"), syscall.EROFS, syscall.EXDEV))
		runWops(t, "reldir", writeKinds(filepath.Join(mnt, "reldir"), filepath.Join(mnt, "w"), syscall.EROFS, syscall.EXDEV))
	})

	t.Run("hard-link-outside-file-into-root", func(t *testing.T) {
		// DESIGN: a hard link needs write access at the new name and at the
		// source's physical path; ends with different decisions give EXDEV.
		// link(2) does not follow: linking the link itself is a link in
		// the root (as on ext4).
		if wantOK(t, "link mnt/abs -> mnt/stolen", syscall.Link(filepath.Join(mnt, "abs"), filepath.Join(mnt, "stolen"))) {
			if st := lstatT(t, filepath.Join(backing, "stolen")); st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				t.Errorf("backing/stolen mode %#o, want the link itself", st.Mode)
			}
		}
		// The outside file through the host view: another file system.
		wantErrno(t, "link mnt/absdir/secret -> mnt/w/stolen2", syscall.Link(filepath.Join(mnt, "absdir/secret"), filepath.Join(mnt, "w/stolen2")), syscall.EXDEV)
		if _, err := os.Lstat(filepath.Join(backing, "w/stolen2")); !os.IsNotExist(err) {
			t.Errorf("backing w/stolen2 exists after refused link (err=%v)", err)
		}
		if st := lstatT(t, filepath.Join(outside, "secret")); st.Nlink != 1 {
			t.Errorf("outside/secret nlink %d after refused links, want 1", st.Nlink)
		}
	})

	t.Run("mv-fallback", func(t *testing.T) {
		// mv gets EXDEV and falls back to copy + unlink; the unlink is refused.
		out, code := sh(t, mnt, "mv absdir/sub/s2 w/s2-moved 2>&1; echo rc=$?")
		if !strings.Contains(out, "rc=1") {
			t.Errorf("mv out of an outside dir: %q (exit %d), want mv to fail (rc=1)", out, code)
		}
	})

	t.Run("dangling", func(t *testing.T) {
		for _, l := range []string{"dang", "dangrel"} {
			p := filepath.Join(mnt, l)
			// The create lands outside every root: EROFS, nothing made.
			wantErrno(t, "open("+l+", O_CREAT|O_WRONLY)", openErr(p, syscall.O_CREAT|syscall.O_WRONLY, 0o644)(), syscall.EROFS)
			// O_EXCL on a symlink: EEXIST, as open(2) says.
			wantErrno(t, "open("+l+", O_CREAT|O_EXCL)", openErr(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, 0o644)(), syscall.EEXIST)
			if st := lstatT(t, p); st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				t.Errorf("lstat %s: mode %#o, want a symlink", l, st.Mode)
			}
			var st syscall.Stat_t
			wantErrno(t, "stat "+l, syscall.Stat(p, &st), syscall.ENOENT)
		}
		out, _ := sh(t, mnt, "{ echo x > dang; } 2>&1; echo rc=$?; mkdir -p dang/sub 2>&1; echo rc=$?")
		if strings.Count(out, "rc=1") != 2 {
			t.Errorf("bash create through dangling escaping link: %q, want two rc=1", out)
		}
		for _, n := range []string{"nothere", "nothere-rel"} {
			if _, err := os.Lstat(filepath.Join(outside, n)); !os.IsNotExist(err) {
				t.Errorf("outside/%s exists after create through dangling link (err=%v)", n, err)
			}
		}
	})

	t.Run("create-links-through-mount", func(t *testing.T) {
		// Creating an escaping link, dangling or not, is data: allowed.
		// What goes through it is decided where it lands.
		for name, target := range map[string]string{
			"newdang": filepath.Join(outside, "newtarget"), "newdangrel": filepath.Join(relDir, "newtarget"),
			"newabs": filepath.Join(outside, "secret"),
		} {
			if !wantOK(t, "symlink "+name, syscall.Symlink(target, filepath.Join(mnt, name))) {
				continue
			}
			if got, err := os.Readlink(filepath.Join(backing, name)); err != nil || got != target {
				t.Errorf("backing/%s = %q, %v; want the text as given %q", name, got, err, target)
			}
		}
		// Usable by the very next call.
		b, err := os.ReadFile(filepath.Join(mnt, "newabs"))
		if wantOK(t, "read mnt/newabs", err) && string(b) != "outside\n" {
			t.Errorf("read mnt/newabs: %q, want %q", b, "outside\n")
		}
		wantErrno(t, "open(mnt/newabs, O_WRONLY)", openErr(filepath.Join(mnt, "newabs"), syscall.O_WRONLY, 0)(), syscall.EROFS)
		wantErrno(t, "open(mnt/newdang, O_CREAT)", openErr(filepath.Join(mnt, "newdang"), syscall.O_CREAT|syscall.O_WRONLY, 0o644)(), syscall.EROFS)
	})

	wantUnchanged(t, "outside dir after all attempts", outside, before)
	if x := xattrOf(t, filepath.Join(outside, "f"), "user.keep"); x != "kept" {
		t.Errorf("outside/f user.keep = %q, want kept", x)
	}
}

func TestPolicyProtectedGit(t *testing.T) {
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, ".git/hooks"), 0o755)
		mkdirT(t, filepath.Join(b, ".git/objects"), 0o755)
		writeFileT(t, filepath.Join(b, ".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n", 0o755)
		writeFileT(t, filepath.Join(b, ".git/config"), "[core]\n", 0o644)
		writeFileT(t, filepath.Join(b, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)
		writeFileT(t, filepath.Join(b, "evil"), "#!/bin/sh\necho pwned\n", 0o755)
		mkdirT(t, filepath.Join(b, "evildir"), 0o755)
		symlinkT(t, ".git/hooks", filepath.Join(b, "hooklink"))
	}))
	gitBefore := treeSnapshot(t, filepath.Join(backing, ".git"))
	h := func(p string) string { return filepath.Join(mnt, p) }
	runWops(t, "protected", []wop{
		{"create .git/hooks/x", openErr(h(".git/hooks/x"), syscall.O_CREAT|syscall.O_WRONLY, 0o755), syscall.EACCES},
		{"open .git/hooks/pre-commit O_WRONLY", openErr(h(".git/hooks/pre-commit"), syscall.O_WRONLY, 0), syscall.EACCES},
		{"open .git/hooks/pre-commit O_TRUNC", openErr(h(".git/hooks/pre-commit"), syscall.O_WRONLY|syscall.O_TRUNC, 0), syscall.EACCES},
		{"chmod .git/hooks/pre-commit", func() error { return syscall.Chmod(h(".git/hooks/pre-commit"), 0o777) }, syscall.EACCES},
		{"unlink .git/hooks/pre-commit", func() error { return syscall.Unlink(h(".git/hooks/pre-commit")) }, syscall.EACCES},
		{"mkdir .git/hooks/d", func() error { return syscall.Mkdir(h(".git/hooks/d"), 0o755) }, syscall.EACCES},
		{"symlink .git/hooks/post-checkout", func() error { return syscall.Symlink("../../evil", h(".git/hooks/post-checkout")) }, syscall.EACCES},
		{"rename within hooks", func() error { return syscall.Rename(h(".git/hooks/pre-commit"), h(".git/hooks/pre-push")) }, syscall.EACCES},
		// A rename or link with a protected end is a write to the protected
		// name: EACCES, not EXDEV (policy.DecideRename: "a name whose rename
		// would move a protected subpath away ... is returned as is"; DESIGN:
		// protected names "can be neither created, replaced nor renamed away").
		{"rename evil -> .git/hooks/pre-push (protected target)", func() error { return syscall.Rename(h("evil"), h(".git/hooks/pre-push")) }, syscall.EACCES},
		{"rename evil over .git/hooks/pre-commit (protected target)", func() error { return syscall.Rename(h("evil"), h(".git/hooks/pre-commit")) }, syscall.EACCES},
		{"rename .git/hooks/pre-commit away (protected source)", func() error { return syscall.Rename(h(".git/hooks/pre-commit"), h("stolen-hook")) }, syscall.EACCES},
		{"rename .git/hooks away", func() error { return syscall.Rename(h(".git/hooks"), h(".git/hooks-old")) }, syscall.EACCES},
		// Moving the git directory protects nothing away: it keeps its
		// HEAD, so its names keep their rule; and back onto .git.
		{"rename .git away (a git directory wherever it is)", func() error { return syscall.Rename(h(".git"), h("git-old")) }, 0},
		{"write git-old/config (still a git directory)", openErr(h("git-old/config"), syscall.O_WRONLY, 0), syscall.EACCES},
		{"rename git-old back onto .git", func() error { return syscall.Rename(h("git-old"), h(".git")) }, 0},
		{"rmdir-replace: rename evil-dir over .git/hooks", func() error { return syscall.Rename(h("evildir"), h(".git/hooks")) }, syscall.EACCES},
		{"link evil -> .git/hooks/pre-push (protected new name)", func() error { return syscall.Link(h("evil"), h(".git/hooks/pre-push")) }, syscall.EACCES},
		{"link .git/hooks/pre-commit -> hardhook (protected source)", func() error { return syscall.Link(h(".git/hooks/pre-commit"), h("hardhook")) }, syscall.EACCES},
		{"open .git/config O_WRONLY", openErr(h(".git/config"), syscall.O_WRONLY, 0), syscall.EACCES},
		{"open .git/config O_APPEND", openErr(h(".git/config"), syscall.O_WRONLY|syscall.O_APPEND, 0), syscall.EACCES},
		{"setxattr .git/config", func() error { return unix.Setxattr(h(".git/config"), "user.x", []byte("x"), 0) }, syscall.EACCES},
		{"create via second spelling hooklink/x", openErr(h("hooklink/x"), syscall.O_CREAT|syscall.O_WRONLY, 0o755), syscall.EACCES},
		{"write via second spelling hooklink/pre-commit", openErr(h("hooklink/pre-commit"), syscall.O_WRONLY, 0), syscall.EACCES},
		// the rest of .git stays writable
		{"create .git/index.lock", openErr(h(".git/index.lock"), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_EXCL, 0o644), 0},
		{"mkdir .git/objects/ab", func() error { return syscall.Mkdir(h(".git/objects/ab"), 0o755) }, 0},
		{"write .git/HEAD", openErr(h(".git/HEAD"), syscall.O_WRONLY|syscall.O_TRUNC, 0), 0},
	})
	out, code := sh(t, mnt, "{ echo 'echo pwned' > .git/hooks/x; } 2>&1; echo rc=$?")
	if !strings.Contains(out, "Permission denied") || !strings.Contains(out, "rc=1") {
		t.Errorf("bash write to .git/hooks/x: %q (exit %d), want Permission denied and rc=1", out, code)
	}
	after := treeSnapshot(t, filepath.Join(backing, ".git"))
	for k, v := range gitBefore {
		if strings.HasPrefix(k, "hooks") || k == "config" {
			if after[k] != v {
				t.Errorf(".git/%s changed: %s => %s", k, v, after[k])
			}
		}
	}
	for k := range after {
		if strings.HasPrefix(k, "hooks/") && gitBefore[k] == "" {
			t.Errorf(".git/%s appeared", k)
		}
	}
}

// TestPolicyProtectedGitdirPointer: when the root's .git is a "gitdir:"
// pointer file, hooks and config under the gitdir it points to are protected.
func TestPolicyProtectedGitdirPointer(t *testing.T) {
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "realgit/hooks"), 0o755)
		writeFileT(t, filepath.Join(b, "realgit/config"), "[core]\n", 0o644)
		writeFileT(t, filepath.Join(b, "realgit/HEAD"), "ref: refs/heads/main\n", 0o644)
		writeFileT(t, filepath.Join(b, ".git"), "gitdir: "+filepath.Join(b, "realgit")+"\n", 0o644)
	}))
	h := func(p string) string { return filepath.Join(mnt, p) }
	runWops(t, "gitdir pointer", []wop{
		{"create realgit/hooks/x", openErr(h("realgit/hooks/x"), syscall.O_CREAT|syscall.O_WRONLY, 0o755), syscall.EACCES},
		{"write realgit/config", openErr(h("realgit/config"), syscall.O_WRONLY, 0), syscall.EACCES},
		{"write realgit/HEAD (not protected)", openErr(h("realgit/HEAD"), syscall.O_WRONLY|syscall.O_APPEND, 0), 0},
	})
	if _, err := os.Lstat(filepath.Join(backing, "realgit/hooks/x")); !os.IsNotExist(err) {
		t.Errorf("realgit/hooks/x exists after refused create (err=%v)", err)
	}
}

func TestPolicyReadOnlyRootViaEscapingLink(t *testing.T) {
	ro := canonT(t, t.TempDir())
	populateArea(t, ro)
	var relRo string
	_, mnt, _ := mountT(t, withRoot(ro, policy.AccessReadOnly), withPopulate(func(t *testing.T, b string) {
		symlinkT(t, ro, filepath.Join(b, "rolink"))
		relRo, _ = filepath.Rel(b, ro)
		symlinkT(t, relRo, filepath.Join(b, "rorel"))
		writeFileT(t, filepath.Join(b, "y"), "y\n", 0o644)
	}))
	before := treeSnapshot(t, ro)
	b, err := os.ReadFile(filepath.Join(mnt, "rolink/f"))
	if wantOK(t, "read rolink/f", err) && string(b) != "area file\n" {
		t.Errorf("read rolink/f: %q", b)
	}
	runWops(t, "read-only root via rolink", writeKinds(filepath.Join(mnt, "rolink"), mnt, syscall.EROFS, syscall.EXDEV))
	runWops(t, "read-only root via rorel", writeKinds(filepath.Join(mnt, "rorel"), mnt, syscall.EROFS, syscall.EXDEV))
	wantUnchanged(t, "read-only root", ro, before)
	if x := xattrOf(t, filepath.Join(ro, "f"), "user.keep"); x != "kept" {
		t.Errorf("ro/f user.keep = %q, want kept", x)
	}
	// fallocate on a read-only descriptor never reaches the server: EBADF.
	fd, err := syscall.Open(filepath.Join(mnt, "rolink/f"), syscall.O_RDONLY, 0)
	if err == nil {
		wantErrno(t, "fallocate on O_RDONLY fd", syscall.Fallocate(fd, 0, 0, 4096), syscall.EBADF)
		syscall.Close(fd)
	}
}

func TestPolicyReadWriteRoot(t *testing.T) {
	rw := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(rw, "f"), "rw\n", 0o644)
	backing, mnt, _ := mountT(t, withRoot(rw, policy.AccessReadWrite), withPopulate(func(t *testing.T, b string) {
		symlinkT(t, rw, filepath.Join(b, "rwlink"))
		writeFileT(t, filepath.Join(b, "y"), "y\n", 0o644)
	}))
	p := func(s string) string { return filepath.Join(mnt, s) }
	runWops(t, "read-write root via rwlink", []wop{
		{"create rwlink/new", openErr(p("rwlink/new"), syscall.O_CREAT|syscall.O_WRONLY, 0o644), 0},
		{"append rwlink/f", openErr(p("rwlink/f"), syscall.O_WRONLY|syscall.O_APPEND, 0), 0},
		{"rename within rwlink", func() error { return syscall.Rename(p("rwlink/new"), p("rwlink/new2")) }, 0},
		{"chmod rwlink/f", func() error { return syscall.Chmod(p("rwlink/f"), 0o600) }, 0},
		// both ends allowed, in different roots: EXDEV
		{"rename primary y -> rwlink/y", func() error { return syscall.Rename(p("y"), p("rwlink/y")) }, syscall.EXDEV},
		{"rename rwlink/f -> primary", func() error { return syscall.Rename(p("rwlink/f"), p("f")) }, syscall.EXDEV},
		{"link rwlink/f -> primary", func() error { return syscall.Link(p("rwlink/f"), p("fl")) }, syscall.EXDEV},
	})
	if _, err := os.Lstat(filepath.Join(rw, "new2")); err != nil {
		t.Errorf("rw/new2 after create + rename through the mount: %v", err)
	}
	if st := lstatT(t, filepath.Join(rw, "f")); st.Mode&0o7777 != 0o600 {
		t.Errorf("rw/f mode %#o after chmod through the mount, want 0600", st.Mode&0o7777)
	}
	if _, err := os.Lstat(filepath.Join(backing, "y")); err != nil {
		t.Errorf("backing/y gone after refused cross-root rename: %v", err)
	}
	// mv gets EXDEV and falls back to copy + unlink; both ends are writable.
	if out, code := sh(t, mnt, "mv y rwlink/y-moved 2>&1"); code != 0 {
		t.Errorf("mv y rwlink/y-moved: exit %d %q, want 0", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "y-moved")); err != nil || string(b) != "y\n" {
		t.Errorf("mv across roots (EXDEV then copy+unlink): rw/y-moved = %q (%v), want y", b, err)
	}
	if _, err := os.Lstat(filepath.Join(backing, "y")); !os.IsNotExist(err) {
		t.Errorf("mv across roots: backing/y still there (err=%v), want removed by mv's unlink", err)
	}
}

func TestPolicyNoneRoot(t *testing.T) {
	none := canonT(t, t.TempDir())
	populateArea(t, none)
	_, mnt, _ := mountT(t, withRoot(none, policy.AccessNone), withPopulate(func(t *testing.T, b string) {
		symlinkT(t, none, filepath.Join(b, "nonelink"))
		symlinkT(t, filepath.Join(none, "f"), filepath.Join(b, "nonefile"))
	}))
	before := treeSnapshot(t, none)
	var st syscall.Stat_t
	_, rerr := os.ReadFile(filepath.Join(mnt, "nonelink/f"))
	wantErrno(t, "read nonelink/f", rerr, syscall.EACCES)
	_, rerr = os.ReadFile(filepath.Join(mnt, "nonefile"))
	wantErrno(t, "read nonefile", rerr, syscall.EACCES)
	wantErrno(t, "stat nonelink", syscall.Stat(filepath.Join(mnt, "nonelink"), &st), syscall.EACCES)
	wantErrno(t, "create nonelink/new", openErr(filepath.Join(mnt, "nonelink/new"), syscall.O_CREAT|syscall.O_WRONLY, 0o644)(), syscall.EACCES)
	wantUnchanged(t, "none root", none, before)
}

func TestPolicyReadOnlyMode(t *testing.T) {
	backing, mnt, _ := mountT(t, withMode(policy.ModeReadOnly), withPopulate(func(t *testing.T, b string) {
		populateArea(t, b)
		mkdirT(t, filepath.Join(b, "sub"), 0o755)
		populateArea(t, filepath.Join(b, "sub"))
		writeFileT(t, filepath.Join(b, "y"), "y\n", 0o644)
		writeFileT(t, filepath.Join(b, "sub/y"), "y\n", 0o644)
	}))
	before := treeSnapshot(t, backing)
	b, err := os.ReadFile(filepath.Join(mnt, "sub/f"))
	if wantOK(t, "read sub/f", err) && string(b) != "area file\n" {
		t.Errorf("read sub/f = %q", b)
	}
	runWops(t, "read-only mode (root)", writeKinds(mnt, filepath.Join(mnt, "sub"), syscall.EROFS, syscall.EROFS))
	runWops(t, "read-only mode (sub)", writeKinds(filepath.Join(mnt, "sub"), mnt, syscall.EROFS, syscall.EROFS))
	wantUnchanged(t, "backing in read-only mode", backing, before)
	// DESIGN.md: never kernel-ro, so the server decides (and logs) and the
	// policy can be widened live.
	var sfs unix.Statfs_t
	if err := unix.Statfs(mnt, &sfs); err != nil || sfs.Flags&unix.ST_RDONLY != 0 {
		t.Errorf("statfs(mnt).f_flags = %#x (%v), want no ST_RDONLY (read-only is decided by the server)", sfs.Flags, err)
	}
}

// TestPolicyLiveSwap: an already-running process's next write sees a policy
// swapped with SetPolicy.
func TestPolicyLiveSwap(t *testing.T) {
	backing, mnt, srv := mountT(t)
	sh := startShell(t)
	// run sends one command to the running bash and returns its output
	// (stderr included) and its "__rc=N pid=P" line.
	run := func(c string) (string, string) {
		out := strings.TrimRight(sh.run(fmt.Sprintf("{ %s ; } 2>&1; echo \"__rc=$? pid=$$\"", c)), "\n")
		lines := strings.Split(out, "\n")
		return strings.Join(lines[:len(lines)-1], "\n"), lines[len(lines)-1]
	}
	pid := strings.TrimSpace(sh.run("echo pid=$$"))
	if _, rc := run("cd " + shq(mnt)); rc != "__rc=0 "+pid {
		t.Fatalf("bash: cd %s: %s", mnt, rc)
	}
	check := func(step, c, wantRC, wantOut string) {
		t.Helper()
		out, rc := run(c)
		if rc != "__rc="+wantRC+" "+pid || !strings.Contains(out, wantOut) {
			t.Errorf("%s: %q gave %q %q; want rc=%s (same %s) and output containing %q", step, c, rc, out, wantRC, pid, wantOut)
		}
	}
	check("workspace-write", "echo one > f1", "0", "")
	check("workspace-write", "echo more >> f1", "0", "")
	ro := compileT(t, policy.Spec{Mode: policy.ModeReadOnly, Primary: backing, Temp: []string{tempAreaT(t)}})
	rw := srv.Policy()
	srv.SetPolicy(ro)
	check("after swap to read-only", "echo two > f2", "1", "Read-only file system")
	check("after swap to read-only", "echo three >> f1", "1", "Read-only file system")
	check("after swap to read-only", "mkdir d", "1", "Read-only file system")
	check("after swap to read-only", "cat f1", "0", "one\nmore")
	srv.SetPolicy(rw)
	check("after swap back", "echo four > f3", "0", "")
	check("after swap back", "mkdir d", "0", "")
	for p, want := range map[string]string{"f1": "one\nmore\n", "f3": "four\n"} {
		if b, err := os.ReadFile(filepath.Join(backing, p)); err != nil || string(b) != want {
			t.Errorf("backing/%s = %q (%v), want %q", p, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(backing, "f2")); !os.IsNotExist(err) {
		t.Errorf("backing/f2 exists after a write refused by the swapped policy (err=%v)", err)
	}
	if st := srv.Stats(); len(st.Denials) == 0 {
		t.Errorf("Stats().Denials is empty after 3 denials: %+v", st)
	} else {
		t.Logf("denials: %v", st.Denials)
	}
}

// resolveInMount resolves link text as the kernel would inside the mount.
func resolveInMount(linkPath, text string) string {
	if filepath.IsAbs(text) {
		return text
	}
	return filepath.Dir(linkPath) + "/" + text // no lexical cleaning of ".."
}

func populateInRootLinks(mntPath string) func(t *testing.T, b string) {
	return func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "a/b/c"), 0o755)
		writeFileT(t, filepath.Join(b, "a/b/c/target"), "T\n", 0o644)
		symlinkT(t, "a/b/c", filepath.Join(b, "l1"))                                    // relative, in root
		symlinkT(t, filepath.Join(b, "a/b"), filepath.Join(b, "l2"))                    // absolute backing path
		symlinkT(t, "../../l1", filepath.Join(b, "a/b/rel2"))                           // chain through l1
		symlinkT(t, filepath.Join(mntPath, "a/b/c/target"), filepath.Join(b, "viamnt")) // names the mountpoint
		symlinkT(t, "l1/target", filepath.Join(b, "ft"))                                // file through a link
	}
}

func TestSymlinksInRoot(t *testing.T) {
	var mntPath string
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mntPath = filepath.Join(filepath.Dir(b), "mnt")
		populateInRootLinks(mntPath)(t, b)
	}))
	ino := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Errorf("stat %s: %v", p, err)
		}
		return st.Ino
	}
	cases := []struct{ link, target string }{
		{"l1", "a/b/c"}, {"l2", "a/b"}, {"a/b/rel2", "a/b/c"}, {"viamnt", "a/b/c/target"}, {"ft", "a/b/c/target"},
	}
	for _, c := range cases {
		lp := filepath.Join(mnt, c.link)
		st := lstatT(t, lp)
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			t.Errorf("lstat %s: mode %#o, want a symlink (in-root links are shown as links)", c.link, st.Mode)
			continue
		}
		text, err := os.Readlink(lp)
		if err != nil {
			t.Errorf("readlink %s: %v", c.link, err)
			continue
		}
		r := resolveInMount(lp, text)
		if filepath.IsAbs(text) && !strings.HasPrefix(text, mnt+"/") {
			t.Errorf("readlink %s = %q: an absolute text outside the mount %s", c.link, text, mnt)
		}
		want := ino(filepath.Join(backing, c.target))
		if got := ino(r); got != want {
			t.Errorf("readlink %s = %q reaches ino %d, want %d (backing %s)", c.link, text, got, want, c.target)
		}
		if got := ino(lp); got != want {
			t.Errorf("stat %s (follow) ino %d, want %d", c.link, got, want)
		}
		out := shOK(t, mnt, "readlink -f "+shq(c.link))
		if out != filepath.Join(mnt, c.target)+"\n" {
			t.Errorf("readlink -f %s (kernel walk in child) = %q, want %q", c.link, out, filepath.Join(mnt, c.target)+"\n")
		}
	}
	// link/.. is the physical parent of the target.
	for _, c := range []struct{ p, parent string }{{"l1/..", "a/b"}, {"l2/..", "a"}, {"a/b/rel2/..", "a/b"}} {
		// mnt + "/" + p: filepath.Join would clean "l1/.." away lexically
		if got, want := ino(mnt+"/"+c.p), ino(filepath.Join(backing, c.parent)); got != want {
			t.Errorf("stat mnt/%s ino %d, want %d (backing %s)", c.p, got, want, c.parent)
		}
		out := shOK(t, mnt, "cd -P "+shq(c.p)+" && pwd -P")
		if out != filepath.Join(mnt, c.parent)+"\n" {
			t.Errorf("cd -P %s && pwd -P = %q, want %q", c.p, out, filepath.Join(mnt, c.parent)+"\n")
		}
	}
	b, err := os.ReadFile(filepath.Join(mnt, "viamnt"))
	if wantOK(t, "read viamnt", err) && string(b) != "T\n" {
		t.Errorf("read viamnt = %q, want T", b)
	}
	// links created through the mount
	if wantOK(t, "symlink a/b -> new1", syscall.Symlink("a/b", filepath.Join(mnt, "new1"))) {
		if text, _ := os.Readlink(filepath.Join(mnt, "new1")); text != "a/b" {
			t.Errorf("readlink new1 = %q, want the original text a/b (it already reaches the object)", text)
		}
	}
	if wantOK(t, "symlink mnt/a/b/c -> new2 (absolute under the mountpoint)", syscall.Symlink(filepath.Join(mnt, "a/b/c"), filepath.Join(mnt, "new2"))) {
		if out := shOK(t, mnt, "readlink -f new2; cat new2/target"); out != filepath.Join(mnt, "a/b/c")+"\nT\n" {
			t.Errorf("new2: %q, want %q", out, filepath.Join(mnt, "a/b/c")+"\nT\n")
		}
	}
}

// The resolve mode (links served as their targets) is gone: asking for it
// is a one-line error naming the input.
func TestSymlinkModeResolveRefused(t *testing.T) {
	_, err := fusefs.ParseSymlinkMode("resolve")
	if err == nil || err.Error() != `symlink mode "resolve": removed (links are always shown as links); use contain or follow` {
		t.Errorf("ParseSymlinkMode(resolve) = %v", err)
	}
	for _, m := range []string{"", "contain", "follow"} {
		if _, err := fusefs.ParseSymlinkMode(m); err != nil {
			t.Errorf("ParseSymlinkMode(%q): %v", m, err)
		}
	}
}

// syncBuffer is an io.Writer safe for the server's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPolicyLiveWidenNarrow: a session mounted read-only is not kernel-ro;
// a running `while` loop (a child process) gets EROFS from the server
// (logged with rule and pid, counted), its next write after the policy is
// widened succeeds, and after narrowing again it fails with EROFS.
func TestPolicyLiveWidenNarrow(t *testing.T) {
	var logs syncBuffer
	dir := canonT(t, t.TempDir())
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	mkdirT(t, backing, 0o755)
	mkdirT(t, mnt, 0o755)
	spec := specFor(t, backing)
	spec.Mode = policy.ModeReadOnly
	srv := mountCfgT(t, fusefs.Config{Root: backing, Mountpoint: mnt, Session: "live",
		Policy: compileT(t, spec), Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	// The loop reads a number per line and writes f<N> in the mount,
	// answering "ok N" or "fail N <error>" (never chdir into the mount in
	// this process: the child does).
	loop := exec.Command("bash", "--noprofile", "--norc", "-c",
		`cd "$1" || exit 9; echo "pid $$"; while read -r n; do if echo "$n" 2>/dev/null > "f$n"; then echo "ok $n"; else echo "fail $n"; fi; done`, "loop", mnt)
	loop.Dir = "/"
	in, err := loop.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := loop.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); loop.Wait() })
	out := bufio.NewReader(outPipe)
	readLine := func() string {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("loop: %v (so far %q)", err, l)
		}
		return strings.TrimSuffix(l, "\n")
	}
	pidLine := readLine()
	pid := strings.TrimPrefix(pidLine, "pid ")
	step := func(n int, want string) {
		t.Helper()
		fmt.Fprintf(in, "%d\n", n)
		if got := readLine(); !strings.HasPrefix(got, want) {
			t.Errorf("write %d: loop said %q, want prefix %q", n, got, want)
		}
	}
	step(1, "fail 1")
	wide := spec
	wide.Mode = policy.ModeWorkspaceWrite
	srv.SetPolicy(compileT(t, wide))
	step(2, "ok 2")
	srv.SetPolicy(compileT(t, spec))
	step(3, "fail 3")
	if b, err := os.ReadFile(filepath.Join(backing, "f2")); err != nil || string(b) != "2\n" {
		t.Errorf("backing/f2 = %q (%v), want \"2\\n\"", b, err)
	}
	for _, n := range []string{"f1", "f3"} {
		if _, err := os.Lstat(filepath.Join(backing, n)); !os.IsNotExist(err) {
			t.Errorf("backing/%s exists after a refused write (err=%v)", n, err)
		}
	}
	// Both refusals were the server's (EROFS): logged with the session, the
	// physical path, the rule and the loop's pid (echo and the redirection
	// are bash's own, no fork), and counted.
	var denials []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=denied") && strings.Contains(l, "rule=primary:read-only") && strings.Contains(l, "errno=EROFS") {
			denials = append(denials, l)
		}
	}
	if len(denials) < 2 {
		t.Errorf("want >= 2 logged EROFS denials with rule primary:read-only, got %d; log:\n%s", len(denials), logs.String())
	}
	for _, l := range denials {
		if !strings.Contains(l, "pid="+pid) || !strings.Contains(l, "session=live") || !strings.Contains(l, "path="+backing+"/f") {
			t.Errorf("denial line lacks session, physical path or caller pid (loop pid %s): %s", pid, l)
		}
	}
	if st := srv.Stats(); st.Denials["primary:read-only"] < 2 {
		t.Errorf("Stats().Denials = %v, want primary:read-only >= 2", st.Denials)
	}
}
