package fusefs_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
)

// The host view shows the host's "/" with the session's policy: hidden
// places and pseudo file systems answer EACCES, the session root and
// mountpoint are links to the session mount, reads pass, writes are decided
// at the physical path.
func TestHostViewShape(t *testing.T) {
	store := canonT(t, t.TempDir())
	sec := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(store, "s"), "s\n", 0o644)
	writeFileT(t, filepath.Join(sec, "x"), "x\n", 0o644)
	// A proc mount below a visible directory: never entered.
	pseudo := canonT(t, t.TempDir())
	if err := syscall.Mount("proc", pseudo, "proc", 0, ""); err != nil {
		t.Fatalf("mount proc on %s: %v", pseudo, err)
	}
	t.Cleanup(func() { syscall.Unmount(pseudo, syscall.MNT_DETACH) })
	// A tmpfs is an ordinary file system: entered.
	tmpfs := canonT(t, t.TempDir())
	if err := syscall.Mount("wsfs-test", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(tmpfs, syscall.MNT_DETACH) })
	writeFileT(t, filepath.Join(tmpfs, "t"), "t\n", 0o644)

	var temp string
	backing, mnt, _ := mountT(t, withRoot(store, policy.AccessReadWrite), withRoot(sec, policy.AccessNone),
		func(s *mountSetup) { temp = s.spec.Temp[0] })
	hv := hostViewOf(mnt)
	at := func(p string) string { return hv + p }

	for _, p := range []string{"/proc/self", "/sys/kernel", "/dev/null", "/run", "/tmp", sec + "/x", pseudo + "/self", hv} {
		_, err := os.Lstat(at(p))
		wantErrno(t, "lstat host view "+p, err, syscall.EACCES)
	}
	for p, want := range map[string]string{store + "/s": "s\n", tmpfs + "/t": "t\n", "/etc/passwd": ""} {
		b, err := os.ReadFile(at(p))
		if err != nil || (want != "" && string(b) != want) {
			t.Errorf("read host view %s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{backing, mnt} {
		if got, err := os.Readlink(at(p)); err != nil || got != mnt {
			t.Errorf("readlink host view %s = %q, %v; want the session mount %q", p, got, err, mnt)
		}
		wantErrno(t, "rename the session link "+p, os.Rename(at(p), at(p)+"-moved"), syscall.EACCES)
	}
	// Writes: the rw root is written, the outside is EROFS, the temp area
	// (inside hidden /tmp when it is there) is writable.
	if err := os.WriteFile(at(store+"/new"), []byte("n\n"), 0o644); err != nil {
		t.Errorf("write host view rw root: %v", err)
	}
	wantErrno(t, "write host view outside", os.WriteFile(at(filepath.Dir(store)+"/new"), nil, 0o644), syscall.EROFS)
	if err := os.WriteFile(at(temp+"/new"), []byte("n\n"), 0o644); err != nil {
		t.Errorf("write host view temp area: %v", err)
	}
	// Inode numbers: the backing number on the root's device, a number of
	// its own on another device, stable.
	hst, bst := lstatT(t, at(store+"/s")), lstatT(t, store+"/s")
	if hst.Ino != bst.Ino {
		t.Errorf("host view ino of %s: %d, want the backing %d", store+"/s", hst.Ino, bst.Ino)
	}
	t1, t2 := lstatT(t, at(tmpfs+"/t")), lstatT(t, at(tmpfs))
	if t1.Ino == t2.Ino || t1.Ino != lstatT(t, at(tmpfs+"/t")).Ino {
		t.Errorf("host view inos on the tmpfs: %d, %d; want distinct and stable", t1.Ino, t2.Ino)
	}
}

// The most specific entry decides: the session's temp area inside a hidden
// place stays visible (its ancestors are passages listing only the way to
// it); a hidden place inside a read-write root is hidden.
func TestHostViewMostSpecificWins(t *testing.T) {
	state := canonT(t, t.TempDir())
	temp := filepath.Join(state, "tmp/s1")
	mkdirT(t, temp, 0o755)
	mkdirT(t, filepath.Join(state, "tmp/s2"), 0o755)
	writeFileT(t, filepath.Join(state, "secret"), "s\n", 0o600)
	store := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(store, "other"), 0o755)
	writeFileT(t, filepath.Join(store, "other/f"), "o\n", 0o644)
	_, mnt, _ := mountT(t, withRoot(store, policy.AccessReadWrite), withHostHidden(state, filepath.Join(store, "other")),
		func(s *mountSetup) { s.spec.Temp = []string{temp} })
	hv := hostViewOf(mnt)
	if err := os.WriteFile(hv+temp+"/f", []byte("t\n"), 0o644); err != nil {
		t.Errorf("write in the temp area inside a hidden place: %v", err)
	}
	if got := namesErr(hv + state); strings.Join(got, ",") != "tmp" {
		t.Errorf("list the hidden state dir: %v, want only the way to the temp area [tmp]", got)
	}
	if got := namesErr(hv + state + "/tmp"); strings.Join(got, ",") != "s1" {
		t.Errorf("list state/tmp: %v, want [s1]", got)
	}
	for _, p := range []string{state + "/secret", state + "/tmp/s2", store + "/other/f"} {
		_, err := os.Lstat(hv + p)
		wantErrno(t, "lstat hidden "+p, err, syscall.EACCES)
	}
	wantErrno(t, "create in a passage", os.WriteFile(hv+state+"/new", nil, 0o644), syscall.EACCES)
}

