// Command scalebench is the benchmark of issue 22 (hack/measure-scale.sh):
// for each count N of -n it starts one `wsfs serve` (the binary -wsfs) on a
// fresh state directory, creates N sessions one at a time through the API,
// each on its own small root, then reports create and remove latency
// (p50/p99 over all N, and p99 of the last tenth, to show whether the cost
// grows with the sessions already there), the daemon's memory per idle
// session (VmRSS from /proc/PID/status and Rss/Anonymous from
// /proc/PID/smaps_rollup, less the daemon's own with no session), its
// threads and open descriptors, its CPU while idle (utime+stime over -idle), and writes a heap
// profile (WSFS_DEBUG_HEAP_PROFILE, SIGUSR1) next to -out. It is a
// benchmark harness, not a test: it asserts nothing.
//
// A stage stops early when one create takes longer than -max-create or the
// daemon's RSS passes -max-rss-mib (the machine is shared); the report says
// where it stopped. Every session is removed and the daemon stopped before
// the next stage; a mount left under the work directory is detached and
// reported.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/mounts/client"
)

func main() {
	bin := flag.String("wsfs", "", "the wsfs binary to run as the daemon (absolute)")
	counts := flag.String("n", "100,1000,5000", "comma-separated session counts, one daemon each")
	work := flag.String("dir", "", "work directory (absolute; default a new one under $TMPDIR)")
	out := flag.String("out", "", "directory for the heap profiles heap-N.pprof (default the work directory)")
	idle := flag.Duration("idle", 10*time.Second, "how long to measure the idle daemon's CPU")
	maxCreate := flag.Duration("max-create", 5*time.Second, "stop a stage when one create takes longer")
	maxRSS := flag.Int("max-rss-mib", 8192, "stop a stage when the daemon's RSS passes this many MiB")
	keep := flag.String("keep-connections", "", "wsfs serve --keep-connections=VALUE (\"\": the daemon's default, true as root)")
	transport := flag.String("fuse-transport", "dev", "wsfs serve --fuse-transport (auto, io-uring, dev)")
	flag.Parse()
	keepFlag, transportFlag = *keep, *transport
	if *bin == "" || !filepath.IsAbs(*bin) {
		fatalf("-wsfs %q: want the absolute path of a wsfs binary", *bin)
	}
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatalf("-n %q: want positive counts separated by commas", *counts)
		}
		ns = append(ns, n)
	}
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "wsfs-scale-")
		if err != nil {
			fatalf("work directory: %v", err)
		}
		dir = d
		defer os.RemoveAll(dir)
	}
	if *out == "" {
		*out = dir
	}
	fmt.Printf("%-7s %-9s %-9s %-12s %-9s %-9s %-9s %-9s %-9s %-8s %-6s %-8s %s\n",
		"sessions", "create50", "create99", "create99last", "remove50", "remove99",
		"rss/sess", "anon/sess", "rssMiB", "threads", "fds", "idleCPU", "note")
	for _, n := range ns {
		r := stage(*bin, filepath.Join(dir, fmt.Sprintf("n%d", n)), n, *out, *idle, *maxCreate, *maxRSS)
		fmt.Println(r)
	}
}

