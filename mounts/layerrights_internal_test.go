package mounts

import (
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// nobodyUID is the session user of these tests.
const nobodyUID = 65534

// setLayerActing sets the layerActing hook for the test.
func setLayerActing(t *testing.T, f func(rel string)) {
	t.Helper()
	layerActing = f
	t.Cleanup(func() { layerActing = nil })
}

// asSession runs f as the session's user 65534 (what its processes could
// do through its mount, on the merged overlay open as mfd); a failure
// ends the test.
func asSession(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := fusefs.RunAs(fusefs.Cred{Uid: nobodyUID, Gid: nobodyUID}, f); err != nil {
		t.Fatalf("as 65534: %s: %v", what, err)
	}
}

// rightsProject makes a project owned by 65534 (mode 0755) holding a
// root-owned tree T (T/precious, 0600) that 65534 cannot remove, a
// root-owned 0600 file secret it cannot read, and its own file m; it
// returns the project and its layer, served to 65534.
func rightsProject(t *testing.T) (string, *Layer) {
	t.Helper()
	proj := filepath.Join(t.TempDir(), "proj")
	for _, d := range []string{proj, filepath.Join(proj, "T")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range map[string]os.FileMode{"T/precious": 0o600, "secret": 0o600, "m": 0o644} {
		if err := os.WriteFile(filepath.Join(proj, p), []byte(p+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{proj, filepath.Join(proj, "m")} {
		if err := os.Chown(p, nobodyUID, nobodyUID); err != nil {
			t.Fatal(err)
		}
	}
	l := layerFor(t, proj)
	l.Users = []uint32{nobodyUID}
	return proj, l
}

// mergedFd opens the layer's merged overlay (O_PATH), closed at the end.
func mergedFd(t *testing.T, l *Layer) int {
	t.Helper()
	fd, err := openRoot(l.Merged())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestLayerDiscardSwapUsers (attack F2): the session's user (65534, a
// --users session) renames, between a discard's diff and its action, a
// project object it has no rights on into the path being discarded: the
// root-owned tree T into its new directory a (which the discard removes),
// the root-owned 0600 file secret into its chmodded file m (whose project
// attributes the discard puts back). A discard acting as root removed T
// in the layer, which the next commit removed from the project, and made
// secret 65534's, mode 0644, readable in the layer. Acting with the
// user's rights, it is refused (EACCES: T's file is root's; EPERM: secret
// is not the user's to chmod), T and secret stay as they were in the
// session's view, and a commit of everything leaves T/precious in the
// project.
func TestLayerDiscardSwapUsers(t *testing.T) {
	proj, l := rightsProject(t)
	mfd := mergedFd(t, l)
	asSession(t, "mkdir a, chmod m", func() error {
		if err := unix.Mkdirat(mfd, "a", 0o755); err != nil {
			return err
		}
		return unix.Fchmodat(mfd, "m", 0o600, 0)
	})
	swap := map[string][2]string{"a": {"a", "T"}, "m": {"m", "secret"}}
	setLayerActing(t, func(rel string) {
		s, ok := swap[rel]
		if !ok {
			return
		}
		asSession(t, "swap "+s[1]+" into "+s[0], func() error {
			if err := unix.Renameat(mfd, s[0], mfd, s[0]+".away"); err != nil {
				return err
			}
			return unix.Renameat(mfd, s[1], mfd, s[0])
		})
	})
	res, err := l.Discard([]string{"a", "m"})
	if err != nil {
		t.Fatal(err)
	}
	setLayerActing(t, nil)
	reasons := map[string]string{}
	for _, r := range res.Refused {
		reasons[r.Path] = r.Reason
	}
	if len(res.Applied) != 0 || reasons["a"] != "permission denied" || reasons["m"] != "operation not permitted" {
		t.Fatalf("discard a m with T and secret swapped in: applied %v, refused %v; want a refused with EACCES (permission denied), m with EPERM (operation not permitted)", res.Applied, res.Refused)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(mfd, "a/precious", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != 0 {
		t.Fatalf("T's file in the session (at a/precious) after the discard: uid %d, %v; want root's, there", st.Uid, err)
	}
	if err := unix.Fstatat(mfd, "m", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != 0 || st.Mode&0o7777 != 0o600 {
		t.Fatalf("secret in the session (at m) after the discard: %d %o, %v; want root's, 0600", st.Uid, st.Mode&0o7777, err)
	}
	var read error
	asSession(t, "read secret", func() error {
		fd, err := unix.Openat(mfd, "m", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		read = err
		return nil
	})
	if read != syscall.EACCES {
		t.Fatalf("65534 opens secret (at m) in the session: %v, want EACCES", read)
	}
	// The session puts everything back; a commit of all it did.
	asSession(t, "swap back", func() error {
		for _, s := range swap {
			if err := unix.Renameat(mfd, s[0], mfd, s[1]); err != nil {
				return err
			}
			if err := unix.Renameat(mfd, s[0]+".away", mfd, s[0]); err != nil {
				return err
			}
		}
		return nil
	})
	if _, err := l.Commit(nil, true, allowAll); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "T/precious")); err != nil || string(b) != "T/precious\n" {
		t.Fatalf("T/precious in the project after the commit: %q %v", b, err)
	}
	if err := unix.Stat(filepath.Join(proj, "secret"), &st); err != nil || st.Uid != 0 || st.Mode&0o7777 != 0o600 {
		t.Fatalf("secret in the project after the commit: %d %o, %v; want root's, 0600", st.Uid, st.Mode&0o7777, err)
	}
}

// TestLayerCommitUsersRights: a commit in a session served to 65533 and
// 65534 does to the project what those users could (each object as its
// owner first, then the other): their new file and directory are theirs,
// 65534's own file gets its new content, a root-owned 0666 file 65534
// wrote in a root-owned directory keeps its owner and mode (the daemon
// replaces it once 65534 may write it); what only root could do is
// refused with the kernel's errno and left in the layer: T removed (its
// file is root's: EACCES), root's secret made 0644 and root's new file
// (chown: EPERM), root's 0644 file rewritten (65534 may not write it).
func TestLayerCommitUsersRights(t *testing.T) {
	proj, l := rightsProject(t)
	l.Users = []uint32{65533, nobodyUID}
	if err := os.Mkdir(filepath.Join(proj, "R"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"R/shared": 0o666, "R/ro": 0o644} {
		if err := os.WriteFile(filepath.Join(proj, p), []byte("old\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(proj, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	mfd := mergedFd(t, l)
	m := l.Merged()
	// What root does in the layer (a root process in the session, or a
	// verb racing it before this fix).
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.RemoveAll(filepath.Join(m, "T")))
	must(os.Chmod(filepath.Join(m, "secret"), 0o644))
	must(os.WriteFile(filepath.Join(m, "rootnew"), []byte("r\n"), 0o644))
	must(os.WriteFile(filepath.Join(m, "R/ro"), []byte("root's\n"), 0o644))
	// What 65534 does through its mount.
	asSession(t, "its changes", func() error {
		fd, err := unix.Openat(mfd, "R/shared", unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.Write(fd, []byte("new\n"))
		unix.Close(fd)
		if fd, err = unix.Openat(mfd, "mine", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o640); err != nil {
			return err
		}
		unix.Write(fd, []byte("mine\n"))
		unix.Close(fd)
		if fd, err = unix.Openat(mfd, "m", unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		unix.Write(fd, []byte("more\n"))
		unix.Close(fd)
		return unix.Mkdirat(mfd, "d", 0o750)
	})
	res, err := l.Commit(nil, false, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range res.Applied {
		got[p] = "applied"
	}
	for _, r := range res.Refused {
		got[r.Path] = r.Reason
	}
	want := map[string]string{
		"d": "applied", "m": "applied", "mine": "applied", "R/shared": "applied",
		"T": "permission denied", "secret": "operation not permitted", "rootnew": "operation not permitted",
		"R/ro": "permission denied",
	}
	if !reflect.DeepEqual(got, want) || len(res.Conflicts) != 0 {
		t.Fatalf("commit: %v (conflicts %v), want %v", got, res.Conflicts, want)
	}
	type obj struct {
		uid, mode uint32
		data      string
	}
	for p, w := range map[string]obj{
		"T/precious": {0, 0o600, "T/precious\n"}, "secret": {0, 0o600, "secret\n"},
		"R/shared": {0, 0o666, "new\n"}, "R/ro": {0, 0o644, "old\n"},
		"mine": {nobodyUID, 0o640, "mine\n"}, "m": {nobodyUID, 0o644, "m\nmore\n"}, "d": {nobodyUID, 0o750 | unix.S_IFDIR, ""},
	} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(proj, p), &st); err != nil {
			t.Errorf("%s in the project: %v", p, err)
			continue
		}
		data := ""
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			b, _ := os.ReadFile(filepath.Join(proj, p))
			data = string(b)
		} else {
			w.mode &^= unix.S_IFDIR
		}
		if st.Uid != w.uid || st.Gid != w.uid || st.Mode&0o7777 != w.mode || data != w.data {
			t.Errorf("%s in the project: %d:%d %o %q, want %d:%d %o %q", p, st.Uid, st.Gid, st.Mode&0o7777, data, w.uid, w.uid, w.mode, w.data)
		}
	}
	if _, err := os.Lstat(filepath.Join(proj, "rootnew")); !os.IsNotExist(err) {
		t.Errorf("rootnew in the project: %v, want ENOENT", err)
	}
}

// TestLayerRollbackSwapUsers: a rollback makes the session's view its
// checkpoint's with the session users' rights too: the session swaps
// root's tree T into its new directory a (which the rollback removes) and
// root's 0600 file twin (the same bytes as m) into m (whose checkpoint
// attributes the rollback sets): both refused (EACCES, EPERM); T keeps its
// file, twin stays root's 0600, unreadable to 65534.
func TestLayerRollbackSwapUsers(t *testing.T) {
	proj, l := rightsProject(t)
	if err := os.WriteFile(filepath.Join(proj, "twin"), []byte("m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mfd := mergedFd(t, l)
	asSession(t, "chmod m", func() error { return unix.Fchmodat(mfd, "m", 0o600, 0) })
	if _, err := l.Checkpoint("c0"); err != nil {
		t.Fatal(err)
	}
	asSession(t, "chmod m, mkdir a", func() error {
		if err := unix.Fchmodat(mfd, "m", 0o640, 0); err != nil {
			return err
		}
		return unix.Mkdirat(mfd, "a", 0o755)
	})
	swap := map[string][2]string{"a": {"a", "T"}, "m": {"m", "twin"}}
	setLayerActing(t, func(rel string) {
		if s, ok := swap[rel]; ok {
			asSession(t, "swap "+s[1]+" into "+s[0], func() error {
				if err := unix.Renameat(mfd, s[0], mfd, s[0]+".away"); err != nil {
					return err
				}
				return unix.Renameat(mfd, s[1], mfd, s[0])
			})
		}
	})
	res, err := l.Rollback("c0")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, r := range res.Refused {
		reasons[r.Path] = r.Reason
	}
	if reasons["a"] != "permission denied" || reasons["m"] != "operation not permitted" {
		t.Fatalf("rollback with T and twin swapped in: applied %v, refused %v; want a refused with EACCES (permission denied), m with EPERM (operation not permitted)", res.Applied, res.Refused)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(mfd, "a/precious", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != 0 {
		t.Fatalf("T's file in the session (at a/precious) after the rollback: uid %d, %v; want root's, there", st.Uid, err)
	}
	if err := unix.Fstatat(mfd, "m", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != 0 || st.Mode&0o7777 != 0o600 {
		t.Fatalf("twin in the session (at m) after the rollback: %d %o, %v; want root's, 0600", st.Uid, st.Mode&0o7777, err)
	}
}