// A hidden name is never listed, wherever it lies (LOOKUP refuses it, and ls
// -la would show it as d????????? and exit 1): a daemon hides its state
// directory entry by entry around the session's temp area, and the host's
// "/" holds the default hidden places.
func TestHostViewListsNoHiddenName(t *testing.T) {
	state := canonT(t, t.TempDir())
	temp := filepath.Join(state, "tmp/s1")
	mkdirT(t, temp, 0o755)
	mkdirT(t, filepath.Join(state, "tmp/s2"), 0o755)
	mkdirT(t, filepath.Join(state, "sessions"), 0o700)
	writeFileT(t, filepath.Join(state, "lock"), "", 0o600)
	writeFileT(t, filepath.Join(state, "seen"), "", 0o644)
	_, mnt, _ := mountT(t, withHostHidden(filepath.Join(state, "lock"), filepath.Join(state, "sessions"), filepath.Join(state, "tmp/s2")),
		func(s *mountSetup) { s.spec.Temp = []string{temp} })
	hv := hostViewOf(mnt)
	for dir, want := range map[string]string{
		state:          "seen,tmp",
		state + "/tmp": "s1",
	} {
		if got := namesErr(hv + dir); strings.Join(got, ",") != want {
			t.Errorf("list %s in the host view: %v, want [%s]", dir, got, want)
		}
		if out, code := sh(t, "/", "ls -la "+shq(hv+dir)+" >/dev/null"); code != 0 {
			t.Errorf("ls -la %s in the host view: exit %d %q, want 0", dir, code, out)
		}
	}
	_, err := os.Lstat(hv + state + "/lock")
	wantErrno(t, "lstat a hidden name", err, syscall.EACCES)
	root := names(t, hv)
	for _, h := range []string{"proc", "sys", "dev", "run"} {
		if slices.Contains(root, h) {
			t.Errorf("the host view's / lists the hidden %s: %v", h, root)
		}
	}
	if !slices.Contains(root, "usr") {
		t.Errorf("the host view's / = %v, want usr in it", root)
	}
}

