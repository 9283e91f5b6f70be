package transport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// killQueue arranges for the ring of queue cpu to fail (faultEnter) once
// armed is set, at the loop's first wait with a reply queued and not yet
// given to the kernel (a caller waits for it), and, with noRebuild, for
// its rebuild to fail too (faultRebuild). The hooks are reset in
// t.Cleanup, registered before the mount's so that they stay until every
// queue has ended.
func killQueue(t *testing.T, cpu int, noRebuild bool) *atomic.Bool {
	t.Helper()
	armed := new(atomic.Bool)
	faultEnter = func(q *queue) error {
		if q.qid == cpu && replyQueued(q) && armed.CompareAndSwap(true, false) {
			return errors.New("io_uring_enter: injected failure (test)")
		}
		return nil
	}
	if noRebuild {
		faultRebuild = func(q *queue) error {
			return errors.New("io_uring_setup: injected failure (test)")
		}
	}
	t.Cleanup(func() { faultEnter, faultRebuild = nil, nil })
	return armed
}

// replyQueued reports whether a commit (a reply) is queued on the ring
// of q and not yet taken by the kernel. On q's thread only.
func replyQueued(q *queue) bool {
	for _, e := range q.ents {
		if e != nil && e.op == uringCmdCommitAndFetch && e.on == q.r && !q.r.consumed(e.seq) {
			return true
		}
	}
	return false
}

// ringCPU returns a CPU this process may run on with a queue of its own,
// the last one: the kernel puts a request on the queue of its caller's
// CPU.
func ringCPU(t *testing.T) int {
	t.Helper()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset(1) missing")
	}
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	n, err := possibleCPUs()
	require.NoError(t, err)
	for cpu := n - 1; cpu >= 0; cpu-- {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	t.Skip("no possible CPU in this process's affinity mask")
	return -1
}

// onCPU runs argv in a child process pinned to cpu (taskset), never in
// this process, which serves the mount. A minute bounds the wait; a
// child still waiting then is left to the mount's cleanup, which ends a
// failed test's connection (a caller stuck in a FUSE request cannot be
// killed).
func onCPU(t *testing.T, cpu int, argv ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("taskset", append([]string{"-c", fmt.Sprint(cpu)}, argv...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(time.Minute):
		t.Fatalf("%v on CPU %d still waiting after a minute (a request left on a dead queue)", argv, cpu)
		return "", nil
	}
}

// TestURingQueueRebuilt: a queue whose ring fails (io_uring_enter, made
// to fail once while a reply it holds is not yet given to the kernel) is
// rebuilt on a new ring: the caller waiting for that reply gets it, and
// the queue's CPU is served afterwards (a write and read back, a
// listing), the other queues untouched. Killed again while 20 readers on
// that CPU wait on it at once (more than its entries), each gets its
// file's content. Before,
// the queue's loop returned and every request from that CPU waited for
// good (D state).
func TestURingQueueRebuilt(t *testing.T) {
	EnableKernelURing(t)
	cpu := ringCPU(t)
	armed := killQueue(t, cpu, false)
	m, err := mountLoopback(t, IOURing)
	require.NoError(t, err)
	require.True(t, m.u.Active(), "the ring serves")
	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("before\n"), 0o644))

	armed.Store(true)
	out, err := onCPU(t, cpu, "cat", filepath.Join(m.mnt, "f"))
	require.NoError(t, err, "the read whose reply the dead ring held: %s", out)
	require.Equal(t, "before\n", out)
	require.False(t, armed.Load(), "queue %d's ring was made to fail", cpu)
	require.Equal(t, uint64(1), m.u.rebuilt.Load(), "queue %d rebuilt", cpu)
	require.False(t, m.u.ended.Load())

	served := m.u.Served()
	out, err = onCPU(t, cpu, "sh", "-c", "cd "+m.mnt+" && printf 'after the rebuild' > g && cat g && echo && ls")
	require.NoError(t, err, "%s", out)
	require.Equal(t, "after the rebuild\nf\ng\n", out)
	got, err := os.ReadFile(filepath.Join(m.backing, "g"))
	require.NoError(t, err)
	require.Equal(t, "after the rebuild", string(got))

	// Killed again while more callers at once than the queue has entries
	// wait on it: those given entries of the old ring, those queued for
	// one, all are answered.
	armed.Store(true)
	const readers = 20
	var wg sync.WaitGroup
	outs := make([]string, readers)
	errs := make([]error, readers)
	for i := range readers {
		name := fmt.Sprintf("r%d", i)
		require.NoError(t, os.WriteFile(filepath.Join(m.backing, name), []byte(name+"\n"), 0o644))
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := exec.Command("taskset", "-c", fmt.Sprint(cpu), "cat", filepath.Join(m.mnt, name)).CombinedOutput()
			outs[i], errs[i] = string(b), err
		}()
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatalf("%d readers on CPU %d: some still waiting after a minute", readers, cpu)
	}
	for i := range readers {
		require.NoError(t, errs[i], "reader %d on CPU %d: %s", i, cpu, outs[i])
		require.Equal(t, fmt.Sprintf("r%d\n", i), outs[i])
	}
	require.False(t, armed.Load(), "queue %d's ring was made to fail again", cpu)
	require.Equal(t, uint64(2), m.u.rebuilt.Load(), "queue %d rebuilt twice", cpu)
	require.Greater(t, m.u.Served(), served, "served through the rebuilt ring")

	// Every other CPU is still served too.
	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	for c := range cpu {
		if set.IsSet(c) {
			out, err := onCPU(t, c, "cat", filepath.Join(m.mnt, "g"))
			require.NoError(t, err, "CPU %d: %s", c, out)
			require.Equal(t, "after the rebuild", out)
		}
	}
	require.Equal(t, uint64(2), m.u.rebuilt.Load())
	require.False(t, m.u.ended.Load())
}

