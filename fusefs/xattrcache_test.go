package fusefs

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestXattrAbsentGeneration: an answer read before a drop is not stored
// after it; names expire; at most xattrAbsentMax names are kept.
func TestXattrAbsentGeneration(t *testing.T) {
	var c xattrAbsent
	gen := c.generation()
	c.drop() // a setxattr landed while the getxattr was under way
	c.note(gen, "user.a", time.Minute)
	if c.absent("user.a") {
		t.Fatal("an ENODATA read before a drop was remembered after it")
	}
	c.note(c.generation(), "user.a", time.Minute)
	if !c.absent("user.a") || c.absent("user.b") {
		t.Fatalf("absent(user.a), absent(user.b) = %v, %v; want true, false", c.absent("user.a"), c.absent("user.b"))
	}
	c.drop()
	if c.absent("user.a") {
		t.Fatal("remembered across a drop")
	}
	c.note(c.generation(), "user.a", time.Nanosecond)
	time.Sleep(time.Millisecond) // the entry's lifetime, not synchronization
	if c.absent("user.a") {
		t.Fatal("remembered past its lifetime")
	}
	for i := 0; i < 2*xattrAbsentMax; i++ {
		c.note(c.generation(), string(rune('a'+i)), time.Minute)
	}
	if len(c.names) != xattrAbsentMax {
		t.Fatalf("%d names kept, want %d", len(c.names), xattrAbsentMax)
	}
}

// BenchmarkGetxattrAbsent: GETXATTR of an absent name (ls -l's
// security.selinux) answered by the backing store through /proc/self/fd
// (syscall) and from the node's memory (cached).
func BenchmarkGetxattrAbsent(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	unix.Close(fd)
	pfd, err := openPath(unix.AT_FDCWD, p)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(pfd)
	buf := make([]byte, 256)
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"syscall", 0}, {"cached", time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			n := &node{m: &mount{xattrTTL: c.ttl}, desc: newDescriptor(shareFor(""), pfd, -1, nil, 0, false, nil)}
			for i := 0; i < b.N; i++ {
				if _, errno := n.Getxattr(context.Background(), "security.selinux", buf); errno != syscall.ENODATA {
					b.Fatalf("getxattr: %v, want ENODATA", errno)
				}
			}
		})
	}
}
