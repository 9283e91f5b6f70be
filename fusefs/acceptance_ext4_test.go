package fusefs_test

// Acceptance 3: the same semantics as ext4. Each case runs on a native
// directory (t.TempDir, ext4 or whatever /tmp is) and on a fresh wsfs mount;
// it asserts the exact expected values itself and returns a summary that must
// be identical for both.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// pEnv is where a parity case runs: dir is the native directory or the
// mountpoint; backing is the directory holding the same objects physically
// (dir itself for native).
type pEnv struct {
	dir, backing string
	label        string // "native" or "wsfs"
}

func (e pEnv) p(name string) string  { return filepath.Join(e.dir, name) }
func (e pEnv) bp(name string) string { return filepath.Join(e.backing, name) }

// parity runs f on a native dir and on a wsfs mount and compares summaries.
func parity(t *testing.T, f func(t *testing.T, e pEnv) string) {
	t.Helper()
	nat := canonT(t, t.TempDir())
	want := f(t, pEnv{dir: nat, backing: nat, label: "native"})
	backing, mnt, _ := mountT(t)
	got := f(t, pEnv{dir: mnt, backing: backing, label: "wsfs"})
	if got != want {
		t.Errorf("wsfs differs from native:\n  native: %s\n  wsfs:   %s", want, got)
	}
}

func TestExt4TouchHSymlink(t *testing.T) {
	need(t, "touch")
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("t"), "target", 0o644)
		old := unix.NsecToTimespec(1_000_000 * 1e9)
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, e.p("t"), []unix.Timespec{old, old}, 0); err != nil {
			t.Fatalf("%s: utimes t: %v", e.label, err)
		}
		symlinkT(t, "t", e.p("l"))
		symlinkT(t, "missing", e.p("d"))
		shOK(t, e.dir, "touch -h -d @2000000000 l d")
		l, d, tt := lstatT(t, e.p("l")), lstatT(t, e.p("d")), lstatT(t, e.p("t"))
		_, mErr := os.Lstat(e.p("missing"))
		res := fmt.Sprintf("l.mtime=%d d.mtime=%d t.mtime=%d missing=%s", l.Mtim.Sec, d.Mtim.Sec, tt.Mtim.Sec, errName(errnoOf(mErr)))
		want := "l.mtime=2000000000 d.mtime=2000000000 t.mtime=1000000 missing=" + errName(syscall.ENOENT)
		if res != want {
			t.Errorf("%s: touch -h: got %s, want %s", e.label, res, want)
		}
		if e.label == "wsfs" {
			bl, bd := lstatT(t, e.bp("l")), lstatT(t, e.bp("d"))
			if bl.Mtim.Sec != 2000000000 || bd.Mtim.Sec != 2000000000 || bl.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				t.Errorf("backing links after touch -h: l mtime=%d mode=%#o, d mtime=%d; want 2000000000, symlinks", bl.Mtim.Sec, bl.Mode, bd.Mtim.Sec)
			}
		}
		return res
	})
}

func TestExt4Append(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		out := shOK(t, e.dir, `printf 'a\n' > f; printf 'b\n' >> f; exec 3>>f; printf 'c\n' >&3; printf 'd\n' >> f; printf 'e\n' >&3; exec 3>&-; cat f`)
		if out != "a\nb\nc\nd\ne\n" {
			t.Errorf("%s: after > and interleaved >>: content %q, want %q", e.label, out, "a\nb\nc\nd\ne\n")
		}
		b, _ := os.ReadFile(e.bp("f"))
		if string(b) != out {
			t.Errorf("%s: backing content %q, mount content %q", e.label, b, out)
		}
		return fmt.Sprintf("content=%q", out)
	})
}

