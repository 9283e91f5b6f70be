package transport

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// threadUmask reads the calling thread's umask from /proc/thread-self/status
// (proc(5), "Umask:").
func threadUmask(t *testing.T) string {
	b, err := os.ReadFile("/proc/thread-self/status")
	require.NoError(t, err)
	i := bytes.Index(b, []byte("\nUmask:\t"))
	require.GreaterOrEqual(t, i, 0, "no Umask line in /proc/thread-self/status")
	line := b[i+len("\nUmask:\t"):]
	return string(line[:bytes.IndexByte(line, '\n')])
}

// TestPrivateFS: a thread given a file system context of its own is
// reported by OnQueueThread until forgotten, and a umask set there is that
// thread's only: another thread of the process keeps the process's.
func TestPrivateFS(t *testing.T) {
	require.False(t, OnQueueThread(), "a test goroutine's thread")
	process := threadUmask(t)
	type seen struct{ before, during, after bool }
	got := make(chan seen)
	umaskThere := make(chan string)
	otherThread := make(chan string)
	go func() {
		// Locked for good: the thread exits with this goroutine, as a
		// queue thread does.
		runtime.LockOSThread()
		var s seen
		s.before = OnQueueThread()
		forget := privateFS()
		s.during = OnQueueThread()
		old := unix.Umask(0o027)
		umaskThere <- threadUmask(t)
		<-otherThread
		unix.Umask(old)
		forget()
		s.after = OnQueueThread()
		got <- s
	}()
	require.Equal(t, "0027", <-umaskThere, "the umask set on the private thread")
	require.Equal(t, process, threadUmask(t), "another thread keeps the process's umask meanwhile")
	otherThread <- ""
	require.Equal(t, seen{before: false, during: true, after: false}, <-got)
}

// TestURingQueueThreads: requests through the ring are served on queue
// threads (OnQueueThread in the handler); FORGETs, read from /dev/fuse,
// are not.
func TestURingQueueThreads(t *testing.T) {
	EnableKernelURing(t)
	m, err := mountLoopback(t, IOURing)
	require.NoError(t, err)
	require.True(t, m.u.Active(), "the ring serves")
	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("x"), 0o644))
	sh(t, "stat "+m.mnt+"/f >/dev/null")
	require.NoError(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
	select {
	case <-m.raw.forgot:
	case <-time.After(30 * time.Second):
		t.Fatal("no FORGET arrived after drop_caches")
	}
	m.raw.threadsMu.Lock()
	defer m.raw.threadsMu.Unlock()
	require.Equal(t, [2]int{1, 0}, m.raw.threads["lookup"], "the LOOKUP of f, on a queue thread")
	require.Equal(t, 0, m.raw.threads["forget"][0], "no FORGET on a queue thread")
	require.Greater(t, m.raw.threads["forget"][1], 0, "FORGETs, off the queue threads")
}