// A root narrowed to none live is cut off at once in the host view, even for
// what the kernel cached under the old policy with long timeouts: its
// dentries are dropped (a lookup then refuses), and OPEN, OPENDIR and
// READLINK of a node the kernel still holds are decided again (README: "the
// next operation of every process sees it").
func TestHostViewNarrowToNoneAtOnce(t *testing.T) {
	store := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(store, "pkg"), 0o755)
	writeFileT(t, filepath.Join(store, "pkg/index.js"), "module.exports = 1\n", 0o644)
	symlinkT(t, "index.js", filepath.Join(store, "pkg/main.js"))
	primary := canonT(t, t.TempDir())
	spec := specFor(t, primary)
	spec.Additional = []policy.Root{{Path: store, Access: policy.AccessReadWrite}}
	hv := filepath.Join(canonT(t, t.TempDir()), "hv")
	srv := mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: compileT(t, spec), Session: t.Name(),
		Logger: testLogger(), NoWatch: true, EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	pkg := hv + store + "/pkg"
	// Held across the change: a directory and a file the kernel keeps.
	d, err := os.Open(pkg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if data, err := os.ReadFile(pkg + "/index.js"); err != nil || string(data) != "module.exports = 1\n" {
		t.Fatalf("read before: %q, %v", data, err)
	}
	if text, err := os.Readlink(pkg + "/main.js"); err != nil || text != "index.js" {
		t.Fatalf("readlink before: %q, %v", text, err)
	}

	spec.Additional[0].Access = policy.AccessNone
	srv.SetPolicy(compileT(t, spec))
	_, err = os.ReadFile(pkg + "/index.js")
	wantErrno(t, "read after the narrowing", err, syscall.EACCES)
	_, err = os.Lstat(pkg + "/index.js")
	wantErrno(t, "lstat after the narrowing", err, syscall.EACCES)
	_, err = os.Readlink(pkg + "/main.js")
	wantErrno(t, "readlink after the narrowing", err, syscall.EACCES)
	// The node the kernel holds (an open directory): OPENDIR and OPEN
	// through it are decided again.
	_, err = os.Open(fmt.Sprintf("/proc/self/fd/%d", d.Fd()))
	wantErrno(t, "opendir of a held directory", err, syscall.EACCES)
	_, err = os.Open(fmt.Sprintf("/proc/self/fd/%d/index.js", d.Fd()))
	wantErrno(t, "open through a held directory", err, syscall.EACCES)

	// Widened again: readable at once.
	spec.Additional[0].Access = policy.AccessReadOnly
	srv.SetPolicy(compileT(t, spec))
	if data, err := os.ReadFile(pkg + "/index.js"); err != nil || string(data) != "module.exports = 1\n" {
		t.Errorf("read after widening: %q, %v", data, err)
	}
}

// A bind mount of a root narrowed to none live (decided by its source) is
// cut off at once too, though the kernel cached it with long timeouts.
func TestHostViewNarrowToNoneBindMount(t *testing.T) {
	store := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(store, "pkg"), 0o755)
	writeFileT(t, filepath.Join(store, "pkg/index.js"), "module.exports = 1\n", 0o644)
	bind := canonT(t, t.TempDir())
	if err := syscall.Mount(store, bind, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(bind, syscall.MNT_DETACH) })
	spec := specFor(t, canonT(t, t.TempDir()))
	spec.Additional = []policy.Root{{Path: store, Access: policy.AccessReadWrite}}
	hv := filepath.Join(canonT(t, t.TempDir()), "hv")
	srv := mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: compileT(t, spec), Session: t.Name(),
		Logger: testLogger(), NoWatch: true, EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	if data, err := os.ReadFile(hv + bind + "/pkg/index.js"); err != nil || string(data) != "module.exports = 1\n" {
		t.Fatalf("read through the bind mount before: %q, %v", data, err)
	}
	spec.Additional[0].Access = policy.AccessNone
	srv.SetPolicy(compileT(t, spec))
	_, err := os.Lstat(hv + bind + "/pkg/index.js")
	wantErrno(t, "lstat through the bind mount after the narrowing", err, syscall.EACCES)
}

// Inside a directory reached through an escaping link, git does not take the
// project for its repository: the host view is another file system, and
// git's upward search stops at it (GIT_DISCOVERY_ACROSS_FILESYSTEM unset).
func TestHostViewGitStopsAtIt(t *testing.T) {
	need(t, "git")
	outside := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(outside, "pkg"), 0o755)
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		symlinkT(t, filepath.Join(outside, "pkg"), filepath.Join(b, "dep"))
		shOK(t, b, "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init")
	}))
	if out := shOK(t, mnt, "git rev-parse --show-toplevel"); out != mnt+"\n" {
		t.Errorf("git rev-parse in the mount: %q, want %q", out, mnt)
	}
	out, errOut, code := shEnv(t, mnt+"/dep", []string{"GIT_CEILING_DIRECTORIES="}, "git rev-parse --show-toplevel")
	if code == 0 || !strings.Contains(errOut, "not a git repository") {
		t.Errorf("git rev-parse in dep/: exit %d, out %q, err %q; want not a git repository", code, out, errOut)
	}
}