func TestExt4RenameOverOpenFile(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		f, err := os.OpenFile(e.p("victim"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatalf("%s: create victim: %v", e.label, err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("old")); err != nil {
			t.Fatal(err)
		}
		var st0 syscall.Stat_t
		syscall.Fstat(int(f.Fd()), &st0) // warm the attr cache
		writeFileT(t, e.p("new"), "new", 0o644)
		if err := os.Rename(e.p("new"), e.p("victim")); err != nil {
			t.Fatalf("%s: rename new -> victim: %v", e.label, err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatalf("%s: fstat after rename: %v", e.label, err)
		}
		buf := make([]byte, 10)
		n, _ := f.ReadAt(buf, 0)
		cur, _ := os.ReadFile(e.p("victim"))
		res := fmt.Sprintf("fstat.nlink=%d open-fd-content=%q victim-content=%q", st.Nlink, buf[:n], cur)
		if st.Nlink != 0 || string(buf[:n]) != "old" || string(cur) != "new" {
			t.Errorf("%s: rename over open file: got %s, want fstat.nlink=0 open-fd-content=\"old\" victim-content=\"new\"", e.label, res)
		}
		return res
	})
}

func TestExt4ListingAfterEachCreate(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: skipped with -short")
	}
	const n = 500
	parity(t, func(t *testing.T, e pEnv) string {
		d := e.p("many")
		mkdirT(t, d, 0o755)
		have := map[string]bool{}
		bad := 0
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("file-%03d", i)
			if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
				t.Fatalf("%s: create %s: %v", e.label, name, err)
			}
			have[name] = true
			got := names(t, d)
			if len(got) != len(have) {
				bad++
			}
			seen := map[string]bool{}
			for _, g := range got {
				seen[g] = true
			}
			var missing []string
			for h := range have {
				if !seen[h] {
					missing = append(missing, h)
				}
			}
			if len(missing) > 0 || len(got) != len(have) {
				sort.Strings(missing)
				if bad < 5 {
					t.Errorf("%s: listing after create #%d (%s): %d names, want %d; missing %v", e.label, i+1, name, len(got), len(have), missing)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d listings were incomplete", e.label, bad, n)
		}
		return fmt.Sprintf("incomplete-listings=%d final=%d", bad, len(names(t, d)))
	})
}

func TestExt4HardLinkNlink(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("a"), "x", 0o644)
		lstatT(t, e.p("a"))
		if err := os.Link(e.p("a"), e.p("b")); err != nil {
			t.Fatalf("%s: link a b: %v", e.label, err)
		}
		a, b := lstatT(t, e.p("a")), lstatT(t, e.p("b"))
		res := fmt.Sprintf("a.nlink=%d b.nlink=%d same-ino=%v", a.Nlink, b.Nlink, a.Ino == b.Ino)
		if res != "a.nlink=2 b.nlink=2 same-ino=true" {
			t.Errorf("%s: after ln a b: %s, want a.nlink=2 b.nlink=2 same-ino=true", e.label, res)
		}
		return res
	})
}

func TestExt4CreateExcl0444Writable(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		fd, err := syscall.Open(e.p("ro"), syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o444)
		if err != nil {
			t.Fatalf("%s: open(O_RDWR|O_CREAT|O_EXCL, 0444): want success, got %s", e.label, errName(errnoOf(err)))
		}
		defer syscall.Close(fd)
		n, werr := syscall.Write(fd, []byte("hello"))
		buf := make([]byte, 16)
		m, _ := syscall.Pread(fd, buf, 0)
		var st syscall.Stat_t
		syscall.Fstat(fd, &st)
		_, err2 := syscall.Open(e.p("ro"), syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o444)
		res := fmt.Sprintf("write=%d/%s read=%q mode=%#o second-excl=%s", n, errName(errnoOf(werr)), buf[:max(m, 0)], st.Mode&0o7777, errName(errnoOf(err2)))
		want := fmt.Sprintf("write=5/%s read=\"hello\" mode=0444 second-excl=%s", errName(0), errName(syscall.EEXIST))
		if res != want {
			t.Errorf("%s: got %s, want %s", e.label, res, want)
		}
		return res
	})
}

