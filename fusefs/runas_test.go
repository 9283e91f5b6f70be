package fusefs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// TestRunAs: work run as uid 65534 is decided as that user's: EACCES in a
// root-owned 0755 directory, its own file made its own, EPERM for a
// trusted.* attribute (CAP_SYS_ADMIN gone too, which setfsuid alone
// keeps) and for a chmod of root's file (CAP_FOWNER); the caller is root
// again afterwards (it makes a file there).
func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	rootDir, open := filepath.Join(dir, "root"), filepath.Join(dir, "open")
	for _, d := range []string{rootDir, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(open, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(open, "roots")
	if err := os.WriteFile(rootFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Descriptors opened by root: the user's rights decide from there
	// (the test's temp directory is 0700).
	rfd, err := unix.Open(rootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	ofd, err := unix.Open(open, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ofd)
	c := fusefs.Cred{Uid: nobody, Gid: nobody}
	var mkRoot, mkOwn, trusted, chmodRoot error
	err = fusefs.RunAs(c, func() error {
		if fd, err := unix.Openat(rfd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err == nil {
			unix.Close(fd)
		} else {
			mkRoot = err
		}
		fd, err := unix.Openat(ofd, "mine", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			mkOwn = err
			return nil
		}
		defer unix.Close(fd)
		trusted = unix.Fsetxattr(fd, "trusted.x", []byte("y"), 0)
		chmodRoot = unix.Fchmodat(ofd, "roots", 0o666, 0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mkRoot != syscall.EACCES || mkOwn != nil || trusted != syscall.EPERM || chmodRoot != syscall.EPERM {
		t.Fatalf("as 65534: create in root's dir %v (want EACCES), own create %v, trusted.x %v (want EPERM), chmod root's %v (want EPERM)",
			mkRoot, mkOwn, trusted, chmodRoot)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(open, "mine"), &st); err != nil || st.Uid != nobody || st.Gid != nobody {
		t.Fatalf("mine: %d:%d %v, want 65534:65534", st.Uid, st.Gid, err)
	}
	// The errors of f come back as they are.
	if err := fusefs.RunAs(c, func() error { return syscall.ENOTEMPTY }); err != syscall.ENOTEMPTY {
		t.Fatalf("RunAs's error: %v, want ENOTEMPTY", err)
	}
	if err := os.WriteFile(filepath.Join(rootDir, "after"), nil, 0o600); err != nil {
		t.Fatalf("root after RunAs: %v", err)
	}
}
