package fusefs_test

// Issue 10: levers that let the kernel answer from its own caches. Each has
// a test that a host-side change is still seen (the watcher's invalidation,
// after SyncHostChanges) and that a change through the mount is seen by
// another process at once. No test here depends on timing.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// bigDir is large enough that listing it takes many READDIRPLUS requests,
// each served on its own handle at the kernel's offset (FUSE_NO_OPENDIR).
const bigDir = 300

func withBigDir(t *testing.T, b string) {
	mkdirT(t, filepath.Join(b, "d"), 0o755)
	for i := 0; i < bigDir; i++ {
		writeFileT(t, filepath.Join(b, fmt.Sprintf("d/file-with-a-longish-name-%04d", i)), "x", 0o644)
	}
}

// sortedNames lists dir on the host, sorted as ls(1) in the C locale does.
func sortedNames(t *testing.T, dir string) string {
	t.Helper()
	n := names(t, dir)
	sort.Strings(n)
	return strings.Join(n, "\n") + "\n"
}

// listCmd is a shell command printing the names in dir, sorted bytewise. It
// only reads the directory (no stat of it, unlike ls(1), whose GETATTR would
// refresh the mtime and so drop a stale listing without the watcher's help).
func listCmd(dir string) string {
	return `python3 -c 'import os, sys; print("\n".join(sorted(os.listdir(sys.argv[1]))))' ` + shq(dir)
}

// TestCachedListingThroughMount: with directories opened by the kernel alone
// (no OPENDIR) and listings kept in its page cache, a change one process
// makes through the mount is in the next listing of another process, which
// had listed the directory before.
func TestCachedListingThroughMount(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: skipped with -short")
	}
	backing, mnt, _ := mountT(t, withPopulate(withBigDir))
	d := filepath.Join(mnt, "d")
	lister := startShell(t)
	ls := listCmd(d)
	if got, want := lister.run(ls), sortedNames(t, filepath.Join(backing, "d")); got != want {
		t.Fatalf("first listing differs from the backing directory:\n%s", abbrev(got, 500))
	}
	// Another process changes the directory through the mount.
	shOK(t, d, `set -e
touch new-file
mkdir new-dir
mv file-with-a-longish-name-0001 renamed
rm file-with-a-longish-name-0002
ln -s renamed new-link
mv new-dir ../moved-out`)
	want := sortedNames(t, filepath.Join(backing, "d"))
	for _, n := range []string{"new-file", "renamed", "new-link"} {
		if !strings.Contains(want, n+"\n") {
			t.Fatalf("backing directory lacks %s: the changes did not happen", n)
		}
	}
	if got := lister.run(ls); got != want {
		t.Errorf("listing after changes through the mount:\n%s\nwant:\n%s", abbrev(got, 600), abbrev(want, 600))
	}
	if got := lister.run(listCmd(mnt)); got != "d\nmoved-out\n" {
		t.Errorf("root listing after mv out: %q, want %q", got, "d\nmoved-out\n")
	}
	// fsync(2) of a directory the kernel opened without the server.
	if got := lister.run(`python3 -c 'import os; fd = os.open("` + d + `", os.O_RDONLY | os.O_DIRECTORY); os.fsync(fd); print("synced")'`); got != "synced\n" {
		t.Errorf("fsync of a directory: %q", got)
	}
	// Listing by descriptor (fdopendir) and by path agree, with no entry
	// twice.
	script := `import os, sys
d = sys.argv[1]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
byPath, byFd = os.listdir(d), os.listdir(fd)
print(len(byPath), len(set(byPath)) == len(byPath), sorted(byPath) == sorted(byFd))`
	wantLine := fmt.Sprintf("%d True True\n", strings.Count(want, "\n"))
	if got := lister.run("python3 -c " + shq(script) + " " + shq(d)); got != wantLine {
		t.Errorf("listdir by path and by descriptor: %q, want %q", got, wantLine)
	}
}