func TestExt4Fsync(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		f, err := os.Create(e.p("f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write([]byte("data"))
		e1 := f.Sync()
		e2 := unix.Fdatasync(int(f.Fd()))
		d, err := os.Open(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		e3 := d.Sync()
		res := fmt.Sprintf("fsync=%s fdatasync=%s fsync(dir)=%s", errName(errnoOf(e1)), errName(errnoOf(e2)), errName(errnoOf(e3)))
		if e1 != nil || e2 != nil || e3 != nil {
			t.Errorf("%s: %s; want all success", e.label, res)
		}
		return res
	})
}

func TestExt4MvOntoExisting(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		out := shOK(t, e.dir, `echo one > a; echo two > b; ino=$(stat -c %i a); mv a b; echo "$(cat b)|$(ls | tr '\n' ' ')|$([ "$(stat -c %i b)" = "$ino" ] && echo same-inode || echo other-inode)"`)
		if out != "one|b |same-inode\n" {
			t.Errorf("%s: mv a b: got %q, want %q", e.label, out, "one|b |same-inode\n")
		}
		return out
	})
}

// telldirScript uses libc's opendir/readdir/telldir/seekdir (ctypes) and
// checks that seekdir(telldir after entry i) continues with entry i+1.
const telldirScript = `
import ctypes, ctypes.util, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]
libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.readdir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.rewinddir.argtypes = [ctypes.c_void_p]
libc.closedir.argtypes = [ctypes.c_void_p]
d = libc.opendir(sys.argv[1].encode())
if not d:
    print("opendir failed", ctypes.get_errno()); sys.exit(1)
ents = []
while True:
    e = libc.readdir(d)
    if not e:
        break
    ents.append((e.contents.d_name.decode(), libc.telldir(d)))
bad = []
order = list(range(len(ents)))
order = order[::-1] + order[::7]
for i in order:
    libc.seekdir(d, ents[i][1])
    e = libc.readdir(d)
    got = e.contents.d_name.decode() if e else None
    want = ents[i+1][0] if i+1 < len(ents) else None
    if got != want:
        bad.append("seekdir(telldir after %s) gave %r, want %r" % (ents[i][0], got, want))
libc.rewinddir(d)
e = libc.readdir(d)
first = e.contents.d_name.decode() if e else None
if first != ents[0][0]:
    bad.append("rewinddir gave %r, want %r" % (first, ents[0][0]))
libc.closedir(d)
names = sorted(n for n, _ in ents)
print("entries=%d distinct=%d seeks=%d bad=%d" % (len(ents), len(set(names)), len(order), len(bad)))
for b in bad[:10]:
    print(b)
`

func TestExt4TelldirSeekdir(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: skipped with -short")
	}
	need(t, "python3")
	parity(t, func(t *testing.T, e pEnv) string {
		d := e.p("dir")
		mkdirT(t, d, 0o755)
		for i := 0; i < 300; i++ {
			// long names so the entries span several getdents buffers
			writeFileT(t, filepath.Join(d, fmt.Sprintf("%03d-%s", i, strings.Repeat("n", 100))), "", 0o644)
		}
		out := shOK(t, e.dir, "python3 -c "+shq(telldirScript)+" dir")
		want := "entries=302 distinct=302 seeks=346 bad=0\n"
		if out != want {
			t.Errorf("%s: telldir/seekdir: got %q, want %q", e.label, out, want)
		}
		return out
	})
}

// lockfScript tries an exclusive fcntl (POSIX) lock without waiting and
// prints "acquired" or the errno name.
const lockfScript = `
import fcntl, sys, errno
f = open(sys.argv[1], "r+")
try:
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("acquired")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
`

