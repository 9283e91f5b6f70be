package fusefs_test

// Issue 8: many users on one --allow-other mount. Objects belong to their
// creator exactly as on ext4 (compared with a native directory in the same
// test), and the creator can work in its tree.

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/policy"
)

// nobody is the unprivileged user the tests act as.
const nobody = 65534

// withAllowOther mounts with allow_other,default_permissions.
func withAllowOther() mountOpt { return func(s *mountSetup) { s.cfg.AllowOther = true } }

// withProtected sets the protected subpaths (an empty list: none).
func withProtected(p ...string) mountOpt {
	return func(s *mountSetup) { s.spec.Protected = append([]string{}, p...) }
}

// userPath is a PATH without directories another user cannot enter.
const userPath = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// openUpT makes dir and its ancestors below / searchable by everyone (the
// test's temp dirs are 0700), so another user can reach dir.
func openUpT(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// asUser returns credentials for uid:gid with the supplementary groups.
func asUser(uid, gid uint32, groups ...uint32) *syscall.Credential {
	if groups == nil {
		groups = []uint32{}
	}
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}
}

// userHomeT is a home directory owned by uid:gid.
func userHomeT(t *testing.T, uid, gid int) string {
	t.Helper()
	home := filepath.Join(canonT(t, t.TempDir()), "home")
	mkdirT(t, home, 0o755)
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	openUpT(t, home)
	return home
}

// ownerSetup makes, as root, the directories the creators work in: w (the
// user's own), sg (setgid, the user's, group 2: `chown 65534:2; chmod
// 2775`), sgo (setgid, root's, group 2, mode 2777) and sticky (1777).
const ownerSetup = `set -e
mkdir w sg sgo sticky
chown 65534:65534 w; chmod 0755 w
chown 65534:2 sg; chmod 2775 sg
chown 0:2 sgo; chmod 2777 sgo
chmod 1777 sticky
`

// ownerMake creates one object of each kind in each setup directory, as the
// user running it, and lists owner, group, mode and type of everything.
const ownerMake = `set -e
umask 022
py=/usr/bin/python3
for d in w sg sgo sticky; do
  cd "$d"
  touch f; mkdir dir; ln -s f l; ln -s nowhere dangling; mkfifo p
  $py -c 'import socket; socket.socket(socket.AF_UNIX).bind("s")'
  $py -c 'import os; os.close(os.open("suid", os.O_CREAT|os.O_WRONLY, 0o6755))'
  $py -c 'import os; os.close(os.open("sgid", os.O_CREAT|os.O_WRONLY, 0o2755))'
  $py -c 'import os; os.close(os.open("sgidnox", os.O_CREAT|os.O_WRONLY, 0o2644))'
  $py -c 'import os; fd = os.open(".", os.O_TMPFILE|os.O_WRONLY, 0o640); os.link("/proc/self/fd/%d" % fd, "tmpfile", dst_dir_fd=os.open(".", os.O_RDONLY))'
  mkdir -m 2755 dsg; mkdir -m 1777 dsticky; mkdir -p a/b/c
  cd ..
done
find w sg sgo sticky | sort | xargs stat -c '%n %u:%g %04a %F'
`

// ownerNative runs ownerSetup as root and ownerMake as cred in a fresh
// native directory (ext4 here, the reference) and in a fresh directory of
// the mount, and returns both listings.
func ownerListings(t *testing.T, mnt string, cred *syscall.Credential) (native, mounted string) {
	t.Helper()
	nat := filepath.Join(canonT(t, t.TempDir()), "native")
	mkdirT(t, nat, 0o755)
	openUpT(t, nat)
	env := []string{userPath}
	run := func(dir string) string {
		shOK(t, dir, ownerSetup)
		out, errOut, code := shAs(t, cred, dir, env, ownerMake)
		if code != 0 {
			t.Fatalf("creating objects as %d:%d%v in %s: exit %d\nstdout: %s\nstderr: %s", cred.Uid, cred.Gid, cred.Groups, dir, code, out, errOut)
		}
		return out
	}
	return run(nat), run(mnt)
}

