package mounts_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The sync barrier (POST /v1/sessions/{id}/sync): host changes made before
// it are visible through the mount right after it.

// probeBase is the mtime the host gives file t in round 0 (seconds).
const probeBase = 1_600_000_000

// probeHelper is the child that reads through the mount: cwd-independent,
// it reads round numbers on stdin and, for round i, checks in dir (the
// session's mount) what the host made (new/f<i> holds "<i>\n", app is i+1
// bytes, t has mtime probeBase+i, d holds only m<i>), answering "ok" or
// "stale <what>"; then it looks up new/f<i+1>, so that the kernel holds a
// negative entry for the next round's new file.
func probeHelper(dir string) int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		i, err := strconv.Atoi(in.Text())
		if err != nil {
			fmt.Println("bad round", in.Text())
			return 2
		}
		var stale []string
		if b, err := os.ReadFile(filepath.Join(dir, "new", fmt.Sprintf("f%d", i))); err != nil || string(b) != fmt.Sprintf("%d\n", i) {
			stale = append(stale, fmt.Sprintf("new/f%d=%q,%v", i, b, err))
		}
		if fi, err := os.Stat(filepath.Join(dir, "app")); err != nil || fi.Size() != int64(i+1) {
			stale = append(stale, fmt.Sprintf("app size %v", statSize(fi, err)))
		}
		if fi, err := os.Stat(filepath.Join(dir, "t")); err != nil || fi.ModTime().Unix() != probeBase+int64(i) {
			stale = append(stale, fmt.Sprintf("t mtime %v %v", modUnix(fi), err))
		}
		ents, err := os.ReadDir(filepath.Join(dir, "d"))
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if err != nil || !slices.Equal(names, []string{fmt.Sprintf("m%d", i)}) {
			stale = append(stale, fmt.Sprintf("d lists %v %v", names, err))
		}
		if _, err := os.Stat(filepath.Join(dir, "d", fmt.Sprintf("m%d", i))); err != nil {
			stale = append(stale, fmt.Sprintf("d/m%d: %v", i, err))
		}
		os.Stat(filepath.Join(dir, "new", fmt.Sprintf("f%d", i+1)))
		if len(stale) > 0 {
			fmt.Println("stale " + strings.Join(stale, "; "))
		} else {
			fmt.Println("ok")
		}
	}
	return 0
}

func statSize(fi os.FileInfo, err error) any {
	if err != nil {
		return err
	}
	return fi.Size()
}

func modUnix(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.ModTime().Unix()
}

// probe is a running probeHelper.
type probe struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// startPiped starts cmd (its stderr this process's) with pipes to its
// stdin and from its stdout; Cleanup closes stdin and waits for it.
func startPiped(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return in, bufio.NewReader(out)
}

// startProbe starts probeHelper on dir in a child copy of the test binary.
func startProbe(t testing.TB, dir string) *probe {
	t.Helper()
	cmd := exec.Command(os.Args[0], dir)
	cmd.Env = append(os.Environ(), helperEnv+"=probe")
	in, out := startPiped(t, cmd)
	return &probe{in: in, out: out}
}

// ask runs round i in the probe and returns its answer.
func (p *probe) ask(t testing.TB, i int) string {
	t.Helper()
	fmt.Fprintf(p.in, "%d\n", i)
	l, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return strings.TrimSuffix(l, "\n")
}

// hostRound makes round i's host changes in root: new/f<i>, one more byte
// in app, t's mtime, and d removed and made again holding m<i>.
func hostRound(t testing.TB, root string, i int) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "new", fmt.Sprintf("f%d", i)), []byte(fmt.Sprintf("%d\n", i)), 0o644))
	f, err := os.OpenFile(filepath.Join(root, "app"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	must(err)
	_, err = f.Write([]byte("x"))
	must(err)
	must(f.Close())
	mt := time.Unix(probeBase+int64(i), 0)
	must(os.Chtimes(filepath.Join(root, "t"), mt, mt))
	must(os.RemoveAll(filepath.Join(root, "d")))
	must(os.Mkdir(filepath.Join(root, "d"), 0o755))
	must(os.WriteFile(filepath.Join(root, "d", fmt.Sprintf("m%d", i)), nil, 0o644))
}

// syncSetup starts a daemon with session "sy" on a root holding new/, app
// (empty), t and d/, and a probe on its mount that has read all of it once.
func syncSetup(t testing.TB) (d *daemon, root string, p *probe) {
	t.Helper()
	dir := newDaemonDir(t)
	d = startDaemon(t, dir)
	root = filepath.Join(dir, "proj")
	mkTree(t, root, "new/", "t", "d/")
	if err := os.WriteFile(filepath.Join(root, "app"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.wsfs(t, "session", "create", "sy", "--root", root); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	p = startProbe(t, filepath.Join(d.mountBase, "sy"))
	p.ask(t, -1) // looks everything up once (stale answers: nothing made yet)
	return d, root, p
}

// TestSyncBarrier: 1,000 rounds (200 with -short) of host create, append,
// touch -d and rm -rf + mkdir, each followed by a sync and an immediate
// read through the mount from a child process whose kernel caches are
// warm: no stale answer.
func TestSyncBarrier(t *testing.T) {
	d, root, p := syncSetup(t)
	rounds := 1000
	if testing.Short() {
		rounds = 200
	}
	stale := 0
	for i := range rounds {
		hostRound(t, root, i)
		if err := d.c.Sync(t.Context(), "sy"); err != nil {
			t.Fatalf("round %d: sync: %v", i, err)
		}
		if got := p.ask(t, i); got != "ok" {
			stale++
			if stale <= 5 {
				t.Errorf("round %d after sync: %s", i, got)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d rounds stale after sync, want 0", stale, rounds)
	}
	if r := d.wsfs(t, "session", "sync", "sy"); r.code != 0 || r.stdout != "synced sy\n" {
		t.Errorf("session sync: %+v", r)
	}
	if r := d.wsfs(t, "session", "sync", "--json", "sy"); r.code != 0 || r.stdout != "{\"session\":\"sy\"}\n" {
		t.Errorf("session sync --json: %+v", r)
	}
	if r := d.wsfs(t, "session", "sync", "nope"); r.code != 1 || r.stderr != "wsfs: session \"nope\": no such session\n" {
		t.Errorf("session sync nope: %+v", r)
	}
}

// BenchmarkSync measures the sync barrier's latency (POST …/sync through
// the Go client, one round of host changes before each) and reports p50
// and p99, and how many rounds a probe saw stale without a sync.
func BenchmarkSync(b *testing.B) {
	d, root, p := syncSetup(b)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		hostRound(b, root, i)
		b.StartTimer()
		start := time.Now()
		if err := d.c.Sync(b.Context(), "sy"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if got := p.ask(b, i); got != "ok" {
			b.Fatalf("round %d stale after sync: %s", i, got)
		}
		b.StartTimer()
		i++
	}
	b.StopTimer()
	sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	stale := 0
	const n = 200
	for j := range n {
		hostRound(b, root, i+j)
		if p.ask(b, i+j) != "ok" {
			stale++
		}
	}
	b.ReportMetric(float64(stale)*100/n, "%stale-without-sync")
}
