package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// EnableKernelURing sets URingParameter to Y for the test and puts the
// old value back in t.Cleanup; it skips the test when not root or when
// the kernel has no FUSE over io_uring.
func EnableKernelURing(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE over io_uring: needs root (mount, and " + URingParameter + ")")
	}
	old, err := os.ReadFile(URingParameter)
	if err != nil {
		t.Skipf("FUSE over io_uring: the kernel lacks it (%v)", err)
	}
	require.NoError(t, os.WriteFile(URingParameter, []byte("1"), 0))
	t.Cleanup(func() {
		v := "0"
		if strings.TrimSpace(string(old)) == "Y" {
			v = "1"
		}
		if err := os.WriteFile(URingParameter, []byte(v), 0); err != nil {
			t.Errorf("putting %s back: %v", URingParameter, err)
		}
	})
}

// countingFS counts FORGETs, which stay on /dev/fuse, and answers
// SETLKW once interrupted (a lock that never comes: only an INTERRUPT
// ends it, with EINTR), or with realLocks as the loopback does (the lock
// of the backing file), counting them in lockWaits as they arrive and in
// lockDone as they are answered.
type countingFS struct {
	fuse.RawFileSystem
	forgets     atomic.Int64
	forgot      chan struct{}
	setlkw      chan struct{}
	interrupted atomic.Int64
	realLocks   atomic.Bool
	lockWaits   atomic.Int64
	lockDone    atomic.Int64
	// threads counts, by operation, the LOOKUPs and FORGETs served on a
	// queue thread (OnQueueThread: [0]) and off one ([1]).
	threadsMu sync.Mutex
	threads   map[string][2]int
}

func (c *countingFS) onThread(op string) {
	i := 1
	if OnQueueThread() {
		i = 0
	}
	c.threadsMu.Lock()
	defer c.threadsMu.Unlock()
	if c.threads == nil {
		c.threads = map[string][2]int{}
	}
	n := c.threads[op]
	n[i]++
	c.threads[op] = n
}

func (c *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.onThread("lookup")
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c *countingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if c.realLocks.Load() {
		c.lockWaits.Add(1)
		defer c.lockDone.Add(1)
		return c.RawFileSystem.SetLkw(cancel, in)
	}
	c.setlkw <- struct{}{}
	<-cancel
	c.interrupted.Add(1)
	return fuse.EINTR
}

func (c *countingFS) Forget(nodeid, nlookup uint64) {
	c.onThread("forget")
	c.RawFileSystem.Forget(nodeid, nlookup)
	c.note(1)
}

func (c *countingFS) note(n int) {
	if c.forgets.Add(int64(n)) > 0 {
		select {
		case c.forgot <- struct{}{}:
		default:
		}
	}
}

type loopMount struct {
	srv      *fuse.Server
	u        *URing
	raw      *countingFS
	backing  string
	mnt      string
	startErr error
}

// mountLoopback mounts go-fuse's loopback file system over a fresh
// directory with the given mode, as fusefs does (NewURing, INIT with its
// capabilities, Serve, Start), and unmounts in t.Cleanup.
func mountLoopback(t *testing.T, mode Mode) (*loopMount, error) {
	t.Helper()
	return mountLoopbackWith(t, mode, 0, -1)
}

// mountLoopbackWith is mountLoopback with the ring's payload buffers
// sized for ringMaxWrite (0: the mount's MaxWrite) and, when failQueue
// >= 0, that queue failing its registration.
func mountLoopbackWith(t *testing.T, mode Mode, ringMaxWrite, failQueue int) (*loopMount, error) {
	t.Helper()
	m := &loopMount{backing: t.TempDir(), mnt: t.TempDir()}
	root, err := fs.NewLoopbackRoot(m.backing)
	require.NoError(t, err)
	hour := time.Hour
	opts := &fs.Options{EntryTimeout: &hour, AttrTimeout: &hour}
	opts.MountOptions = fuse.MountOptions{FsName: "wsfs-uring-test", Name: "wsfs", DirectMount: true, MaxWrite: 1 << 20, EnableLocks: true,
		// File data through the server (and so through the ring), not
		// FUSE passthrough.
		DisabledCapabilities: fuse.CAP_PASSTHROUGH}
	if ringMaxWrite == 0 {
		ringMaxWrite = opts.MountOptions.MaxWrite
	}
	u, err := NewURing(mode, ringMaxWrite, slog.Default())
	if err != nil {
		return nil, err
	}
	if u != nil {
		u.failQueue = failQueue
	}
	m.u = u
	opts.MountOptions.ExtraCapabilities |= u.Capabilities()
	m.raw = &countingFS{RawFileSystem: fs.NewNodeFS(root, opts), forgot: make(chan struct{}, 1), setlkw: make(chan struct{}, 1)}
	m.srv, err = fuse.NewServer(m.raw, m.mnt, &opts.MountOptions)
	if err != nil {
		u.Close()
		return nil, err
	}
	t.Cleanup(func() {
		if t.Failed() && m.u.Active() {
			// A caller may be stuck in a request no queue serves:
			// end the connection, or the unmount and the waits
			// below would wait with it.
			_ = m.u.endConn()
		}
		if err := unix.Unmount(m.mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m.mnt, err)
		}
		m.srv.Wait()
		m.u.Wait()
	})
	go m.srv.Serve()
	if u != nil {
		if m.startErr = u.Start(m.srv, m.mnt); m.startErr != nil {
			t.Logf("on /dev/fuse: %v", m.startErr)
		}
		u.Serve()
	}
	return m, nil
}

