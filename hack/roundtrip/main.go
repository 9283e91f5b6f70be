// Command roundtrip makes N FUSE round trips of one kind on a file and
// prints the wall time per round trip and what the serving process spent on
// each: CPU time (utime + stime of /proc/PID/stat, proc(5)) and context
// switches (voluntary + involuntary, summed over /proc/PID/task/*/status).
// It is the client of hack/roundtrip.sh, a benchmark, not a test.
//
// Usage: roundtrip KIND FILE N SERVER_PID [THINK_MICROSECONDS [CLIENTS]]
//
// THINK_MICROSECONDS (0) of busy computation separate the round trips, as a
// tool's own work separates its system calls (`ls -l` formats a line
// between two lgetxattr(2)): an idle CPU then has to be woken for the
// request, which a tight loop never asks for.
//
// CLIENTS (1) threads make the N round trips each at the same time, thread
// i pinned to the i-th CPU the process may use (modulo their number), as a
// parallel tool (rg, make -j) or a process that moves between CPUs sends
// requests from several CPUs at once. With more than one, the wall time
// per round trip is the run's wall time over N (how long each client
// waited per call, on average), the server's CPU and context switches are
// per round trip of all clients, and the slowest single round trip is
// printed too.
//
// Kinds: statfs (statfs(2)), getxattr (lgetxattr(2) of security.selinux,
// which the kernel never caches), open (open(2) + close(2): OPEN and
// RELEASE), openread (open, read, fstat, close).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 5 || len(os.Args) > 7 {
		fmt.Fprintln(os.Stderr, "usage: roundtrip statfs|getxattr|open|openread FILE N SERVER_PID [THINK_MICROSECONDS [CLIENTS]]")
		os.Exit(2)
	}
	think, clients := 0, 1
	if len(os.Args) >= 6 {
		var err error
		if think, err = strconv.Atoi(os.Args[5]); err != nil || think < 0 {
			fmt.Fprintln(os.Stderr, "roundtrip: THINK_MICROSECONDS must be a non-negative integer")
			os.Exit(2)
		}
	}
	if len(os.Args) == 7 {
		var err error
		if clients, err = strconv.Atoi(os.Args[6]); err != nil || clients < 1 {
			fmt.Fprintln(os.Stderr, "roundtrip: CLIENTS must be a positive integer")
			os.Exit(2)
		}
	}
	kind, path := os.Args[1], os.Args[2]
	n, err1 := strconv.Atoi(os.Args[3])
	pid, err2 := strconv.Atoi(os.Args[4])
	if err1 != nil || err2 != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "roundtrip: N and SERVER_PID must be positive integers")
		os.Exit(2)
	}
	op, err := opFor(kind, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roundtrip:", err)
		os.Exit(2)
	}
	for i := 0; i < 1000; i++ { // warm up
		if err := op(); err != nil {
			fmt.Fprintln(os.Stderr, "roundtrip:", err)
			os.Exit(1)
		}
	}
	thinkFor := time.Duration(think) * time.Microsecond
	if clients > 1 {
		parallel(op, n, pid, thinkFor, clients, kind, think)
		return
	}
	var thought time.Duration
	cpu0, cs0 := usage(pid)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if thinkFor > 0 {
			s := time.Now()
			for time.Since(s) < thinkFor {
			}
			thought += time.Since(s)
		}
		if err := op(); err != nil {
			fmt.Fprintln(os.Stderr, "roundtrip:", err)
			os.Exit(1)
		}
	}
	wall := time.Since(t0) - thought
	cpu1, cs1 := usage(pid)
	fmt.Printf("%-8s think %3d µs  wall %6.2f µs  server CPU %6.2f µs  server context switches %5.2f  (per round trip, %d)\n",
		kind, think, float64(wall.Microseconds())/float64(n), float64(cpu1-cpu0)/float64(n), float64(cs1-cs0)/float64(n), n)
}

// parallel runs n round trips of op on each of clients threads at once,
// thread i pinned to the i-th allowed CPU, and prints the averages (see
// the package comment).
func parallel(op func() error, n, pid int, thinkFor time.Duration, clients int, kind string, think int) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		fmt.Fprintln(os.Stderr, "roundtrip: sched_getaffinity:", err)
		os.Exit(1)
	}
	var cpus []int
	for c := 0; c < len(allowed)*64; c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	type result struct {
		wall, thought, slowest time.Duration
		err                    error
	}
	results := make(chan result, clients)
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		go func(cpu int) {
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			var r result
			if r.err = unix.SchedSetaffinity(0, &set); r.err != nil {
				results <- r
				return
			}
			<-start
			t0 := time.Now()
			for j := 0; j < n; j++ {
				if thinkFor > 0 {
					s := time.Now()
					for time.Since(s) < thinkFor {
					}
					r.thought += time.Since(s)
				}
				s := time.Now()
				if r.err = op(); r.err != nil {
					break
				}
				r.slowest = max(r.slowest, time.Since(s))
			}
			r.wall = time.Since(t0)
			results <- r
		}(cpus[i%len(cpus)])
	}
	cpu0, cs0 := usage(pid)
	close(start)
	var wall, slowest time.Duration
	for i := 0; i < clients; i++ {
		r := <-results
		if r.err != nil {
			fmt.Fprintln(os.Stderr, "roundtrip:", r.err)
			os.Exit(1)
		}
		wall += r.wall - r.thought
		slowest = max(slowest, r.slowest)
	}
	cpu1, cs1 := usage(pid)
	total := float64(n * clients)
	fmt.Printf("%-8s think %3d µs  wall %6.2f µs  server CPU %6.2f µs  server context switches %5.2f  slowest %8.1f µs  (per round trip, %d clients × %d)\n",
		kind, think, float64(wall.Microseconds())/total, float64(cpu1-cpu0)/total, float64(cs1-cs0)/total,
		float64(slowest.Nanoseconds())/1e3, clients, n)
}

func opFor(kind, path string) (func() error, error) {
	buf := make([]byte, 4096)
	switch kind {
	case "statfs":
		return func() error { var s unix.Statfs_t; return unix.Statfs(path, &s) }, nil
	case "getxattr":
		return func() error {
			_, err := unix.Lgetxattr(path, "security.selinux", buf)
			if err == unix.ENODATA || err == unix.EOPNOTSUPP {
				err = nil
			}
			return err
		}, nil
	case "open", "openread":
		return func() error {
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			if kind == "openread" {
				var st unix.Stat_t
				if _, err := unix.Read(fd, buf); err != nil {
					unix.Close(fd)
					return err
				}
				if err := unix.Fstat(fd, &st); err != nil {
					unix.Close(fd)
					return err
				}
			}
			return unix.Close(fd)
		}, nil
	}
	return nil, fmt.Errorf("kind %q: want statfs, getxattr, open or openread", kind)
}

// usage returns pid's CPU time in µs and its threads' context switches.
func usage(pid int) (cpuMicros int64, switches int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	cpuMicros = (ut + st) * 1e6 / 100 // USER_HZ is 100 on Linux (proc(5))
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				switches += n
			}
		}
	}
	return cpuMicros, switches
}