// TestOwnerOfCreatedObjects: every kind of object made through an
// --allow-other mount by another user (uid 65534, without and with
// supplementary group 2, and root with another gid) gets the owner, group,
// mode and setgid inheritance ext4 gives it.
func TestOwnerOfCreatedObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	need(t, "python3", "stat", "find")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server switches to the caller's identity")
	}
	for _, tc := range []struct {
		name string
		cred *syscall.Credential
	}{
		{"nobody", asUser(nobody, nobody)},
		{"nobody+group2", asUser(nobody, nobody, 2)},
		{"root-gid100", asUser(0, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backing, mnt, _ := mountT(t, withAllowOther(), withMode(policy.ModeFullAccess))
			openUpT(t, backing)
			openUpT(t, mnt)
			sub := filepath.Join(mnt, "t")
			mkdirT(t, sub, 0o755)
			native, mounted := ownerListings(t, sub, tc.cred)
			if native != mounted {
				t.Errorf("objects made through the mount differ from ext4's:\n%s", lineDiff(native, mounted))
			}
			// The backing store holds the same owners (what the mount
			// shows is what is stored).
			stored := shOK(t, filepath.Join(backing, "t"), "find w sg sgo sticky | sort | xargs stat -c '%n %u:%g %04a %F'")
			if stored != native {
				t.Errorf("backing store differs from ext4's:\n%s", lineDiff(native, stored))
			}
			if !strings.Contains(native, "w/suid ") {
				t.Fatalf("listing lacks w/suid:\n%s", native)
			}
		})
	}
}

// nativeAndMountedT returns two empty directories of mode 0777 that every
// user can reach: one native (ext4 here, the reference), one in a
// full-access --allow-other mount. It skips unless root.
func nativeAndMountedT(t *testing.T) (native, mounted string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server switches to the caller's identity")
	}
	_, mnt, _ := mountT(t, withAllowOther(), withMode(policy.ModeFullAccess))
	openUpT(t, mnt)
	native = filepath.Join(canonT(t, t.TempDir()), "native")
	mkdirT(t, native, 0o777)
	openUpT(t, native)
	mounted = filepath.Join(mnt, "t")
	mkdirT(t, mounted, 0o777)
	return native, mounted
}

// TestOwnerDevice: a device node made by root with another gid (the only
// caller that may make one natively) is root:that gid, as on ext4.
func TestOwnerDevice(t *testing.T) {
	need(t, "mknod", "stat")
	nat, sub := nativeAndMountedT(t)
	script := "umask 022; mknod c c 1 3 && mknod b b 7 0 && stat -c '%n %u:%g %04a %F %t:%T' c b"
	var outs []string
	for _, dir := range []string{nat, sub} {
		out, errOut, code := shAs(t, asUser(0, 100), dir, []string{userPath}, script)
		if code != 0 {
			t.Fatalf("mknod in %s: exit %d: %s", dir, code, errOut)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Errorf("devices made through the mount differ from ext4's:\n%s", lineDiff(outs[0], outs[1]))
	}
}

// killprivSetup makes, as root, setuid/setgid files for killprivUser.
const killprivSetup = `set -e
for f in own-append own-write own-trunc own-otrunc own-chgrp own-chown-nop own-sgidnox-append other-append other-trunc root-chown root-write; do
  printf 'data\n' > $f
done
chown 65534:65534 own-* ; chmod 6755 own-*; chmod 2644 own-sgidnox-append
chmod 6777 other-* root-*
`

// killprivUser changes the files as uid 65534 (in group 2), then root
// chowns and writes; the listing shows which setuid/setgid bits survived.
const killprivUser = `set -e
py=/usr/bin/python3
echo more >> own-append
$py -c 'import os; fd = os.open("own-write", os.O_WRONLY); os.pwrite(fd, b"x", 0)'
truncate -s 1 own-trunc
$py -c 'import os; os.close(os.open("own-otrunc", os.O_WRONLY|os.O_TRUNC))'
chgrp 2 own-chgrp
chown -h 65534:65534 own-chown-nop
echo more >> own-sgidnox-append
echo more >> other-append
truncate -s 2 other-trunc
`

// killprivRoot is root's part: root keeps the bits on write (CAP_FSETID)
// but not on chown (chown(2)).
const killprivRoot = `set -e
chown 65534 root-chown
echo more >> root-write
stat -c '%n %u:%g %04a %s' * | sort
`

// TestKillPriv: the setuid and setgid bits are cleared on write, truncate
// and chown exactly as ext4 clears them (compared in the same test).
func TestKillPriv(t *testing.T) {
	need(t, "python3", "stat", "truncate", "chgrp")
	nat, sub := nativeAndMountedT(t)
	var outs []string
	for _, dir := range []string{nat, sub} {
		shOK(t, dir, killprivSetup)
		if out, errOut, code := shAs(t, asUser(nobody, nobody, 2), dir, []string{userPath}, killprivUser); code != 0 {
			t.Fatalf("as nobody in %s: exit %d\n%s%s", dir, code, out, errOut)
		}
		outs = append(outs, shOK(t, dir, killprivRoot))
	}
	if outs[0] != outs[1] {
		t.Errorf("setuid/setgid bits through the mount differ from ext4's:\n%s", lineDiff(outs[0], outs[1]))
	}
	if !strings.Contains(outs[0], "own-append 65534:65534 0755") {
		t.Errorf("reference listing is not what ext4 gives (own-append should lose both bits):\n%s", outs[0])
	}
}

// lineDiff shows two listings line by line where they differ.
func lineDiff(want, got string) string {
	w, g := lines(want), lines(got)
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("  ext4:  " + a + "\n  mount: " + c + "\n")
		}
	}
	return b.String()
}