func TestExt4Locks(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: skipped with -short")
	}
	need(t, "flock", "python3")
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("lk"), "lock me", 0o644)
		f, err := os.OpenFile(e.p("lk"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		// A second holder, as a child process: flock(1) exits 7 on conflict.
		flockTry := func(path string) string {
			out, code := sh(t, e.dir, "flock -n -E 7 "+shq(path)+" true")
			return fmt.Sprintf("exit=%d%s", code, strings.TrimSpace(out))
		}
		lockfTry := func(path string) string {
			return strings.TrimSpace(shOK(t, e.dir, "python3 -c "+shq(lockfScript)+" "+shq(path)))
		}
		var res []string
		if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatalf("%s: flock(LOCK_EX|LOCK_NB): %s", e.label, errName(errnoOf(err)))
		}
		res = append(res, "flock-held: mount="+flockTry(e.p("lk"))+" backing="+flockTry(e.bp("lk")))
		if err := syscall.Flock(fd, syscall.LOCK_UN); err != nil {
			t.Fatalf("%s: flock(LOCK_UN): %v", e.label, err)
		}
		// The backing file first: the probe through the mount takes the
		// lock, and its release on the probe's exit reaches the server
		// asynchronously (FUSE_RELEASE is sent after close(2) returns), so
		// a backing probe right after it could still find it held.
		releasedBacking := flockTry(e.bp("lk"))
		res = append(res, "flock-released: mount="+flockTry(e.p("lk"))+" backing="+releasedBacking)

		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
		if err := syscall.FcntlFlock(uintptr(fd), syscall.F_SETLK, &lk); err != nil {
			t.Fatalf("%s: fcntl(F_SETLK, F_WRLCK): %s", e.label, errName(errnoOf(err)))
		}
		res = append(res, "fcntl-held: mount="+lockfTry(e.p("lk"))+" backing="+lockfTry(e.bp("lk")))
		lk.Type = syscall.F_UNLCK
		if err := syscall.FcntlFlock(uintptr(fd), syscall.F_SETLK, &lk); err != nil {
			t.Fatalf("%s: fcntl(F_SETLK, F_UNLCK): %v", e.label, err)
		}
		res = append(res, "fcntl-released: mount="+lockfTry(e.p("lk"))+" backing="+lockfTry(e.bp("lk")))
		got := strings.Join(res, "; ")
		want := "flock-held: mount=exit=7 backing=exit=7; flock-released: mount=exit=0 backing=exit=0; " +
			"fcntl-held: mount=EAGAIN backing=EAGAIN; fcntl-released: mount=acquired backing=acquired"
		if got != want {
			t.Errorf("%s: locks with a second holder (child process):\n  got  %s\n  want %s", e.label, got, want)
		}
		return got
	})
}

func TestExt4Tmpfile(t *testing.T) {
	backing, mnt, _ := mountT(t)
	fd, err := syscall.Open(mnt, unix.O_TMPFILE|syscall.O_RDWR, 0o600)
	if errnoOf(err) == syscall.EOPNOTSUPP {
		t.Logf("O_TMPFILE: EOPNOTSUPP (allowed)")
		return
	}
	if err != nil {
		t.Fatalf("open(mnt, O_TMPFILE|O_RDWR, 0600): want success or %s, got %s", errName(syscall.EOPNOTSUPP), errName(errnoOf(err)))
	}
	defer syscall.Close(fd)
	if n, err := syscall.Pwrite(fd, []byte("temporary"), 0); n != 9 || err != nil {
		t.Errorf("O_TMPFILE pwrite: n=%d err=%v, want 9, nil", n, err)
	}
	buf := make([]byte, 20)
	n, _ := syscall.Pread(fd, buf, 0)
	var st syscall.Stat_t
	syscall.Fstat(fd, &st)
	if string(buf[:max(n, 0)]) != "temporary" || st.Nlink != 0 || st.Mode&0o7777 != 0o600 {
		t.Errorf("O_TMPFILE: read %q nlink %d mode %#o, want \"temporary\" 0 0600", buf[:max(n, 0)], st.Nlink, st.Mode&0o7777)
	}
	if n := names(t, mnt); len(n) != 0 {
		t.Errorf("O_TMPFILE: mount root lists %v, want nothing", n)
	}
	if n := names(t, backing); len(n) != 0 {
		t.Errorf("O_TMPFILE: backing root lists %v, want nothing", n)
	}
	// Giving it a name (linkat via /proc/self/fd) is optional: log only.
	err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, filepath.Join(mnt, "named"), unix.AT_SYMLINK_FOLLOW)
	t.Logf("O_TMPFILE linkat to a name: %s", errName(errnoOf(err)))
}