// stage runs one daemon with n sessions and returns its report line.
func stage(bin, dir string, n int, out string, idle, maxCreate time.Duration, maxRSS int) string {
	if err := os.MkdirAll(filepath.Join(dir, "roots"), 0o755); err != nil {
		fatalf("%v", err)
	}
	defer func() {
		leftovers(dir)
		os.RemoveAll(dir)
	}()
	socket := filepath.Join(dir, "wsfs.sock")
	heap := filepath.Join(out, fmt.Sprintf("heap-%d.pprof", n))
	args := []string{"serve", "--socket", socket, "--state-dir", filepath.Join(dir, "state"),
		"--mount-base", filepath.Join(dir, "mnt"), "--log-level", "warn"}
	if transportFlag != "" {
		args = append(args, "--fuse-transport", transportFlag)
	}
	if keepFlag != "" {
		args = append(args, "--keep-connections="+keepFlag)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "WSFS_DEBUG_HEAP_PROFILE="+heap)
	logf, err := os.Create(filepath.Join(out, fmt.Sprintf("daemon-%d.log", n)))
	if err != nil {
		fatalf("%v", err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", bin, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	}()
	c := client.New(socket)
	defer c.Close()
	ctx := context.Background()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // waiting for a process to listen
		if _, err := c.Health(ctx); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			fatalf("daemon did not answer on %s", socket)
		}
	}
	for i := 0; i < n; i++ {
		root := filepath.Join(dir, "roots", id(i))
		os.MkdirAll(filepath.Join(root, "src"), 0o755)
		os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main\n"), 0o644)
		os.WriteFile(filepath.Join(root, "README"), []byte("x\n"), 0o644)
	}
	rss0, anon0 := memKiB(pid)
	fds0 := fdKinds(pid)
	hfds0 := fdKinds(holderPid(dir))
	note := ""
	var create []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		_, err := c.Create(ctx, api.CreateRequest{ID: id(i), Root: filepath.Join(dir, "roots", id(i))})
		d := time.Since(t0)
		if err != nil {
			note = fmt.Sprintf("stopped at %d: create: %v", i, err)
			break
		}
		create = append(create, d)
		if d > maxCreate {
			note = fmt.Sprintf("stopped at %d: create took %s", i+1, d.Round(time.Millisecond))
			break
		}
		if i%100 == 99 {
			if rss, _ := memKiB(pid); rss/1024 > maxRSS {
				note = fmt.Sprintf("stopped at %d: RSS %d MiB", i+1, rss/1024)
				break
			}
		}
	}
	made := len(create)
	// Idle: let the creates' garbage be collected, then measure.
	time.Sleep(2 * time.Second)
	rss1, anon1 := memKiB(pid)
	threads := statusField(pid, "Threads:")
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	fds1 := fdKinds(pid)
	holder := holderPid(dir)
	hfds1 := fdKinds(holder)
	cpu0 := cpuTicks(pid)
	time.Sleep(idle)
	cpu1 := cpuTicks(pid)
	idleCPU := float64(cpu1-cpu0) / 100 / idle.Seconds() * 100 // USER_HZ is 100 on Linux
	os.Remove(heap)
	cmd.Process.Signal(syscall.SIGUSR1)
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(heap); err == nil {
			break
		}
	}
	var remove []time.Duration
	for i := 0; i < made; i++ {
		t0 := time.Now()
		if err := c.Remove(ctx, id(i), false); err != nil {
			note += fmt.Sprintf("; remove %s: %v", id(i), err)
			break
		}
		remove = append(remove, time.Since(t0))
	}
	if made > 0 {
		fdReport(os.Stdout, n, "daemon", fds0, fds1, made)
		if holder > 0 {
			fdReport(os.Stdout, n, "holder", hfds0, hfds1, made)
		}
	}
	defer func() {
		if holder > 0 { // the holder outlives a SIGTERM'd daemon (it detaches)
			syscall.Kill(holder, syscall.SIGTERM)
		}
	}()
	per := func(a, b int) string {
		if made == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0fKiB", float64(b-a)/float64(made))
	}
	last := create
	if len(last) >= 10 {
		last = last[len(last)-len(last)/10:]
	}
	return fmt.Sprintf("%-7d %-9s %-9s %-12s %-9s %-9s %-9s %-9s %-9d %-8s %-6d %-8s %s",
		made, pct(create, 50), pct(create, 99), pct(last, 99), pct(remove, 50), pct(remove, 99),
		per(rss0, rss1), per(anon0, anon1), rss1/1024, threads, len(fds), fmt.Sprintf("%.1f%%", idleCPU), note)
}

// keepFlag and transportFlag are -keep-connections and -fuse-transport.
var keepFlag, transportFlag string