// TestCachedListingHostChanges: a listing the kernel keeps is dropped when
// the directory changes on the host; the next listing by a process that had
// listed it before shows the change once SyncHostChanges returns.
func TestCachedListingHostChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: skipped with -short")
	}
	backing, mnt, srv := mountT(t, withPopulate(withBigDir))
	d := filepath.Join(mnt, "d")
	lister := startShell(t)
	ls := listCmd(d)
	lister.run(ls)
	bd := filepath.Join(backing, "d")
	writeFileT(t, filepath.Join(bd, "host-new"), "h", 0o644)
	mkdirT(t, filepath.Join(backing, "elsewhere"), 0o755)
	writeFileT(t, filepath.Join(backing, "elsewhere/inner"), "i", 0o644)
	if err := os.Rename(filepath.Join(backing, "elsewhere"), filepath.Join(bd, "moved-in")); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 60; i++ {
		if err := os.Remove(filepath.Join(bd, fmt.Sprintf("file-with-a-longish-name-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	if got, want := lister.run(ls), sortedNames(t, bd); got != want {
		t.Errorf("listing after host changes:\n%s\nwant:\n%s", abbrev(got, 600), abbrev(want, 600))
	}
	if got := lister.run(listCmd(filepath.Join(d, "moved-in"))); got != "inner\n" {
		t.Errorf("listing of a directory moved in on the host: %q", got)
	}
}

// posixACL encodes an access ACL in the xattr format of
// system.posix_acl_access (include/uapi/linux/posix_acl_xattr.h): version 2,
// then (tag, perm, id) entries in the kernel's canonical order.
func posixACL(userPerm, namedUID, namedPerm, groupPerm, maskPerm, otherPerm uint16) []byte {
	const undefined = ^uint32(0)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(2))
	entry := func(tag, perm uint16, id uint32) {
		binary.Write(&b, binary.LittleEndian, tag)
		binary.Write(&b, binary.LittleEndian, perm)
		binary.Write(&b, binary.LittleEndian, id)
	}
	entry(0x01, userPerm, undefined)         // ACL_USER_OBJ
	entry(0x02, namedPerm, uint32(namedUID)) // ACL_USER
	entry(0x04, groupPerm, undefined)        // ACL_GROUP_OBJ
	entry(0x10, maskPerm, undefined)         // ACL_MASK
	entry(0x20, otherPerm, undefined)        // ACL_OTHER
	return b.Bytes()
}

func getxattrT(path, name string) ([]byte, error) {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// TestACLCachedByKernel: ACLs are answered from the kernel's cache
// (FUSE_POSIX_ACL), and that cache follows changes: one made on the host is
// seen after SyncHostChanges, one made through the mount by another process
// at once, and the mode's group bits follow the ACL mask as on ext4.
func TestACLCachedByKernel(t *testing.T) {
	const acl = "system.posix_acl_access"
	backing, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "data\n", 0o640)
	}))
	if !srv.Watched() {
		t.Skip("no inotify watcher (instance limit reached?): the kernel caches no ACLs then")
	}
	bf, mf := filepath.Join(backing, "f"), filepath.Join(mnt, "f")
	if _, err := getxattrT(mf, acl); errnoOf(err) != syscall.ENODATA {
		t.Fatalf("getxattr %s of a file without ACL: %v, want ENODATA", acl, err)
	}
	// The host grants user 65534 read.
	grant := posixACL(6, 65534, 4, 4, 4, 0)
	if err := unix.Setxattr(bf, acl, grant, 0); err != nil {
		if err == unix.EOPNOTSUPP {
			t.Skipf("backing file system has no POSIX ACLs: %v", err)
		}
		t.Fatal(err)
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	got, err := getxattrT(mf, acl)
	if !wantOK(t, "getxattr after the host set an ACL", err) {
		return
	}
	if !bytes.Equal(got, grant) {
		t.Errorf("ACL through the mount after a host change: %x, want %x", got, grant)
	}
	// Through the mount: widen the named entry and the mask to rw; another
	// process sees the new ACL and the mode's group bits (the mask) at once.
	widened := posixACL(6, 65534, 6, 4, 6, 0)
	if err := unix.Setxattr(mf, acl, widened, 0); err != nil {
		t.Fatalf("setxattr %s through the mount: %v", acl, err)
	}
	hexScript := `import os, sys; print(os.getxattr(sys.argv[1], "` + acl + `").hex(), oct(os.stat(sys.argv[1]).st_mode & 0o777))`
	want := fmt.Sprintf("%x 0o660\n", widened)
	if got := shOK(t, "/", "python3 -c "+shq(hexScript)+" "+shq(mf)); got != want {
		t.Errorf("another process through the mount: %q, want %q", got, want)
	}
	if got := shOK(t, "/", "python3 -c "+shq(hexScript)+" "+shq(bf)); got != want {
		t.Errorf("on the host: %q, want %q", got, want)
	}
	// The host removes the ACL: gone through the mount after SyncHostChanges.
	if err := unix.Removexattr(bf, acl); err != nil {
		t.Fatal(err)
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	if _, err := getxattrT(mf, acl); errnoOf(err) != syscall.ENODATA {
		t.Errorf("getxattr after the host removed the ACL: %v, want ENODATA", err)
	}
}

// TestAtimeKeptByBacking: the mount is noatime, yet a read through it updates
// the access time where it lives, on the backing file system (relatime
// there), and another process's stat through the mount shows it.
func TestAtimeKeptByBacking(t *testing.T) {
	backing, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "data\n", 0o644)
	}))
	bf := filepath.Join(backing, "f")
	old := unix.NsecToTimespec(time.Now().Add(-72 * time.Hour).UnixNano())
	if err := unix.UtimesNano(bf, []unix.Timespec{old, {Nsec: unix.UTIME_OMIT}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	mf := filepath.Join(mnt, "f")
	if got := shOK(t, "/", "stat -c %X "+shq(mf)); strings.TrimSpace(got) != fmt.Sprint(old.Sec) {
		t.Fatalf("atime through the mount before the read: %s, want %d", got, old.Sec)
	}
	if got := shOK(t, "/", "cat "+shq(mf)); got != "data\n" {
		t.Fatalf("cat: %q", got)
	}
	var st unix.Stat_t
	if err := unix.Stat(bf, &st); err != nil {
		t.Fatal(err)
	}
	if st.Atim.Sec <= old.Sec {
		t.Fatalf("backing atime after a read through the mount: %d, still the old %d", st.Atim.Sec, old.Sec)
	}
	if got := shOK(t, "/", "stat -c %X "+shq(mf)); strings.TrimSpace(got) != fmt.Sprint(st.Atim.Sec) {
		t.Errorf("atime through the mount after the read: %s, want the backing %d", got, st.Atim.Sec)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == mnt && !strings.Contains(","+f[3]+",", ",noatime,") {
			t.Errorf("mount options %q lack noatime", f[3])
		}
	}
}

// TestACLPermissionModel: on an --allow-other mount the kernel enforces the
// backing file's ACL for another user, and follows it when it changes on the
// host (after SyncHostChanges) or through the mount (at once).
func TestACLPermissionModel(t *testing.T) {
	const acl = "system.posix_acl_access"
	backing, mnt, srv := mountT(t, func(s *mountSetup) { s.cfg.AllowOther = true },
		withPopulate(func(t *testing.T, b string) {
			writeFileT(t, filepath.Join(b, "f"), "secret\n", 0o640)
		}))
	if !srv.Watched() {
		t.Skip("no inotify watcher (instance limit reached?): the kernel enforces no ACLs then")
	}
	// The test's temp directories are 0700: let user 65534 reach the mount.
	for d := filepath.Dir(mnt); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
	bf, mf := filepath.Join(backing, "f"), filepath.Join(mnt, "f")
	catAsNobody := func() string {
		t.Helper()
		cmd := exec.Command("cat", mf)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true,
			Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "error: " + strings.TrimSpace(string(out))
		}
		return string(out)
	}
	denied := "error: cat: " + mf + ": Permission denied"
	if got := catAsNobody(); got != denied {
		t.Fatalf("user 65534 reads a 0640 root file: %q, want %q", got, denied)
	}
	if err := unix.Setxattr(bf, acl, posixACL(6, 65534, 4, 4, 4, 0), 0); err != nil {
		if err == unix.EOPNOTSUPP {
			t.Skipf("backing file system has no POSIX ACLs: %v", err)
		}
		t.Fatal(err)
	}
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	if got := catAsNobody(); got != "secret\n" {
		t.Errorf("after the host granted user 65534 read by ACL: %q, want the content", got)
	}
	if err := unix.Removexattr(mf, acl); err != nil {
		t.Fatalf("removexattr %s through the mount: %v", acl, err)
	}
	if got := catAsNobody(); got != denied {
		t.Errorf("after the ACL was removed through the mount: %q, want %q", got, denied)
	}
}