// A hard-linked inode gets one decision per name: the name in the root is
// the root's, the name outside (reached through an escaping link) the
// outside's, whichever is looked up first.
func TestHostViewHardLinkDecisions(t *testing.T) {
	for _, order := range []string{"root-first", "outside-first"} {
		t.Run(order, func(t *testing.T) {
			outside := canonT(t, t.TempDir())
			writeFileT(t, filepath.Join(outside, "f"), "f\n", 0o644)
			_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
				if err := os.Link(filepath.Join(outside, "f"), filepath.Join(b, "in")); err != nil {
					t.Fatal(err)
				}
				symlinkT(t, outside, filepath.Join(b, "out"))
			}))
			names := []string{"in", "out/f"}
			if order == "outside-first" {
				names = []string{"out/f", "in"}
			}
			for _, n := range names {
				lstatT(t, filepath.Join(mnt, n))
			}
			wantErrno(t, "write out/f", openErr(filepath.Join(mnt, "out/f"), syscall.O_WRONLY, 0)(), syscall.EROFS)
			if err := os.WriteFile(filepath.Join(mnt, "in"), []byte("in\n"), 0o644); err != nil {
				t.Errorf("write in (primary root): %v", err)
			}
			wantErrno(t, "write out/f after", openErr(filepath.Join(mnt, "out/f"), syscall.O_WRONLY, 0)(), syscall.EROFS)
		})
	}
}

// MountHostView refuses bad input with one line naming it.
func TestHostViewBadInput(t *testing.T) {
	pol := compileT(t, specFor(t, canonT(t, t.TempDir())))
	dir := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(dir, "f"), "", 0o644)
	mkdirT(t, filepath.Join(dir, "full/x"), 0o755)
	for _, c := range []struct {
		cfg  fusefs.HostViewConfig
		want string
	}{
		{fusefs.HostViewConfig{Mountpoint: dir}, "host view policy: required"},
		{fusefs.HostViewConfig{Policy: pol}, "host view mountpoint: required"},
		{fusefs.HostViewConfig{Policy: pol, Mountpoint: "rel"}, `host view mountpoint "rel": must be absolute`},
		{fusefs.HostViewConfig{Policy: pol, Mountpoint: dir + "/nope"}, `host view mountpoint "` + dir + `/nope": does not exist`},
		{fusefs.HostViewConfig{Policy: pol, Mountpoint: dir + "/f"}, `host view mountpoint "` + dir + `/f": not a directory`},
		{fusefs.HostViewConfig{Policy: pol, Mountpoint: dir + "/full"}, `host view mountpoint "` + dir + `/full": not empty`},
	} {
		srv, err := fusefs.MountHostView(c.cfg)
		if err == nil {
			srv.Unmount(true)
			t.Errorf("MountHostView(%+v) succeeded, want %q", c.cfg, c.want)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("MountHostView(%+v) = %q, want %q", c.cfg, err.Error(), c.want)
		}
	}
}

// A bind mount whose source lies in a none root is hidden as the root is.
func TestHostViewBindFromNoneRoot(t *testing.T) {
	sec := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(sec, "keys"), 0o755)
	writeFileT(t, filepath.Join(sec, "keys/k"), "k\n", 0o600)
	elsewhere := canonT(t, t.TempDir())
	if err := syscall.Mount(filepath.Join(sec, "keys"), elsewhere, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(elsewhere, syscall.MNT_DETACH) })
	open := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(open, "pub"), 0o755)
	writeFileT(t, filepath.Join(open, "pub/p"), "p\n", 0o644)
	pub := canonT(t, t.TempDir())
	if err := syscall.Mount(filepath.Join(open, "pub"), pub, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(pub, syscall.MNT_DETACH) })
	_, mnt, _ := mountT(t, withRoot(sec, policy.AccessNone))
	hv := hostViewOf(mnt)
	_, err := os.Lstat(hv + elsewhere + "/k")
	wantErrno(t, "lstat through a bind mount of a none root", err, syscall.EACCES)
	if b, err := os.ReadFile(hv + pub + "/p"); err != nil || string(b) != "p\n" {
		t.Errorf("read through an ordinary bind mount: %q, %v", b, err)
	}
}