func TestExt4TruncateShrinks(t *testing.T) {
	need(t, "truncate")
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("f"), strings.Repeat("x", 10000), 0o644)
		out := shOK(t, e.dir, `truncate -s 100 f && stat -c %s f && truncate -s 5000 f && stat -c %s f`)
		b, _ := os.ReadFile(e.p("f"))
		bb, _ := os.ReadFile(e.bp("f"))
		want := append([]byte(strings.Repeat("x", 100)), make([]byte, 4900)...)
		res := fmt.Sprintf("sizes=%q len=%d content-ok=%v backing-ok=%v", out, len(b), bytes.Equal(b, want), bytes.Equal(bb, want))
		if res != `sizes="100\n5000\n" len=5000 content-ok=true backing-ok=true` {
			t.Errorf("%s: truncate -s 100 then -s 5000: %s; want sizes 100,5000, 100 x then 4900 zero bytes", e.label, res)
		}
		return res
	})
}

func TestExt4BlocksAndSparse(t *testing.T) {
	need(t, "truncate", "dd", "du")
	parity(t, func(t *testing.T, e pEnv) string {
		shOK(t, e.dir, `truncate -s 64M sp && dd if=/dev/urandom of=sp bs=4096 count=1 seek=1000 conv=notrunc status=none && head -c 1048576 /dev/urandom > dense && sync sp dense`)
		sp, dense := lstatT(t, e.p("sp")), lstatT(t, e.p("dense"))
		bsp, bdense := lstatT(t, e.bp("sp")), lstatT(t, e.bp("dense"))
		duM := shOK(t, e.dir, "du -k sp dense; du -k --apparent-size sp")
		duB := shOK(t, e.backing, "du -k sp dense; du -k --apparent-size sp")
		if sp.Blocks != bsp.Blocks || dense.Blocks != bdense.Blocks {
			t.Errorf("%s: st_blocks through mount sp=%d dense=%d, backing sp=%d dense=%d; want equal", e.label, sp.Blocks, dense.Blocks, bsp.Blocks, bdense.Blocks)
		}
		if duM != duB {
			t.Errorf("%s: du through mount %q, on backing %q; want equal", e.label, duM, duB)
		}
		if sp.Size != 64<<20 || sp.Blocks > 64 {
			t.Errorf("%s: sparse file size %d blocks %d; want size %d, at most 64 blocks (sparse)", e.label, sp.Size, sp.Blocks, 64<<20)
		}
		if dense.Blocks < 2048 {
			t.Errorf("%s: dense 1 MiB file has %d blocks, want >= 2048", e.label, dense.Blocks)
		}
		// SEEK_DATA / SEEK_HOLE see the same layout.
		f, err := os.Open(e.p("sp"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		data, err1 := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
		hole, err2 := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if data != 4096*1000 || hole != 4096*1001 || err1 != nil || err2 != nil {
			t.Errorf("%s: SEEK_DATA=%d (%v) SEEK_HOLE=%d (%v); want %d, %d", e.label, data, err1, hole, err2, 4096*1000, 4096*1001)
		}
		return fmt.Sprintf("sp.blocks=%d dense.blocks=%d du=%q data=%d hole=%d", sp.Blocks, dense.Blocks, duM, data, hole)
	})
}

func TestExt4UnlinkOpenFile(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		mkdirT(t, e.p("d"), 0o755)
		f, err := os.OpenFile(e.p("d/f"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write([]byte("keep"))
		if err := os.Remove(e.p("d/f")); err != nil {
			t.Fatalf("%s: unlink open file: %v", e.label, err)
		}
		lm, lb := names(t, e.p("d")), names(t, e.bp("d"))
		buf := make([]byte, 10)
		n, _ := f.ReadAt(buf, 0)
		rmErr := syscall.Rmdir(e.p("d"))
		_, stErr := os.Lstat(e.bp("d"))
		res := fmt.Sprintf("list=%v backing-list=%v read=%q rmdir=%s backing-d=%s", lm, lb, buf[:n], errName(errnoOf(rmErr)), errName(errnoOf(stErr)))
		want := fmt.Sprintf("list=[] backing-list=[] read=\"keep\" rmdir=%s backing-d=%s", errName(0), errName(syscall.ENOENT))
		if res != want {
			t.Errorf("%s: unlink of an open file:\n  got  %s\n  want %s", e.label, res, want)
		}
		for _, root := range []string{e.dir, e.backing} {
			if h, _ := filepath.Glob(filepath.Join(root, "*", ".fuse_hidden*")); len(h) > 0 {
				t.Errorf("%s: .fuse_hidden entries: %v", e.label, h)
			}
		}
		return res
	})
}

func TestExt4UserXattrs(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("f"), "x", 0o644)
		p := e.p("f")
		e1 := unix.Setxattr(p, "user.wsfs", []byte("v1"), 0)
		buf := make([]byte, 64)
		n, e2 := unix.Getxattr(p, "user.wsfs", buf)
		got := ""
		if n > 0 {
			got = string(buf[:n])
		}
		bbuf := make([]byte, 64)
		bn, _ := unix.Getxattr(e.bp("f"), "user.wsfs", bbuf)
		bgot := ""
		if bn > 0 {
			bgot = string(bbuf[:bn])
		}
		lbuf := make([]byte, 256)
		ln, e3 := unix.Listxattr(p, lbuf)
		list := userXattrs(lbuf[:max(ln, 0)])
		e4 := unix.Removexattr(p, "user.wsfs")
		_, e5 := unix.Getxattr(p, "user.wsfs", buf)
		ln2, _ := unix.Listxattr(p, lbuf)
		list2 := userXattrs(lbuf[:max(ln2, 0)])
		_, e6 := unix.Getxattr(e.bp("f"), "user.wsfs", buf)
		res := fmt.Sprintf("set=%s get=%q/%s backing-get=%q list=%v/%s remove=%s get-after=%s list-after=%v backing-after=%s",
			errName(errnoOf(e1)), got, errName(errnoOf(e2)), bgot, list, errName(errnoOf(e3)), errName(errnoOf(e4)), errName(errnoOf(e5)), list2, errName(errnoOf(e6)))
		want := fmt.Sprintf("set=%[1]s get=\"v1\"/%[1]s backing-get=\"v1\" list=[user.wsfs]/%[1]s remove=%[1]s get-after=%[2]s list-after=[] backing-after=%[2]s", errName(0), errName(syscall.ENODATA))
		if res != want {
			t.Errorf("%s: user xattrs:\n  got  %s\n  want %s", e.label, res, want)
		}
		return res
	})
}

