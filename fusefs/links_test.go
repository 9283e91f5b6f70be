package fusefs_test

// Links are links (issue 7): every symlink in the mount is a symlink, so
// tools treat it as they do on disk; following one that leaves the root goes
// through the host view, where the policy decides at the physical path.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/policy"
)

// linkWorld is a project whose node_modules holds links to a read-write
// additional root, the temp area, a read-only outside directory and a none
// root, each target a package directory with files.
type linkWorld struct {
	backing, mnt         string
	store, temp, ro, sec string // the four target areas (canonical)
	targets              []string
	before               map[string]map[string]string
	relStore             string
}

func newLinkWorld(t *testing.T) *linkWorld {
	w := &linkWorld{}
	w.store = canonT(t, t.TempDir())
	w.ro = canonT(t, t.TempDir())
	w.sec = canonT(t, t.TempDir())
	for _, d := range []string{w.store, w.ro, w.sec} {
		mkdirT(t, filepath.Join(d, "pkg/lib"), 0o755)
		writeFileT(t, filepath.Join(d, "pkg/index.js"), "module.exports = 1\n", 0o644)
		writeFileT(t, filepath.Join(d, "pkg/lib/a.js"), "a\n", 0o644)
	}
	var opts []mountOpt
	opts = append(opts, withRoot(w.store, policy.AccessReadWrite), withRoot(w.sec, policy.AccessNone),
		func(s *mountSetup) {
			w.temp = s.spec.Temp[0]
			mkdirT(t, filepath.Join(w.temp, "pkg/lib"), 0o755)
			writeFileT(t, filepath.Join(w.temp, "pkg/index.js"), "module.exports = 1\n", 0o644)
			writeFileT(t, filepath.Join(w.temp, "pkg/lib/a.js"), "a\n", 0o644)
		},
		withPopulate(func(t *testing.T, b string) {
			nm := filepath.Join(b, "node_modules")
			mkdirT(t, nm, 0o755)
			symlinkT(t, filepath.Join(w.store, "pkg"), filepath.Join(nm, "store-abs"))
			rel, err := filepath.Rel(nm, filepath.Join(w.store, "pkg"))
			if err != nil {
				t.Fatal(err)
			}
			w.relStore = rel
			symlinkT(t, rel, filepath.Join(nm, "store-rel"))
			symlinkT(t, filepath.Join(w.temp, "pkg"), filepath.Join(nm, "temp"))
			symlinkT(t, filepath.Join(w.ro, "pkg"), filepath.Join(nm, "ro"))
			symlinkT(t, filepath.Join(w.sec, "pkg"), filepath.Join(nm, "sec"))
			symlinkT(t, filepath.Join(w.ro, "pkg/index.js"), filepath.Join(nm, "ro-file"))
			symlinkT(t, filepath.Join(w.ro, "missing"), filepath.Join(nm, "dangling"))
			mkdirT(t, filepath.Join(nm, ".bin"), 0o755)
			symlinkT(t, "../store-abs/index.js", filepath.Join(nm, ".bin/tool"))
		}))
	w.backing, w.mnt, _ = mountT(t, opts...)
	w.targets = []string{w.store, w.temp, w.ro, w.sec}
	w.before = map[string]map[string]string{}
	for _, d := range w.targets {
		w.before[d] = treeSnapshot(t, d)
	}
	return w
}

func (w *linkWorld) wantTargetsUnchanged(t *testing.T, what string) {
	t.Helper()
	for _, d := range w.targets {
		wantUnchanged(t, what, d, w.before[d])
	}
}

// rm -rf of a directory holding links removes the links, never what they
// point to (the data loss of issue 7: the files inside the store went, and
// node_modules stayed).
func TestLinksRmRfKeepsTargets(t *testing.T) {
	w := newLinkWorld(t)
	out, errOut, code := shEnv(t, w.mnt, nil, "rm -rf node_modules; echo rc=$?; ls -A")
	if code != 0 || out != "rc=0\n" {
		t.Errorf("rm -rf node_modules in the mount: exit %d, stdout %q (want rc=0 and an empty project), stderr %q", code, out, errOut)
	}
	if _, err := os.Lstat(filepath.Join(w.backing, "node_modules")); !os.IsNotExist(err) {
		t.Errorf("backing node_modules still there after rm -rf (err=%v)", err)
	}
	w.wantTargetsUnchanged(t, "after rm -rf node_modules")
}