func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	require.NoError(t, err, "%s: %s", script, out)
	return string(out)
}

// TestURingServesRequests: with the parameter on and io-uring asked for,
// requests from another process arrive through the ring (a counter of
// ring-served requests), replies carry data both ways (a write, then the
// content read back, and a listing), and what stays on /dev/fuse still
// works: a notification drops a cached entry (FUSE_NOTIFY_INVAL_ENTRY
// while the ring serves), and dropping the kernel's caches sends FORGETs.
func TestURingServesRequests(t *testing.T) {
	EnableKernelURing(t)
	m, err := mountLoopback(t, IOURing)
	require.NoError(t, err)
	require.True(t, m.u.Active(), "the ring serves")

	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("hello\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(m.backing, "d"), 0o755))
	out := sh(t, "cd "+m.mnt+" && cat f && printf 'written through the ring' > d/g && cat d/g && echo && ls d")
	require.Equal(t, "hello\nwritten through the ring\ng\n", out)
	got, err := os.ReadFile(filepath.Join(m.backing, "d", "g"))
	require.NoError(t, err)
	require.Equal(t, "written through the ring", string(got))
	// The server's /dev/fuse descriptors (go-fuse's, the ring's) are not
	// inherited: a child holding one would keep the connection alive.
	require.NotContains(t, sh(t, "ls -l /proc/$$/fd"), "/dev/fuse")
	served := m.u.Served()
	t.Logf("ring-served requests after the first workload: %d", served)
	require.Greater(t, served, uint64(0), "requests served through the ring")

	// A big write and read (more than one page, up to MaxWrite).
	sh(t, "head -c 3000000 /dev/zero | tr '\\0' x > "+m.mnt+"/big")
	require.Equal(t, "3000000\n", sh(t, "tr -d '\\n' < "+m.mnt+"/big | wc -c | tr -d ' '"))

	// Notification on /dev/fuse: the entry is cached for an hour, the
	// backing file goes, the notification drops the entry.
	sh(t, "stat "+m.mnt+"/f >/dev/null")
	require.NoError(t, os.Remove(filepath.Join(m.backing, "f")))
	require.Equal(t, fuse.OK, m.srv.EntryNotify(fuse.FUSE_ROOT_ID, "f"))
	err = exec.Command("stat", m.mnt+"/f").Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "stat of the dropped entry fails: %v", err)

	// FORGET on /dev/fuse.
	require.NoError(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
	select {
	case <-m.raw.forgot:
	case <-time.After(30 * time.Second):
		t.Fatal("no FORGET arrived after drop_caches")
	}
	require.Greater(t, m.u.Served(), served)
}

// TestURingFallback: a registration that fails leaves the mount served
// on /dev/fuse, whole: when the kernel refuses the entries (payload
// buffers smaller than the connection's largest request, which also turns
// its ring off) and when one queue fails on the server's side while the
// others hold entries (turnOff's refused REGISTER releases the requests
// the kernel holds back for the ring).
func TestURingFallback(t *testing.T) {
	EnableKernelURing(t)
	for _, c := range []struct {
		name                    string
		ringMaxWrite, failQueue int
		want                    string
	}{
		{"kernel refuses", 4096, -1, "queue 0: FUSE_IO_URING_CMD_REGISTER: invalid argument"},
		{"one queue fails", 0, 1, "queue 1: registration skipped (test)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.failQueue >= 0 {
				if n, _ := possibleCPUs(); n < 2 {
					t.Skip("one possible CPU: no other queue holds entries")
				}
			}
			m, err := mountLoopbackWith(t, IOURing, c.ringMaxWrite, c.failQueue)
			require.NoError(t, err)
			require.EqualError(t, m.startErr, c.want)
			require.False(t, m.u.Active())
			require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("served\n"), 0o644))
			require.Equal(t, "served\n", sh(t, "cat "+m.mnt+"/f && ls "+m.mnt+" >/dev/null"))
			require.Equal(t, uint64(0), m.u.Served())
		})
	}
}