// TestDevicesAndWhiteouts: character and block devices, and the whiteout
// renameat2(RENAME_WHITEOUT) leaves, are made only in full-access mode;
// elsewhere EPERM, with nothing created or renamed.
func TestDevicesAndWhiteouts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_MKNOD)")
	}
	for _, mode := range []policy.Mode{policy.ModeWorkspaceWrite, policy.ModeFullAccess} {
		t.Run(string(mode), func(t *testing.T) {
			backing, mnt, _ := mountT(t, withMode(mode))
			writeFileT(t, filepath.Join(backing, "a"), "a", 0o644)
			err := syscall.Mknod(filepath.Join(mnt, "c"), syscall.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
			errB := syscall.Mknod(filepath.Join(mnt, "b"), syscall.S_IFBLK|0o644, int(unix.Mkdev(7, 0)))
			errW := unix.Renameat2(unix.AT_FDCWD, filepath.Join(mnt, "a"), unix.AT_FDCWD, filepath.Join(mnt, "a2"), unix.RENAME_WHITEOUT)
			if mode != policy.ModeFullAccess {
				wantErrno(t, "mknod char device", err, syscall.EPERM)
				wantErrno(t, "mknod block device", errB, syscall.EPERM)
				wantErrno(t, "renameat2 RENAME_WHITEOUT", errW, syscall.EPERM)
				if got := names(t, backing); strings.Join(got, " ") != "a" {
					t.Errorf("backing after refusals: %v, want [a]", got)
				}
				return
			}
			wantOK(t, "mknod char device", err)
			wantOK(t, "mknod block device", errB)
			wantOK(t, "renameat2 RENAME_WHITEOUT", errW)
			for _, c := range []struct {
				name string
				typ  uint32
				dev  uint64
			}{{"c", syscall.S_IFCHR, unix.Mkdev(1, 3)}, {"b", syscall.S_IFBLK, unix.Mkdev(7, 0)}, {"a", syscall.S_IFCHR, 0}} {
				st := lstatT(t, filepath.Join(backing, c.name))
				if st.Mode&syscall.S_IFMT != c.typ || st.Rdev != c.dev {
					t.Errorf("%s on the backing store: mode %#o rdev %#x, want type %#o rdev %#x", c.name, st.Mode, st.Rdev, c.typ, c.dev)
				}
			}
			if b, err := os.ReadFile(filepath.Join(backing, "a2")); err != nil || string(b) != "a" {
				t.Errorf("a2 after the whiteout rename: %q, %v; want \"a\"", b, err)
			}
		})
	}
}