// Every link is a symlink to lstat, readdir and the tools, in the mount as on
// the backing tree: find, du, tar, cp -a see the same names and types.
func TestLinksToolsSeeLinks(t *testing.T) {
	w := newLinkWorld(t)
	for _, dir := range []string{w.backing, w.mnt} {
		for _, n := range names(t, filepath.Join(dir, "node_modules")) {
			if n == ".bin" {
				continue
			}
			if st := lstatT(t, filepath.Join(dir, "node_modules", n)); st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				t.Errorf("lstat %s/node_modules/%s: mode %#o, want a symlink", dir, n, st.Mode)
			}
		}
	}
	const script = `find . -printf '%y %p\n' | sort; echo --; du -s --apparent-size . >/dev/null && echo du-ok; echo --;` +
		` tar cf - . | tar tvf - | awk '{print substr($1,1,1), $6}' | sort; echo --;` +
		` d=$(mktemp -d); cp -a . "$d/c" && (cd "$d/c" && find . -printf '%y %p\n' | sort); rm -rf "$d"`
	host := shOK(t, w.backing, script)
	mnt := shOK(t, w.mnt, script)
	if host != mnt {
		t.Errorf("find/du/tar/cp -a differ between backing and mount:\nbacking:\n%s\nmount:\n%s", host, mnt)
	}
	if !strings.Contains(mnt, "l ./node_modules/store-abs\n") || strings.Contains(mnt, "store-abs/index.js") {
		t.Errorf("find in the mount:\n%s\nwant store-abs listed as a link and not descended", mnt)
	}
	w.wantTargetsUnchanged(t, "after find/du/tar/cp")
}

// Writes through escaping links are decided at the target's physical path.
func TestLinksWriteThrough(t *testing.T) {
	w := newLinkWorld(t)
	nm := filepath.Join(w.mnt, "node_modules")
	wantErrno(t, "write through a link to a read-only outside file",
		openErr(filepath.Join(nm, "ro-file"), syscall.O_WRONLY|syscall.O_TRUNC, 0)(), syscall.EROFS)
	wantErrno(t, "create through a link to a read-only outside dir",
		openErr(filepath.Join(nm, "ro/new.js"), syscall.O_WRONLY|syscall.O_CREAT, 0o644)(), syscall.EROFS)
	wantErrno(t, "read through a link into a none root",
		openErr(filepath.Join(nm, "sec/index.js"), syscall.O_RDONLY, 0)(), syscall.EACCES)
	wantErrno(t, "write through a link into a none root",
		openErr(filepath.Join(nm, "sec/index.js"), syscall.O_WRONLY, 0)(), syscall.EACCES)
	wantErrno(t, "dangling escaping link plus O_CREAT",
		openErr(filepath.Join(nm, "dangling"), syscall.O_WRONLY|syscall.O_CREAT, 0o644)(), syscall.EROFS)
	if _, err := os.Lstat(filepath.Join(w.ro, "missing")); !os.IsNotExist(err) {
		t.Errorf("the dangling link's target was created (err=%v)", err)
	}
	w.wantTargetsUnchanged(t, "after refused writes")
	for _, l := range []string{"store-abs", "store-rel", "temp"} {
		p := filepath.Join(nm, l, "new.js")
		if err := os.WriteFile(p, []byte(l+"\n"), 0o644); err != nil {
			t.Errorf("write %s/new.js (a writable area): %v", l, err)
		}
	}
	for d, want := range map[string]string{w.store: "store-rel\n", w.temp: "temp\n"} {
		if b, err := os.ReadFile(filepath.Join(d, "pkg/new.js")); err != nil || string(b) != want {
			t.Errorf("%s/pkg/new.js = %q, %v; want %q", d, b, err, want)
		}
	}
}