// fdKinds counts the open descriptors of pid by kind: the target of
// /proc/PID/fd/N with numbers dropped (socket, pipe, anon_inode:...,
// /memfd:NAME, /dev/fuse), "O_PATH" for a descriptor opened with O_PATH
// (/proc/PID/fdinfo/N flags), "dir" or "file" for other paths. nil for
// pid 0.
func fdKinds(pid int) map[string]int {
	if pid <= 0 {
		return nil
	}
	out := map[string]int{}
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range es {
		t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err != nil {
			continue
		}
		kind := t
		switch {
		case strings.HasPrefix(t, "socket:"):
			kind = "socket"
		case strings.HasPrefix(t, "pipe:"):
			kind = "pipe"
		case strings.HasPrefix(t, "/memfd:"):
			kind = strings.TrimSuffix(t, " (deleted)")
			if i := strings.IndexAny(kind, "0123456789"); i > 0 {
				kind = kind[:i] + "*"
			}
		case strings.HasPrefix(t, "anon_inode:"), t == "/dev/fuse", t == "/dev/null":
		default:
			info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
			flags := 0
			for _, l := range strings.Split(string(info), "\n") {
				if v, ok := strings.CutPrefix(l, "flags:"); ok {
					f, _ := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
					flags = int(f)
				}
			}
			if flags&010000000 != 0 {
				kind = "O_PATH"
			} else if fi, err := os.Stat(t); err == nil && fi.IsDir() {
				kind = "dir"
			} else {
				kind = "file"
			}
		}
		out[kind]++
	}
	return out
}

// fdReport prints, per kind, the descriptors of who with n sessions and
// the number per session (after less before, over made).
func fdReport(w *os.File, n int, who string, before, after map[string]int, made int) {
	var kinds []string
	for k := range after {
		kinds = append(kinds, k)
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		total += after[k]
	}
	fmt.Fprintf(w, "# %d sessions: %s descriptors %d\n", made, who, total)
	for _, k := range kinds {
		fmt.Fprintf(w, "#   %-28s %7d  %5.2f/session\n", k, after[k], float64(after[k]-before[k])/float64(made))
	}
}

// holderPid returns the pid of the descriptor holder (`wsfs holder
// --socket S`, S under dir) the daemon started, 0 when none runs.
func holderPid(dir string) int {
	es, _ := os.ReadDir("/proc")
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		a := strings.Split(string(b), "\x00")
		if len(a) >= 4 && a[1] == "holder" && a[2] == "--socket" && strings.HasPrefix(a[3], dir+"/") {
			return pid
		}
	}
	return 0
}

func id(i int) string { return fmt.Sprintf("s%05d", i) }

// pct returns the p-th percentile (nearest rank) of ds, "-" for none.
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := max((p*len(s)+99)/100-1, 0)
	return s[i].Round(100 * time.Microsecond).String()
}

// memKiB returns VmRSS (/proc/PID/status) and Anonymous
// (/proc/PID/smaps_rollup) of pid in KiB.
func memKiB(pid int) (rss, anon int) {
	rss, _ = strconv.Atoi(strings.Fields(statusField(pid, "VmRSS:") + " 0")[0])
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return rss, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Anonymous:"); ok {
			anon, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return rss, anon
}

// statusField returns the value of a line of /proc/PID/status.
func statusField(pid int, name string) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// cpuTicks returns utime+stime of pid in clock ticks (/proc/PID/stat).
func cpuTicks(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 13 {
			u, _ := strconv.Atoi(f[11])
			k, _ := strconv.Atoi(f[12])
			return u + k
		}
	}
	return 0
}

// leftovers detaches, by path, every mount still under dir (the daemon's
// SIGTERM unmounts them; this is for a daemon that died) and says so.
func leftovers(dir string) {
	data, _ := os.ReadFile("/proc/self/mounts")
	var left []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			left = append(left, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(left)))
	for _, mp := range left {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "scalebench: %d mounts left under %s, detached\n", len(left), dir)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scalebench: "+format+"\n", args...)
	os.Exit(1)
}