// childServeEnv names the root a re-executed test binary serves (childServe).
const childServeEnv = "WSFS_TEST_CHILD_SERVE"

// childServe is the whole life of a test binary re-executed as a server:
// mount the root at the mountpoint in $WSFS_TEST_CHILD_MNT, say "ready"
// and the transport it serves on (Server.Transport), serve until killed.
func childServe(root string) {
	pol, err := policy.Compile(policy.Spec{Primary: root, Temp: []string{}})
	cfg := fusefs.Config{Root: root, Mountpoint: os.Getenv("WSFS_TEST_CHILD_MNT"), Policy: pol,
		Transport: transport.Mode(os.Getenv(childTransportEnv))}
	if sock := os.Getenv(childHolderEnv); sock != "" && err == nil {
		// keep_test.go: keep the connection in the holder, and serve
		// on the one kept there when there is one.
		h := &transport.Holder{Socket: sock}
		cfg.Keep = h
		if die := os.Getenv(childDieEnv); die != "" {
			// keep_test.go: die with the request carried out and not
			// answered, as a kill -9 at that moment does.
			kill := func(stage string) func(op, name string) {
				return func(op, name string) {
					if stage+op+":"+name == die {
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
					}
				}
			}
			fusefs.SetCarriedOut(kill(""))
			// "undone-OP:NAME": after the system call, before its
			// success is recorded.
			fusefs.SetBeforeDone(kill("undone-"))
		}
		if late := os.Getenv(childForgetLateEnv); late != "" {
			forgetLate(late)
		}
		if q := os.Getenv(childFailQueueEnv); q != "" {
			n, _ := strconv.Atoi(q)
			transport.FailAdoptedQueueForTest(n)
		}
		conns, _, terr := transport.TakeConns(h)
		if err = terr; err == nil {
			cfg.Adopt = conns[cfg.Mountpoint]
		}
	}
	var srv *fusefs.Server
	if err == nil {
		srv, err = fusefs.Mount(cfg)
	}
	if err != nil {
		fmt.Println("error:", err)
		if os.Getenv(childFailQueueEnv) != "" {
			fmt.Println("kept:", connDescriptors())
		}
		os.Exit(1)
	}
	// SIGTERM: a handover, as the daemon's (stop at a request boundary,
	// leave the connection to the successor).
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Println("ready", srv.Transport())
	<-term
	srv.Pause(2 * time.Second)
	os.Exit(0)
}

