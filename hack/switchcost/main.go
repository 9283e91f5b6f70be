// Command switchcost measures what one FUSE round trip cannot go below on
// this machine. A request and its reply hand the CPU from the calling
// process to the server and back: two context switches, each between two
// address spaces. switchcost makes that hand-off without any file system:
// one byte sent back and forth N times over two pipes, between
//
//	thread-same    two threads of this process, both on the first CPU it
//	               may use (context switches without an address-space switch)
//	process-same   this process and a child, both on that CPU: the least a
//	               round trip over FUSE over io_uring costs, whose request
//	               is served on the caller's CPU (fs/fuse/dev_uring.c queues
//	               it on the ring of the caller's CPU)
//	process-cross  this process on that CPU and a child on the second one:
//	               a wake-up of another CPU, what a /dev/fuse round trip
//	               costs when the server thread that takes it sleeps there
//	               (left out on one CPU)
//
// and prints one line per mode: its name and the median over ROUNDS runs
// of the microseconds per round trip (wall time over N), e.g.
// "process-same 13.52". hack/roundtrip.sh prints these lines before its
// own. A benchmark, not a test.
//
// Usage: switchcost [-n N] [-rounds ROUNDS]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv carries the child's CPU; its pipe ends are fds 3 (read) and 4
// (write).
const childEnv = "SWITCHCOST_CHILD"

func main() {
	if v := os.Getenv(childEnv); v != "" {
		child(v)
		return
	}
	n := flag.Int("n", 50000, "round trips per run")
	rounds := flag.Int("rounds", 5, "runs per mode; the median is printed")
	flag.Parse()
	if *n < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "switchcost: -n and -rounds must be at least 1")
		os.Exit(2)
	}
	// Each side of the thread ping-pong keeps its P while it blocks in a
	// raw read, so both need one; and no garbage collection may start: its
	// stop-the-world would wait for the side blocked in read(2), which
	// waits for the side already stopped. Nothing here needs collecting.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	debug.SetGCPercent(-1)
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		fail(err)
	}
	var allowed []int
	for c := 0; c < 1024 && len(allowed) < 2; c++ {
		if cpus.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	modes := []struct {
		name string
		run  func() time.Duration
	}{
		{"thread-same", func() time.Duration { return threads(allowed[0], *n) }},
		{"process-same", func() time.Duration { return processes(allowed[0], allowed[0], *n) }},
	}
	if len(allowed) > 1 {
		modes = append(modes, struct {
			name string
			run  func() time.Duration
		}{"process-cross", func() time.Duration { return processes(allowed[0], allowed[1], *n) }})
	}
	for _, m := range modes {
		var us []float64
		for range *rounds {
			us = append(us, float64(m.run().Nanoseconds())/1e3/float64(*n))
		}
		slices.Sort(us)
		med := us[len(us)/2]
		if len(us)%2 == 0 {
			med = (us[len(us)/2-1] + med) / 2
		}
		fmt.Printf("%s %.2f\n", m.name, med)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "switchcost:", err)
	os.Exit(1)
}

// pin locks the calling goroutine to its thread and the thread to cpu,
// and returns what undoes both (the thread's CPUs as they were).
func pin(cpu int) (unpin func()) {
	runtime.LockOSThread()
	var old, s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		fail(err)
	}
	s.Set(cpu)
	if err := unix.SchedSetaffinity(0, &s); err != nil {
		fail(err)
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}
}

func pipes() (a, b [2]int) {
	if err := unix.Pipe2(a[:], unix.O_CLOEXEC); err != nil {
		fail(err)
	}
	if err := unix.Pipe2(b[:], unix.O_CLOEXEC); err != nil {
		fail(err)
	}
	return a, b
}

// rw reads or writes one byte of fd with a raw system call, as a C
// program would: the Go runtime's bookkeeping around a blocking call
// (entersyscall/exitsyscall) is not part of the hand-off measured. EINTR
// is retried (a pipe's read is restarted after a signal with SA_RESTART,
// as the runtime's are, so it should not occur).
func rw(trap uintptr, fd int, b *byte) (int, error) {
	for {
		m, _, errno := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(b)), 1)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(m), nil
	}
}

// ping sends n bytes on w, each after the answer to the previous one
// arrived on r, and returns the time it took.
func ping(r, w, n int) time.Duration {
	b := byte('x')
	start := time.Now()
	for range n {
		if _, err := rw(unix.SYS_WRITE, w, &b); err != nil {
			fail(err)
		}
		if _, err := rw(unix.SYS_READ, r, &b); err != nil {
			fail(err)
		}
	}
	return time.Since(start)
}

// echo answers every byte from r on w until r ends.
func echo(r, w int) {
	b := byte('x')
	for {
		m, err := rw(unix.SYS_READ, r, &b)
		if err != nil || m == 0 {
			return
		}
		if _, err := rw(unix.SYS_WRITE, w, &b); err != nil {
			return
		}
	}
}

func threads(cpu, n int) time.Duration {
	a, b := pipes()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pin(cpu)()
		echo(a[0], b[1])
	}()
	defer pin(cpu)()
	// One untimed round trip: the other thread has started and pinned
	// itself.
	ping(b[0], a[1], 1)
	d := ping(b[0], a[1], n)
	unix.Close(a[1])
	<-done
	for _, fd := range []int{a[0], b[0], b[1]} {
		unix.Close(fd)
	}
	return d
}

func processes(cpu, childCPU, n int) time.Duration {
	a, b := pipes()
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(childCPU), "GOMAXPROCS=1")
	childEnds := []*os.File{os.NewFile(uintptr(a[0]), "a"), os.NewFile(uintptr(b[1]), "b")}
	cmd.ExtraFiles = childEnds
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	for _, f := range childEnds {
		f.Close()
	}
	defer pin(cpu)()
	// One untimed round trip: the child has started and pinned itself.
	ping(b[0], a[1], 1)
	d := ping(b[0], a[1], n)
	unix.Close(a[1])
	if err := cmd.Wait(); err != nil {
		fail(err)
	}
	unix.Close(b[0])
	return d
}

func child(v string) {
	cpu, err := strconv.Atoi(v)
	if err != nil {
		fail(fmt.Errorf("%s=%q: not a CPU number", childEnv, v))
	}
	defer pin(cpu)()
	echo(3, 4)
}