// TestURingAutoWithoutParameter: auto with the parameter off serves on
// /dev/fuse (no ring is made); io-uring is refused with the reason.
func TestURingAutoWithoutParameter(t *testing.T) {
	present, enabled := KernelURing()
	if enabled {
		t.Skip(URingParameter + " is Y: cannot check the fallback without changing it")
	}
	u, err := NewURing(Auto, 1<<20, slog.Default())
	require.NoError(t, err)
	require.Nil(t, u)
	_, err = NewURing(IOURing, 1<<20, slog.Default())
	if present {
		require.EqualError(t, err, "fuse transport io-uring: "+URingParameter+" is N (enable it: echo 1 > "+URingParameter+", or `options fuse enable_uring=1` in /etc/modprobe.d/)")
	} else {
		require.ErrorContains(t, err, "the kernel has no FUSE over io_uring")
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "io-uring", "dev"} {
		m, err := ParseMode(s)
		require.NoError(t, err)
		require.Equal(t, Mode(s), m)
	}
	_, err := ParseMode("uring")
	require.EqualError(t, err, `fuse transport "uring": must be auto, io-uring or dev`)
	t.Setenv(TestModeEnv, "dev")
	m, err := Resolve("")
	require.NoError(t, err)
	require.Equal(t, Dev, m)
	t.Setenv(TestModeEnv, "")
	m, err = Resolve("")
	require.NoError(t, err)
	require.Equal(t, Auto, m)
	m, err = Resolve(IOURing)
	require.NoError(t, err)
	require.Equal(t, IOURing, m)
	t.Setenv(TestModeEnv, "bad")
	_, err = Resolve("")
	require.EqualError(t, err, TestModeEnv+`: fuse transport "bad": must be auto, io-uring or dev`)
}

// TestURingInterrupt: a caller blocked in a FUSE request (SETLKW) and
// interrupted by a signal behaves the same under both transports: the
// kernel sends INTERRUPT on /dev/fuse, go-fuse cancels the request it
// serves (from the ring too: Server.HandleRequest shares the in-flight
// table), the file system answers EINTR, and the caller sees EINTR
// (caught signal without SA_RESTART; with it the kernel restarts the
// lock, fs/fuse/file.c) or dies by the signal (SIGTERM, default action).
func TestURingInterrupt(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) missing")
	}
	EnableKernelURing(t)
	for _, mode := range []Mode{Dev, IOURing} {
		t.Run(string(mode), func(t *testing.T) {
			m, err := mountLoopback(t, mode)
			require.NoError(t, err)
			require.Equal(t, mode == IOURing, m.u.Active())
			f := filepath.Join(m.mnt, "f")
			require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), nil, 0o644))

			// A caught signal (flock(1)'s timeout: SIGALRM, a handler
			// without SA_RESTART): flock(2) returns EINTR, which
			// flock(1) reports with the conflict exit code (-E).
			fl := exec.Command("flock", "-E", "99", "-w", "1", f, "true")
			require.NoError(t, fl.Start())
			t.Cleanup(func() { fl.Process.Kill(); fl.Wait() })
			waitSetlkw(t, m)
			err = fl.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "flock -w: %v", err)
			require.Equal(t, 99, ee.ExitCode(), "flock -w: EINTR from the interrupted SETLKW")
			require.Equal(t, int64(1), m.raw.interrupted.Load())

			// SIGTERM: the process exits by the signal.
			fl = exec.Command("flock", "-x", f, "true")
			require.NoError(t, fl.Start())
			t.Cleanup(func() { fl.Process.Kill(); fl.Wait() })
			waitSetlkw(t, m)
			require.NoError(t, fl.Process.Signal(unix.SIGTERM))
			err = fl.Wait()
			require.True(t, errors.As(err, &ee), "flock: %v", err)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == unix.SIGTERM, "flock: %v", err)
			require.Equal(t, int64(2), m.raw.interrupted.Load())
			if mode == IOURing {
				require.Greater(t, m.u.Served(), uint64(0))
			}
		})
	}
}

