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

// A link to a directory that holds the mountpoint is not served in place:
// the server's own calls below it would walk its own mount (a rename there
// deadlocks on the kernel's rename lock; a descriptor pins the mount).
func TestAttackLinkToMountpointAncestor(t *testing.T) {
	backing, mnt, _ := mountT(t, withMode(policy.ModeFullAccess), withPopulate(func(t *testing.T, b string) {
		symlinkT(t, filepath.Dir(b), filepath.Join(b, "up"))
		symlinkT(t, "/", filepath.Join(b, "slash"))
		writeFileT(t, filepath.Join(b, "a.txt"), "a\n", 0o644)
	}))
	for _, p := range []string{"up", "slash", "up/mnt/a.txt"} {
		_, err := os.Lstat(filepath.Join(mnt, p))
		wantErrno(t, "lstat "+p, err, syscall.EACCES)
	}
	wantErrno(t, "symlink to the mountpoint's parent",
		os.Symlink(filepath.Dir(mnt), filepath.Join(mnt, "up2")), syscall.EACCES)
	if _, err := os.Lstat(filepath.Join(backing, "up2")); !os.IsNotExist(err) {
		t.Errorf("up2 was created on the backing side: %v", err)
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

// A link into a none root gives EACCES whether its target exists or not:
// creating links is no existence oracle.
func TestAttackNoneRootOracle(t *testing.T) {
	secret := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(secret, "s.txt"), "s\n", 0o600)
	_, mnt, _ := mountT(t, withRoot(secret, policy.AccessNone))
	wantErrno(t, "symlink to an existing file in a none root",
		os.Symlink(filepath.Join(secret, "s.txt"), filepath.Join(mnt, "x")), syscall.EACCES)
	wantErrno(t, "symlink to a missing file in a none root",
		os.Symlink(filepath.Join(secret, "nope.txt"), filepath.Join(mnt, "y")), syscall.EACCES)
}
