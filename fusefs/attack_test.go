package fusefs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/policy"
)

// Regression tests for attacks found in review: each asserts the exact
// errno and that nothing changed where it must not.

// A link to a directory that holds the mountpoint is a link into the host
// view, where the mountpoint is a link back into the session mount: the
// server never walks its own mounts (a rename there deadlocks on the
// kernel's rename lock; a descriptor pins the mount), and the host view's
// own mountpoint is hidden.
func TestAttackLinkToMountpointAncestor(t *testing.T) {
	backing, mnt, _ := mountT(t, withMode(policy.ModeFullAccess), withPopulate(func(t *testing.T, b string) {
		symlinkT(t, filepath.Dir(b), filepath.Join(b, "up"))
		symlinkT(t, "/", filepath.Join(b, "slash"))
		writeFileT(t, filepath.Join(b, "a.txt"), "a\n", 0o644)
	}))
	hv := hostViewOf(mnt)
	for p, want := range map[string]string{"up": hv + filepath.Dir(backing), "slash": hv} {
		if got, err := os.Readlink(filepath.Join(mnt, p)); err != nil || got != want {
			t.Errorf("readlink %s = %q, %v; want %q", p, got, err, want)
		}
	}
	if got, err := os.Readlink(filepath.Join(mnt, "up/mnt")); err != nil || got != mnt {
		t.Errorf("readlink up/mnt = %q, %v; want the session mount %q", got, err, mnt)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "up/mnt/a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("read up/mnt/a.txt = %q, %v", b, err)
	}
	_, err := os.Lstat(filepath.Join(mnt, "up", filepath.Base(hv)))
	wantErrno(t, "lstat the host view's own mountpoint in itself", err, syscall.EACCES)
	if wantOK(t, "symlink to the mountpoint's parent", os.Symlink(filepath.Dir(mnt), filepath.Join(mnt, "up2"))) {
		if got, _ := os.Readlink(filepath.Join(backing, "up2")); got != filepath.Dir(mnt) {
			t.Errorf("backing up2 = %q, want %q", got, filepath.Dir(mnt))
		}
	}
	// The server is not pinned by its own mount: unmountT in Cleanup must
	// succeed without force (it fails the test otherwise).
}

// A directory moved out of the root on the host is judged where it is now,
// not where the node tree last saw it.
func TestAttackHostMovesDirectoryOut(t *testing.T) {
	outside := canonT(t, t.TempDir())
	backing, mnt, _ := mountT(t)
	// A running shell holds its cwd in mnt/e while the host moves e out.
	mkdirT(t, filepath.Join(backing, "e"), 0o755)
	sh := startShell(t)
	if out := sh.run("cd " + shq(filepath.Join(mnt, "e")) + "; echo $?"); out != "0\n" {
		t.Fatalf("cd: %q", out)
	}
	if err := os.Rename(filepath.Join(backing, "e"), filepath.Join(outside, "e")); err != nil {
		t.Fatal(err)
	}
	got := sh.run(`echo x > new 2>/dev/null; echo $?; mkdir nd 2>/dev/null; echo $?; chmod 777 . 2>/dev/null; echo $?`)
	if got != "1\n1\n1\n" {
		t.Errorf("writes in a directory moved out of the root: exit codes %q, want all 1 (EROFS)", got)
	}
	if names := names(t, filepath.Join(outside, "e")); len(names) != 0 {
		t.Errorf("outside directory got entries %v", names)
	}
	if st := lstatT(t, filepath.Join(outside, "e")); st.Mode&0o777 != 0o755 {
		t.Errorf("outside directory mode %o, want 755", st.Mode&0o777)
	}
}

// A .git made after the policy compiled cannot lead around the protection:
// not as a symlink, not as a gitdir pointer file; commondir is protected.
func TestAttackLateGitAndCommondir(t *testing.T) {
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "rg/hooks"), 0o755)
		mkdirT(t, filepath.Join(b, "sub/.git"), 0o755) // a nested repo is its own business
	}))
	wantErrno(t, "symlink .git", os.Symlink("rg", filepath.Join(mnt, ".git")), syscall.EACCES)
	wantErrno(t, "create .git pointer", os.WriteFile(filepath.Join(mnt, ".git"), []byte("gitdir: rg\n"), 0o644), syscall.EACCES)
	if err := os.Mkdir(filepath.Join(mnt, ".git"), 0o755); err != nil {
		t.Fatalf("mkdir .git: %v", err)
	}
	wantErrno(t, "create .git/commondir", os.WriteFile(filepath.Join(mnt, ".git/commondir"), []byte("../rg\n"), 0o644), syscall.EACCES)
	wantErrno(t, "mkdir .git/hooks", os.Mkdir(filepath.Join(mnt, ".git/hooks"), 0o755), syscall.EACCES)
	if err := os.WriteFile(filepath.Join(mnt, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Errorf("write .git/HEAD: %v (the rest of .git stays writable)", err)
	}
}

// A link into a none root is data: creating one is allowed whether its
// target exists or not, and following it gives EACCES either way (no
// existence oracle).
func TestAttackNoneRootOracle(t *testing.T) {
	secret := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(secret, "s.txt"), "s\n", 0o600)
	_, mnt, _ := mountT(t, withRoot(secret, policy.AccessNone))
	for name, target := range map[string]string{"x": filepath.Join(secret, "s.txt"), "y": filepath.Join(secret, "nope.txt")} {
		wantOK(t, "symlink into a none root", os.Symlink(target, filepath.Join(mnt, name)))
		_, err := os.Stat(filepath.Join(mnt, name))
		wantErrno(t, "stat through a link into a none root", err, syscall.EACCES)
		_, err = os.ReadFile(filepath.Join(mnt, name))
		wantErrno(t, "read through a link into a none root", err, syscall.EACCES)
	}
}