// A link created through the mount is usable by the very next call; a
// symlink(2) text naming a host-view path is stored with the physical path.
func TestLinksUsableAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	need(t, "python3")
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "f"), "out\n", 0o644)
	backing, mnt, _ := mountT(t)
	script := fmt.Sprintf(`
import os, sys
fails = 0
for i in range(1000):
    for target in ("/etc/passwd", %q):  # outside every root (the issue used /etc/hostname, absent in some containers)
        name = "pl%%d-%%d" %% (i, len(target))
        os.symlink(target, name)
        try:
            with open(name) as f:
                f.read()
            os.stat(name)
        except OSError as e:
            fails += 1
            if fails < 5:
                print(name, e, file=sys.stderr)
print(fails)
`, filepath.Join(outside, "f"))
	if out := shOK(t, mnt, "python3 -c "+shq(script)); out != "0\n" {
		t.Errorf("symlink then open, 2x1000 iterations: %q failures, want 0", out)
	}
	esc := filepath.Join(outside, "f")
	if err := os.Symlink(esc, filepath.Join(mnt, "esc")); err != nil {
		t.Fatal(err)
	}
	shOK(t, mnt, `ln -s "$(readlink esc)" new`)
	if got, err := os.Readlink(filepath.Join(backing, "new")); err != nil || got != esc {
		t.Errorf("backing new -> %q, %v; want the physical path %q", got, err, esc)
	}
	if got, _ := os.Readlink(filepath.Join(mnt, "new")); got != hostViewOf(mnt)+esc {
		t.Errorf("mount new -> %q, want %q", got, hostViewOf(mnt)+esc)
	}
}

// A loop or a link through a file: the link is listed and lstat works;
// following gives the kernel's errno, as on ext4.
func TestLinksLoopsAndNotDirs(t *testing.T) {
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "of"), "x\n", 0o644)
	symlinkT(t, "oloop", filepath.Join(outside, "oloop"))
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "d0"), 0o755)
		writeFileT(t, filepath.Join(b, "f"), "f\n", 0o644)
		symlinkT(t, "l15", filepath.Join(b, "d0/l15"))
		symlinkT(t, "../d0/l15/..", filepath.Join(b, "d0/l54"))
		symlinkT(t, filepath.Join(b, "d0/l15"), filepath.Join(b, "absloop"))
		symlinkT(t, "f/x", filepath.Join(b, "notdir"))
		symlinkT(t, "../f/x", filepath.Join(b, "d0/notdir2"))
		symlinkT(t, filepath.Join(outside, "of/x"), filepath.Join(b, "outnotdir"))
		symlinkT(t, filepath.Join(outside, "oloop"), filepath.Join(b, "outloop"))
	}))
	for _, p := range []string{"d0/l15", "d0/l54", "absloop", "notdir", "d0/notdir2", "outnotdir", "outloop"} {
		var want, got syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(mnt, p), &got); err != nil || got.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			t.Errorf("lstat mnt/%s: %v, mode %#o; want a symlink", p, err, got.Mode)
		}
		wantE := syscall.Stat(filepath.Join(backing, p), &want)
		gotE := syscall.Stat(filepath.Join(mnt, p), &got)
		if errnoOf(wantE) == 0 || errnoOf(gotE) != errnoOf(wantE) {
			t.Errorf("stat mnt/%s: %s, want %s (the kernel's on the backing tree)", p, errName(errnoOf(gotE)), errName(errnoOf(wantE)))
		}
	}
	if out := shOK(t, mnt, "ls -l d0 | wc -l"); out != "4\n" {
		t.Errorf("ls -l d0 | wc -l = %q, want 4 (total + 3 links)", out)
	}
}

// Without a host view, an escaping link shows its target's physical path
// (a relative text would not reach it from the mount), still as a link.
func TestLinksWithoutHostView(t *testing.T) {
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "f"), "out\n", 0o644)
	var rel string
	_, mnt, _ := mountT(t, withoutHostView(), withPopulate(func(t *testing.T, b string) {
		var err error
		if rel, err = filepath.Rel(b, filepath.Join(outside, "f")); err != nil {
			t.Fatal(err)
		}
		symlinkT(t, rel, filepath.Join(b, "esc"))
	}))
	if got, err := os.Readlink(filepath.Join(mnt, "esc")); err != nil || got != filepath.Join(outside, "f") {
		t.Errorf("readlink esc (stored %q) = %q, %v; want %q", rel, got, err, filepath.Join(outside, "f"))
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "esc")); err != nil || string(b) != "out\n" {
		t.Errorf("read esc = %q, %v", b, err)
	}
}