// TestURingLockWaitersKeepQueue: 20 flock(2) waiters blocked on one
// CPU's queue (a lock another process holds, each waiter's SETLKW kept
// by its ring entry until the lock comes) leave the queue serving: every
// waiter's request reaches the server, a read from that CPU is answered
// while they wait, and once the lock is released each waiter gets it in
// turn. With a fixed 8 entries per queue the 9th waiter's request, and
// the read behind it, waited in the kernel for an entry that never came.
func TestURingLockWaitersKeepQueue(t *testing.T) {
	for _, tool := range []string{"flock", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " missing")
		}
	}
	EnableKernelURing(t)
	m, err := mountLoopback(t, IOURing)
	require.NoError(t, err)
	require.True(t, m.u.Active(), "the ring serves")
	m.raw.realLocks.Store(true)
	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "lock"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("answered\n"), 0o644))
	lock := filepath.Join(m.mnt, "lock")
	// Every process on CPU 0: the kernel queues a request on the queue of
	// the CPU its caller runs on.
	onCPU0 := func(ctx context.Context, argv ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "taskset", append([]string{"-c", "0"}, argv...)...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // kills what is still running, before the unmount

	// The holder takes the lock, says so, and keeps it until its
	// standard input closes.
	holder := onCPU0(ctx, "flock", "-x", lock, "sh", "-c", "echo held; read x; exit 0")
	stdin, err := holder.StdinPipe()
	require.NoError(t, err)
	stdout, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	line := make([]byte, 5)
	_, err = io.ReadFull(stdout, line)
	require.NoError(t, err)
	require.Equal(t, "held\n", string(line))

	const waiters = 20
	var ws []*exec.Cmd
	for range waiters {
		w := onCPU0(ctx, "flock", "-x", lock, "true")
		require.NoError(t, w.Start())
		ws = append(ws, w)
	}
	// The holder's SETLKW and each waiter's reach the server.
	deadline := time.Now().Add(60 * time.Second)
	for m.raw.lockWaits.Load() < waiters+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lock requests reached the server: the others wait in the kernel for a ring entry", m.raw.lockWaits.Load(), waiters+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A read from the same CPU while they wait.
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	out, err := onCPU0(rctx, "cat", filepath.Join(m.mnt, "f")).CombinedOutput()
	require.NoError(t, err, "the read behind 20 lock waiters: %s", out)
	require.Equal(t, "answered\n", string(out))
	require.Equal(t, int64(1), m.raw.lockDone.Load(), "lock requests answered while the lock was held: the holder's alone")

	// The lock released, each waiter takes it and exits with 0.
	require.NoError(t, stdin.Close())
	require.NoError(t, holder.Wait())
	for i, w := range ws {
		require.NoError(t, w.Wait(), "waiter %d", i)
	}
	require.Equal(t, int64(waiters+1), m.raw.lockWaits.Load())
	require.Equal(t, int64(waiters+1), m.raw.lockDone.Load())
}

func waitSetlkw(t *testing.T, m *loopMount) {
	t.Helper()
	select {
	case <-m.raw.setlkw:
	case <-time.After(30 * time.Second):
		t.Fatal("no SETLKW reached the server")
	}
}

// TestURingThreadBound: past MaxRingThreads queue threads in the process,
// a new mount gets no ring (it is served on /dev/fuse), even asked for
// io-uring; the threads of rings that end are given back.
func TestURingThreadBound(t *testing.T) {
	EnableKernelURing(t)
	ringThreads.Add(MaxRingThreads)
	u, err := NewURing(IOURing, 1<<20, slog.Default())
	ringThreads.Add(-MaxRingThreads)
	require.NoError(t, err)
	require.Nil(t, u)
	before := ringThreads.Load()
	u, err = NewURing(IOURing, 1<<20, slog.Default())
	require.NoError(t, err)
	require.NotNil(t, u)
	require.Equal(t, before+int64(u.Queues()), ringThreads.Load())
	u.Close()
	require.Equal(t, before, ringThreads.Load())
}

// TestEnded: Ended is false while the connection serves and true once it
// is aborted through fusectl (a failed takeover relies on it to know the
// abort reached its own connection); the mount then answers ENOTCONN.
func TestEnded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount(2), fusectl)")
	}
	m, err := mountLoopback(t, Dev)
	require.NoError(t, err)
	require.False(t, Ended(m.srv), "a connection being served")
	require.NoError(t, AbortConnection(FusectlName(m.mnt)))
	require.True(t, Ended(m.srv), "an aborted connection")
	var st unix.Statfs_t
	require.Equal(t, unix.ENOTCONN, unix.Statfs(m.mnt, &st))
}