// TestDeadMountDetected: the kernel's caches outlive a killed server (the
// root's attributes, its listing), so a dead mount is recognized by
// statfs(2), which always reaches the server: CheckMount refuses the
// mountpoint with its one-line error, and Unmount clears it.
func TestDeadMountDetected(t *testing.T) {
	dir := canonT(t, t.TempDir())
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	mkdirT(t, backing, 0o755)
	mkdirT(t, mnt, 0o755)
	writeFileT(t, filepath.Join(backing, "f"), "f\n", 0o644)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), childServeEnv+"="+backing, "WSFS_TEST_CHILD_MNT="+mnt)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if isMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready ") {
		t.Fatalf("child server: %q", line)
	}
	if got := shOK(t, "/", "ls "+shq(mnt)+" && stat -c %F "+shq(mnt)); got != "f\ndirectory\n" {
		t.Fatalf("through the live mount: %q", got)
	}
	cmd.Process.Kill()
	cmd.Wait()
	var sfs unix.Statfs_t
	// fusefs.Statfs: over io_uring, a request made while the kernel tears
	// the dead server's ring down is ended with ECONNABORTED.
	err = fusefs.Statfs(mnt, &sfs)
	if err != unix.ENOTCONN {
		t.Fatalf("statfs after the server was killed: %v, want ENOTCONN", err)
	}
	_, _, err = fusefs.CheckMount(backing, mnt, false)
	want := fmt.Sprintf("mountpoint %q: a dead FUSE mount is there; unmount it first (wsfs unmount)", mnt)
	if err == nil || err.Error() != want {
		t.Errorf("CheckMount on a dead mount: %v, want %q", err, want)
	}
	if err := fusefs.Unmount(mnt, false); err != nil {
		t.Errorf("Unmount of a dead mount: %v", err)
	}
	if isMounted(mnt) {
		t.Errorf("%s still mounted after Unmount", mnt)
	}
}