func userXattrs(b []byte) []string {
	out := []string{}
	for _, s := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(s, "user.") {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

const mmapScript = `
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b"HELLO"
m[4096:4101] = b"WORLD"
m.flush()
m.close()
os.close(fd)
print("ok")
`

func TestExt4MmapSharedReachesBacking(t *testing.T) {
	need(t, "python3")
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("m"), string(make([]byte, 8192)), 0o644)
		out := shOK(t, e.dir, "python3 -c "+shq(mmapScript)+" m")
		b, _ := os.ReadFile(e.bp("m"))
		viaMount, _ := os.ReadFile(e.p("m"))
		ok := len(b) == 8192 && string(b[:5]) == "HELLO" && string(b[4096:4101]) == "WORLD" && bytes.Equal(b, viaMount)
		res := fmt.Sprintf("child=%q backing-has-writes=%v", out, ok)
		if !ok {
			t.Errorf("%s: MAP_SHARED write + msync: backing file len %d, [0:5]=%q [4096:4101]=%q, equal-to-mount-read=%v; want HELLO, WORLD, equal",
				e.label, len(b), b[:min(5, len(b))], b[min(4096, len(b)):min(4101, len(b))], bytes.Equal(b, viaMount))
		}
		return res
	})
}

func TestExt4Fallocate(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		f, err := os.OpenFile(e.p("fa"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		e1 := syscall.Fallocate(fd, 0, 0, 1<<20)
		var st1, st2 syscall.Stat_t
		syscall.Fstat(fd, &st1)
		b1 := lstatT(t, e.bp("fa"))
		e2 := syscall.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 1<<20, 1<<20)
		syscall.Fstat(fd, &st2)
		b2 := lstatT(t, e.bp("fa"))
		res := fmt.Sprintf("plain=%s size=%d blocks=%d; keep-size=%s size=%d blocks=%d",
			errName(errnoOf(e1)), st1.Size, st1.Blocks, errName(errnoOf(e2)), st2.Size, st2.Blocks)
		if e1 != nil || e2 != nil || st1.Size != 1<<20 || st2.Size != 1<<20 || st1.Blocks < 2048 || st2.Blocks < 4096 {
			t.Errorf("%s: fallocate: %s; want success, size 1048576 both times, blocks >= 2048 then >= 4096", e.label, res)
		}
		if st1.Blocks != b1.Blocks || st2.Blocks != b2.Blocks || b2.Size != 1<<20 {
			t.Errorf("%s: fallocate: blocks through fd %d/%d, backing %d/%d (backing size %d); want equal", e.label, st1.Blocks, st2.Blocks, b1.Blocks, b2.Blocks, b2.Size)
		}
		return res
	})
}