// UnmountSiblingHostView races the session's own server, which takes the
// host view down as soon as it sees its session unmounted: a failed unmount
// of a view that is gone by then is success; one that is still there is the
// error.
func TestUnmountSiblingHostViewRace(t *testing.T) {
	dir := canonT(t, t.TempDir())
	mnt := filepath.Join(dir, "mnt")
	hv := mnt + "@host"
	mkdirT(t, hv, 0o755)
	srv, err := fusefs.MountHostView(fusefs.HostViewConfig{Mountpoint: hv, Policy: compileT(t, specFor(t, dir)), NoWatch: true, Logger: testLogger()})
	if err != nil {
		t.Fatalf("MountHostView(%s): %v", hv, err)
	}
	t.Cleanup(func() {
		if isMounted(hv) {
			syscall.Unmount(hv, syscall.MNT_DETACH)
		}
		srv.Wait()
	})

	still := errors.New("fusermount3: device or resource busy")
	got, err := fusefs.UnmountSiblingHostViewWith(mnt, func(string, bool) error { return still })
	if got != hv || err != still {
		t.Errorf("UnmountSiblingHostView(%s) with a failed unmount of a mounted view = %q, %v; want %q, %v", mnt, got, err, hv, still)
	}

	lost := func(p string, force bool) error {
		if err := fusefs.Unmount(p, force); err != nil { // the server won
			t.Fatalf("Unmount(%s): %v", p, err)
		}
		return errors.New("fusermount3: entry for " + p + " not found in /etc/mtab")
	}
	got, err = fusefs.UnmountSiblingHostViewWith(mnt, lost)
	if got != hv || err != nil {
		t.Errorf("UnmountSiblingHostView(%s) after the server unmounted the view = %q, %v; want %q, nil", mnt, got, err, hv)
	}
	if isMounted(hv) {
		t.Errorf("%s is still mounted", hv)
	}
	got, err = fusefs.UnmountSiblingHostView(mnt)
	if got != "" || err != nil {
		t.Errorf("UnmountSiblingHostView(%s) with no view = %q, %v; want \"\", nil", mnt, got, err)
	}
}

// Server.Decide answers, without a round trip, what a lookup through the
// host view answers: the policy, hidden places, passages, and the mounts on
// the way (a refused file-system type, a bind mount of a none root). Each
// refusal is checked against lstat through the mount too.
func TestHostViewDecide(t *testing.T) {
	root := canonT(t, t.TempDir())
	out := canonT(t, t.TempDir())
	sec := canonT(t, t.TempDir())
	hidden := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(root, "x"), 0o755)
	mkdirT(t, filepath.Join(hidden, "in"), 0o755)
	mkdirT(t, filepath.Join(sec, "keys"), 0o755)
	for _, d := range []string{"d", "b", "p"} {
		mkdirT(t, filepath.Join(out, d), 0o755)
	}
	if err := syscall.Mount(filepath.Join(sec, "keys"), filepath.Join(out, "b"), "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(filepath.Join(out, "b"), syscall.MNT_DETACH) })
	if err := syscall.Mount("proc", filepath.Join(out, "p"), "proc", 0, ""); err != nil {
		t.Fatalf("mount proc: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(filepath.Join(out, "p"), syscall.MNT_DETACH) })
	pol, err := policy.Compile(policy.Spec{Primary: root, Temp: []string{}, Additional: []policy.Root{{Path: sec, Access: policy.AccessNone}}})
	if err != nil {
		t.Fatal(err)
	}
	hv := canonT(t, t.TempDir()) + "/hv"
	srv := mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: pol, Session: "dec", Logger: testLogger(),
		Hidden: []string{hidden}, Links: map[string]string{root: "/nowhere/mp"}})
	for _, c := range []struct {
		p     string
		allow bool
		rule  string
	}{
		{out + "/d", true, "outside:read-only"},
		{root + "/x", true, "primary:read-write"}, // behind the session link: the policy alone
		{sec + "/keys", false, "root:none"},
		{hidden + "/in", false, "hostview:hidden"},
		{out + "/b", false, "hostview:mount-source"},
		{out + "/p", false, "hostview:mount-type"},
		{out + "/p/self", false, "hostview:mount-type"},
	} {
		d := srv.Decide(policy.OpRead, c.p)
		if d.Allow != c.allow || d.Rule != c.rule || !c.allow && d.Errno != syscall.EACCES {
			t.Errorf("Decide(read, %s) = %+v, want allow %v rule %s", c.p, d, c.allow, c.rule)
		}
		if !c.allow {
			_, err := os.Lstat(hv + c.p)
			wantErrno(t, "lstat through the host view "+c.p, err, syscall.EACCES)
		}
	}
	if d := srv.Decide(policy.OpCreate, out+"/d/new"); d.Allow || d.Errno != syscall.EROFS {
		t.Errorf("Decide(create, outside) = %+v, want EROFS", d)
	}
}

