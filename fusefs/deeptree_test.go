package fusefs_test

// A tree deeper than PATH_MAX through the mount (issue 20 item 17).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// deepName is the 250-byte name of level i of a deep chain: 40 levels of
// them are about 10,000 bytes deep, where PATH_MAX is 4096.
func deepName(i int) string { return strings.Repeat("d", 248) + fmt.Sprintf("%02d", i) }

// TestDeepTree builds, from a child shell that cds one level at a time, a
// chain of 40 directories with 250-byte names, and at the bottom makes,
// stats, renames, writes and reads files, refuses the protected git names,
// renames the top of the chain and removes it all with rm -rf: every step
// with exactly the results ext4 gives, and the backing tree as made.
func TestDeepTree(t *testing.T) {
	backing, mnt, _ := mountT(t)
	script := `set -e
n() { printf 'd%.0s' $(seq 248); printf '%02d' "$1"; }
i=1
while [ $i -le 40 ]; do
	d=$(n $i)
	mkdir "$d"
	cd "$d"
	touch f
	stat -c '%s %F' f >/dev/null
	i=$((i+1))
done
stat -c '%s %F %h' f
echo hello >g
mv g h
cat h
[ ! -e g ] && echo g-gone
mkdir sub
mv h sub/h
ls sub
touch .git 2>/dev/null || echo no-git-file
mkdir .git
touch .git/config 2>/dev/null || echo no-git-config
touch .git/other && echo git-other
rm -r .git
i=1
while [ $i -le 40 ]; do cd ..; i=$((i+1)); done
mv "$(n 1)" top
cd top
i=2
while [ $i -le 40 ]; do cd "$(n $i)"; i=$((i+1)); done
cat sub/h
ls
`
	out := shOK(t, mnt, script)
	want := "0 regular empty file 1\nhello\ng-gone\nh\nno-git-file\nno-git-config\ngit-other\nhello\nf\nsub\n"
	if out != want {
		t.Fatalf("deep tree through the mount:\n got %q\nwant %q", out, want)
	}
	// The backing tree as made: 40 directories, a file at every level,
	// the moved one at the bottom.
	if got := shOK(t, backing, `find top -type d | wc -l; find top -type f | wc -l; find top -name h -path '*/sub/h' | wc -l`); got != "41\n41\n1\n" {
		t.Fatalf("backing tree: got %q, want 41 directories, 41 files, one sub/h", got)
	}
	if got := shOK(t, mnt, `rm -rf top && ls -A`); got != "" {
		t.Fatalf("after rm -rf through the mount, the root lists %q, want nothing", got)
	}
	if got := shOK(t, backing, `ls -A`); got != "" {
		t.Fatalf("after rm -rf through the mount, the backing root lists %q, want nothing", got)
	}
}

// BenchmarkDeepTree is one create+fstatat+unlink round through the mount in
// the directory at depth 1, 20 and 40 of a chain of 250-byte names (beyond
// PATH_MAX from depth 17), made by descriptor, one level at a time. Compare
// the depths (ns/op): the per-operation cost should not grow with depth.
func BenchmarkDeepTree(b *testing.B) {
	for _, depth := range []int{1, 20, 40} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			mnt := mountB(b)
			fd, err := unix.Open(mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			for i := 1; i <= depth; i++ {
				if err := unix.Mkdirat(fd, deepName(i), 0o755); err != nil {
					b.Fatal(err)
				}
				next, err := unix.Openat(fd, deepName(i), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				unix.Close(fd)
				if err != nil {
					b.Fatal(err)
				}
				fd = next
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			for b.Loop() {
				f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				unix.Close(f)
				if err := unix.Fstatat(fd, "f", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					b.Fatal(err)
				}
				if err := unix.Unlinkat(fd, "f", 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// mountB mounts a fresh backing directory for a benchmark, as mountT does
// without the host view, and unmounts it in b.Cleanup.
func mountB(b *testing.B) string {
	b.Helper()
	dir := canonT(b, b.TempDir())
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	srv, err := fusefs.Mount(fusefs.Config{Root: backing, Mountpoint: mnt, Session: b.Name(),
		Logger: testLogger(), Policy: compileT(b, specFor(b, backing))})
	if err != nil {
		b.Fatalf("fusefs.Mount(root=%s, mnt=%s): %v", backing, mnt, err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(false); err != nil {
			b.Errorf("Unmount(%s): %v", mnt, err)
			srv.Unmount(true)
		}
	})
	if err := srv.DisablePoll(); err != nil {
		b.Fatalf("DisablePoll: %v", err)
	}
	return mnt
}