// TestExt4LongRelativePath: a 4095-byte relative path of nested 255-byte
// names is created, renamed, linked, chmodded, truncated and removed (the
// server must work from a parent descriptor and one name: root+"/"+path would
// exceed PATH_MAX).
func TestExt4LongRelativePath(t *testing.T) {
	comp := func(c byte, i int) string { return fmt.Sprintf("%02d", i) + strings.Repeat(string(c), 253) }
	var dirs []string
	for i := 1; i <= 15; i++ {
		dirs = append(dirs, comp('d', i))
	}
	D := strings.Join(dirs, "/")
	P, P2, P3 := D+"/"+comp('f', 0), D+"/"+comp('g', 0), D+"/"+comp('h', 0)
	if len(P) != 4095 || len(P2) != 4095 || len(P3) != 4095 {
		t.Fatalf("path lengths %d %d %d, want 4095", len(P), len(P2), len(P3))
	}
	script := fmt.Sprintf(`set -e
D=%s; P=%s; P2=%s; P3=%s; B="$1"
acc=""
for c in %s; do acc=${acc:+$acc/}$c; mkdir "$acc"; done
printf 'hello world' > "$P"
mv "$P" "$P2"
ln "$P2" "$P3"
chmod 640 "$P2"
truncate -s 5 "$P3"
echo "len=${#P2} $(stat -c '%%a %%h %%s' "$P2") $(cat "$P3") entries=$(ls "$D" | wc -l)"
echo "physical: $(cd "$B" && stat -c '%%a %%h %%s' "$P2" && cat "$P3")"
# cd step by step, then work with short names
( for c in %s; do cd "$c"; done; echo "cd-walk: $(ls | tr '\n' ' ' | wc -c) $(stat -c '%%a' "$(ls | head -1)")" )
rm "$P2"
echo "after-rm: $(stat -c %%h "$P3")"
rm "$P3"
acc="$D"
while [ -n "$acc" ]; do rmdir "$acc"; case "$acc" in */*) acc=${acc%%/*};; *) acc="";; esac; done
echo "left=$(ls | wc -l)"
`, shq(D), shq(P), shq(P2), shq(P3), strings.Join(dirs, " "), strings.Join(dirs, " "))
	parity(t, func(t *testing.T, e pEnv) string {
		out, errOut, code := shEnv(t, e.dir, nil, "set -- "+shq(e.backing)+"\n"+script)
		if code != 0 {
			t.Errorf("%s: 4095-byte path script failed (exit %d): stdout %q stderr %s", e.label, code, out, abbrev(errOut, 400))
		}
		want := "len=4095 640 2 5 hello entries=2\nphysical: 640 2 5\nhello\ncd-walk: 512 640\nafter-rm: 1\nleft=0\n"
		if out != want {
			t.Errorf("%s: 4095-byte relative path:\n  got  %q\n  want %q", e.label, out, want)
		}
		return out
	})
}

