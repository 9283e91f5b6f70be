package fusefs

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreatedPath: the O_PATH descriptor of a new file is the created
// object, also when the name was replaced on the host right after the
// create (then it comes from the open descriptor itself).
func TestCreatedPath(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	for _, replaced := range []bool{false, true} {
		name := fmt.Sprintf("f-%v", replaced)
		fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		var want unix.Stat_t
		if err := unix.Fstat(fd, &want); err != nil {
			t.Fatal(err)
		}
		if replaced {
			// Another object under the name: the new file, renamed away,
			// is still what the descriptor must name.
			if err := unix.Renameat(dfd, name, dfd, name+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkdirat(dfd, name, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		pfd, st, err := createdPath(dfd, name, fd)
		if err != nil {
			t.Fatalf("createdPath (replaced %v): %v", replaced, err)
		}
		var got syscall.Stat_t
		if err := fstat(pfd, &got); err != nil {
			t.Fatal(err)
		}
		if got.Ino != want.Ino || st.Ino != want.Ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			t.Errorf("replaced %v: descriptor names inode %d (stat %d, mode %o), want the created %d", replaced, got.Ino, st.Ino, st.Mode, want.Ino)
		}
		unix.Close(pfd)
		unix.Close(fd)
	}
}

// BenchmarkCreatedPath compares the create path's two ways to an O_PATH
// descriptor of the new file: reopening the name in its directory (and
// checking the inode) versus reopening the descriptor through /proc.
func BenchmarkCreatedPath(b *testing.B) {
	dir := b.TempDir()
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Open(filepath.Join(dir, "f"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	for _, c := range []struct {
		name string
		f    func() (int, syscall.Stat_t, error)
	}{
		{"name", func() (int, syscall.Stat_t, error) { return createdPath(dfd, "f", fd) }},
		{"proc", func() (int, syscall.Stat_t, error) { return pathOf(fd) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pfd, _, err := c.f()
				if err != nil {
					b.Fatal(err)
				}
				unix.Close(pfd)
			}
		})
	}
}