// A place the host view hides is hidden by its path, so no rename may move
// it (or a tree holding it) to a path not hidden, or put another tree where
// it is: a rename whose either end (RENAME_EXCHANGE too) is an ancestor of a
// hidden place or of a none root is EACCES "hostview:hidden", logged, and
// the place is unchanged. (Security review: `mv anc/d anc/d2` made another
// session's root below anc/d readable and writable at anc/d2/...; in
// full-access, `mv secp secp2` did the same for the none root secp/inner.)
// Renames elsewhere in the same roots still pass.
func TestHostViewRenameHoldingHidden(t *testing.T) {
	for _, mode := range []policy.Mode{policy.ModeWorkspaceWrite, policy.ModeFullAccess} {
		t.Run(string(mode), func(t *testing.T) {
			anc := canonT(t, t.TempDir()) // a read-write root
			other := filepath.Join(anc, "d/v4")
			mkdirT(t, other, 0o755)
			writeFileT(t, filepath.Join(other, "file"), "V4\n", 0o644)
			mkdirT(t, filepath.Join(anc, "g"), 0o755) // holds a hidden place that does not exist
			mkdirT(t, filepath.Join(anc, "x/ghost"), 0o755)
			writeFileT(t, filepath.Join(anc, "x/ghost/planted"), "p\n", 0o644)
			mkdirT(t, filepath.Join(anc, "free"), 0o755)
			outside := canonT(t, t.TempDir()) // outside every root: writable in full-access
			sec := filepath.Join(outside, "secp/inner")
			mkdirT(t, sec, 0o755)
			writeFileT(t, filepath.Join(sec, "k"), "secret\n", 0o600)
			mkdirT(t, filepath.Join(outside, "y"), 0o755)
			var logs syncBuffer
			_, mnt, _ := mountT(t, withMode(mode), withRoot(anc, policy.AccessReadWrite), withRoot(sec, policy.AccessNone),
				withHostHidden(other, filepath.Join(anc, "g/ghost")),
				func(s *mountSetup) { s.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			hv := hostViewOf(mnt)
			beforeAnc, beforeOut := treeSnapshot(t, anc), treeSnapshot(t, outside)

			type rename struct {
				src, dst string
				flags    uint
			}
			refused := []rename{
				{anc + "/d", anc + "/d2", 0},                      // the source holds another session's root
				{anc + "/d", anc + "/free", unix.RENAME_EXCHANGE}, // either side of an exchange
				{anc + "/free", anc + "/d", unix.RENAME_EXCHANGE},
				{anc + "/x", anc + "/g", 0}, // would put x/ghost at the hidden g/ghost
			}
			if mode == policy.ModeFullAccess {
				refused = append(refused,
					rename{outside + "/secp", outside + "/secp2", 0}, // holds a none root
					rename{outside + "/secp", outside + "/y", unix.RENAME_EXCHANGE},
					rename{outside + "/y", outside + "/secp", unix.RENAME_EXCHANGE})
			}
			for _, r := range refused {
				err := unix.Renameat2(unix.AT_FDCWD, hv+r.src, unix.AT_FDCWD, hv+r.dst, r.flags)
				wantErrno(t, fmt.Sprintf("rename(%#x) %s -> %s in the host view", r.flags, r.src, r.dst), err, syscall.EACCES)
				if want := "path=\"" + r.src + " -> " + r.dst + "\" rule=hostview:hidden errno=EACCES"; !strings.Contains(logs.String(), want) {
					t.Errorf("denial log lacks %s:\n%s", want, logs.String())
				}
			}
			wantUnchanged(t, "refused renames", anc, beforeAnc)
			wantUnchanged(t, "refused renames", outside, beforeOut)
			for _, p := range []string{other + "/file", anc + "/d2/v4/file", sec + "/k", outside + "/secp2/inner/k"} {
				_, err := os.ReadFile(hv + p)
				if errnoOf(err) != syscall.EACCES && errnoOf(err) != syscall.ENOENT {
					t.Errorf("read %s in the host view: %v, want EACCES or ENOENT", p, err)
				}
			}
			// Not holding a hidden place: renamed as before.
			wantOK(t, "rename a sibling in the rw root", os.Rename(hv+anc+"/free", hv+anc+"/free2"))
		})
	}
}