func TestExt4CreateModesUmask0(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		fd, err := syscall.Open(e.p("f"), syscall.O_CREAT|syscall.O_WRONLY, 0o620)
		if err != nil {
			t.Fatalf("%s: open(O_CREAT, 0620): %s", e.label, errName(errnoOf(err)))
		}
		var fst syscall.Stat_t
		syscall.Fstat(fd, &fst)
		syscall.Close(fd)
		if err := syscall.Mkdir(e.p("d"), 0o777); err != nil {
			t.Fatalf("%s: mkdir 0777: %v", e.label, err)
		}
		if err := syscall.Mkdir(e.p("s"), 0o1777); err != nil {
			t.Fatalf("%s: mkdir 01777: %v", e.label, err)
		}
		shOK(t, e.dir, "umask 0; : > f2; mkdir d2")
		m := func(p string) string { st := lstatT(t, p); return fmt.Sprintf("%#o", st.Mode&0o7777) }
		res := fmt.Sprintf("fstat=%#o f=%s d=%s s=%s f2=%s d2=%s", fst.Mode&0o7777, m(e.p("f")), m(e.p("d")), m(e.p("s")), m(e.p("f2")), m(e.p("d2")))
		bres := fmt.Sprintf("fstat=%#o f=%s d=%s s=%s f2=%s d2=%s", fst.Mode&0o7777, m(e.bp("f")), m(e.bp("d")), m(e.bp("s")), m(e.bp("f2")), m(e.bp("d2")))
		want := "fstat=0620 f=0620 d=0777 s=01777 f2=0666 d2=0777"
		if res != want || bres != want {
			t.Errorf("%s: modes with umask 0:\n  got     %s\n  backing %s\n  want    %s", e.label, res, bres, want)
		}
		return res
	})
}

func TestExt4ChmodThroughSecondLink(t *testing.T) {
	parity(t, func(t *testing.T, e pEnv) string {
		writeFileT(t, e.p("a"), "x", 0o644)
		lstatT(t, e.p("a")) // warm any cache for a
		if err := os.Link(e.p("a"), e.p("b")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(e.p("b"), 0o600); err != nil {
			t.Fatal(err)
		}
		a := lstatT(t, e.p("a"))
		res := fmt.Sprintf("a.mode=%#o a.nlink=%d", a.Mode&0o7777, a.Nlink)
		if res != "a.mode=0600 a.nlink=2" {
			t.Errorf("%s: after ln a b; chmod 600 b: %s, want a.mode=0600 a.nlink=2", e.label, res)
		}
		return res
	})
}

func TestExt4InodeNumbers(t *testing.T) {
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		writeFileT(t, filepath.Join(b, "f"), "x", 0o644)
		mkdirT(t, filepath.Join(b, "d/e"), 0o755)
		writeFileT(t, filepath.Join(b, "d/e/g"), "y", 0o644)
		symlinkT(t, "f", filepath.Join(b, "l"))
		os.Link(filepath.Join(b, "f"), filepath.Join(b, "d/hard"))
	}))
	writeFileT(t, filepath.Join(mnt, "created"), "z", 0o644)
	for _, rel := range []string{".", "f", "d", "d/e", "d/e/g", "l", "d/hard", "created"} {
		m, b := lstatT(t, filepath.Join(mnt, rel)), lstatT(t, filepath.Join(backing, rel))
		if m.Ino != b.Ino {
			t.Errorf("inode of %q: through mount %d, backing %d; want equal", rel, m.Ino, b.Ino)
		}
		if m.Mode != b.Mode || m.Nlink != b.Nlink || m.Size != b.Size || m.Mtim != b.Mtim || m.Ctim != b.Ctim {
			t.Errorf("attrs of %q: mount mode=%#o nlink=%d size=%d mtime=%v ctime=%v; backing mode=%#o nlink=%d size=%d mtime=%v ctime=%v",
				rel, m.Mode, m.Nlink, m.Size, m.Mtim, m.Ctim, b.Mode, b.Nlink, b.Size, b.Mtim, b.Ctim)
		}
	}
	// readdir d_ino agrees too (ls -i uses it without stat on some tools).
	out := shOK(t, mnt, "ls -1i f d l")
	outB := shOK(t, backing, "ls -1i f d l")
	if out != outB {
		t.Errorf("ls -i: mount %q, backing %q", out, outB)
	}
}