// TestURingQueueNotRebuilt: when a failed queue cannot be rebuilt (its
// new ring made to fail), the connection is ended through fusectl, so
// nothing waits: the caller whose reply the dead ring held gets
// ECONNABORTED, later callers from that CPU and from the others ENOTCONN.
func TestURingQueueNotRebuilt(t *testing.T) {
	EnableKernelURing(t)
	cpu := ringCPU(t)
	armed := killQueue(t, cpu, true)
	m, err := mountLoopback(t, IOURing)
	require.NoError(t, err)
	require.True(t, m.u.Active(), "the ring serves")
	require.NotEmpty(t, m.u.conn, "the connection's fusectl name")
	require.NoError(t, os.WriteFile(filepath.Join(m.backing, "f"), []byte("before\n"), 0o644))

	armed.Store(true)
	f := filepath.Join(m.mnt, "f")
	out, err := onCPU(t, cpu, "cat", f)
	require.Error(t, err)
	require.Equal(t, "cat: "+f+": "+unix.ECONNABORTED.Error()+"\n", lowerFirst(out))
	require.True(t, m.u.ended.Load(), "the connection was ended")
	require.Equal(t, uint64(0), m.u.rebuilt.Load())

	var set unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &set))
	for c := 0; c <= cpu; c++ {
		if set.IsSet(c) {
			out, err := onCPU(t, c, "stat", "-c", "%n", f)
			require.Error(t, err, "CPU %d", c)
			require.Equal(t, "stat: cannot statx '"+f+"': "+unix.ENOTCONN.Error()+"\n", lowerFirst(out), "CPU %d", c)
		}
	}
}

// lowerFirst lowercases the first letter after the last ": " (strerror
// text is capitalised, Go's errno text is not).
func lowerFirst(s string) string {
	i := strings.LastIndex(s, ": ")
	if i < 0 || i+2 >= len(s) {
		return s
	}
	return s[:i+2] + strings.ToLower(s[i+2:i+3]) + s[i+3:]
}