// TestCreatorWorks: the user who made a tree through an --allow-other mount
// works in it as on ext4: touch, append, chmod, mkdir -p, git add and
// commit in a repository the host made (git init and clone in a writable
// root are refused by the repository rule: their config would be the
// session's), cp -a of a dangling link, mv of a directory, rm -rf.
func TestCreatorWorks(t *testing.T) {
	need(t, "git", "python3")
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	backing, mnt, _ := mountT(t, withAllowOther(), withProtected())
	openUpT(t, mnt)
	sub := filepath.Join(mnt, "u")
	mkdirT(t, sub, 0o755)
	if err := os.Chown(sub, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	home := userHomeT(t, nobody, nobody)
	env := append(gitEnv(t), userPath, "HOME="+home, "XDG_CONFIG_HOME="+home)
	repo := filepath.Join(backing, "u", "repo")
	if out, errOut, code := shEnv(t, backing, env, "git init -q -b main "+shq(repo)+" && chown -R 65534:65534 "+shq(repo)); code != 0 {
		t.Fatalf("host git init: exit %d %s %s", code, out, errOut)
	}
	script := `set -e
umask 022
touch f && touch f && echo one > f && echo two >> f && cat f
chmod +x f && test -x f && stat -c '%a %u:%g' f
mkdir -p a/b/c && mkdir -p a/b/c && stat -c '%u:%g' a/b/c
cd repo && echo hi > x && git add x && git commit -qm one && git log --format=%s
cd .. && { git clone -q repo clone 2>/dev/null && echo cloned || echo clone refused; }
ln -s nowhere dl && cp -a dl dl2 && readlink dl2
mkdir -p d1/sub && echo z > d1/sub/z && mv d1 d2 && cat d2/sub/z
rm -rf clone d2 a && ls
`
	want := "one\ntwo\n755 65534:65534\n65534:65534\none\nclone refused\nnowhere\nz\ndl\ndl2\nf\nrepo\n"
	out, errOut, code := shAs(t, asUser(nobody, nobody), sub, env, script)
	if code != 0 || out != want {
		t.Errorf("as nobody in its own tree: exit %d\nstdout: %q\nwant:   %q\nstderr: %s", code, out, want, errOut)
	}
}

// TestChownMinusOneMovesCtime: chown(f, -1, -1) changes nothing but ctime
// on ext4 (chown_common always sets ATTR_CTIME); through the mount too.
func TestChownMinusOneMovesCtime(t *testing.T) {
	nat, sub := nativeAndMountedT(t)
	for _, dir := range []string{nat, sub} {
		f := filepath.Join(dir, "f")
		writeFileT(t, f, "x", 0o644)
		before := lstatT(t, f).Ctim
		if err := os.Lchown(f, -1, -1); err != nil {
			t.Fatalf("lchown %s -1 -1: %v", f, err)
		}
		after := lstatT(t, f).Ctim
		if after == before {
			if dir == nat {
				t.Skipf("ext4 here did not move ctime on chown -1 -1 within one clock tick (no fine-grained timestamps)")
			}
			t.Errorf("%s: ctime unchanged by chown -1 -1 (%v); ext4 moves it", f, before)
		}
	}
}

// TestSymlinkTimesKept: times set on a symlink itself (utimensat with
// AT_SYMLINK_NOFOLLOW) are what lstat shows afterwards, as on ext4: the
// server's own reads of the link text must not move its atime (relatime
// would, atime being older than mtime here). Found by pjdfstest
// utimensat/05.t.
func TestSymlinkTimesKept(t *testing.T) {
	nat, sub := nativeAndMountedT(t)
	for _, dir := range []string{nat, sub} {
		writeFileT(t, filepath.Join(dir, "f"), "x", 0o644)
		l := filepath.Join(dir, "l")
		symlinkT(t, "f", l)
		ts := []unix.Timespec{{Sec: 1960000000}, {Sec: 1970000000}}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, l, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("utimensat %s NOFOLLOW: %v", l, err)
		}
		for i := 0; i < 3; i++ {
			st := lstatT(t, l)
			if st.Atim.Sec != 1960000000 || st.Mtim.Sec != 1970000000 {
				t.Errorf("%s: lstat #%d atime %d mtime %d, want 1960000000 1970000000", l, i, st.Atim.Sec, st.Mtim.Sec)
			}
			if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOwnerACLGroup: a directory whose ACL lets a supplementary group of
// the caller write (not its own group, which the directory has) is written
// as on ext4: the server takes the caller's supplementary groups too.
func TestOwnerACLGroup(t *testing.T) {
	nat, sub := nativeAndMountedT(t)
	// user::rwx, group::r-x, group:2:rwx, mask::rwx, other::r-x
	const undefined = ^uint32(0)
	acl := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 7, undefined}, {0x04, 5, undefined}, {0x08, 7, 2}, {0x10, 7, undefined}, {0x20, 5, undefined}} {
		acl = binary.LittleEndian.AppendUint16(acl, e.tag)
		acl = binary.LittleEndian.AppendUint16(acl, e.perm)
		acl = binary.LittleEndian.AppendUint32(acl, e.id)
	}
	var outs []string
	for _, dir := range []string{nat, sub} {
		d := filepath.Join(dir, "d")
		mkdirT(t, d, 0o755)
		if err := os.Chown(d, 0, nobody); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(d, "system.posix_acl_access", acl, 0); err != nil {
			t.Fatalf("setxattr ACL on %s: %v", d, err)
		}
		out, errOut, code := shAs(t, asUser(nobody, nobody, 2), d, []string{userPath},
			"umask 022; touch f && mkdir e && stat -c '%n %u:%g %04a' f e")
		outs = append(outs, fmt.Sprintf("exit %d: %s%s", code, out, errOut))
	}
	if outs[0] != outs[1] {
		t.Errorf("creating through a group ACL entry:\n  ext4:  %q\n  mount: %q", outs[0], outs[1])
	}
	if !strings.HasPrefix(outs[0], "exit 0") {
		t.Errorf("ext4 refused the create (the test's ACL is wrong?): %s", outs[0])
	}
}
