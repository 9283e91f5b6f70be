package mounts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestMeasureSessionsPerDaemon is the Measure of issue 4: one daemon, 200
// sessions each on its own small root; it reports p50/p99 create and remove
// latency and the daemon's RSS per idle session. It runs only with
// WSFS_MEASURE=1 (hack/measure-sessions.sh); WSFS_MEASURE_N changes the count.
func TestMeasureSessionsPerDaemon(t *testing.T) {
	if os.Getenv("WSFS_MEASURE") != "1" {
		t.Skip("set WSFS_MEASURE=1 to measure (hack/measure-sessions.sh)")
	}
	n := 200
	if v := os.Getenv("WSFS_MEASURE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("WSFS_MEASURE_N=%q: want a positive count", v)
		}
	}
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for i := 0; i < n; i++ {
		mkTree(t, filepath.Join(dir, "roots", fmt.Sprintf("s%03d", i)), "src/main.go", "README")
	}
	if _, err := d.c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	rss0 := rssKiB(t, d.cmd.Process.Pid)
	create := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("s%03d", i)
		start := time.Now()
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: filepath.Join(dir, "roots", id)}); err != nil {
			t.Fatal(err)
		}
		create = append(create, time.Since(start))
	}
	rss1 := rssKiB(t, d.cmd.Process.Pid)
	remove := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := d.c.Remove(ctx, fmt.Sprintf("s%03d", i), false); err != nil {
			t.Fatal(err)
		}
		remove = append(remove, time.Since(start))
	}
	perSession := float64(rss1-rss0) / float64(n)
	report := fmt.Sprintf("sessions=%d create_p50=%s create_p99=%s remove_p50=%s remove_p99=%s rss_before=%dKiB rss_after=%dKiB rss_per_session=%.0fKiB (%.2fMiB)",
		n, pct(create, 50), pct(create, 99), pct(remove, 50), pct(remove, 99), rss0, rss1, perSession, perSession/1024)
	t.Log(report)
	fmt.Println("MEASURE", report)
}

// pct returns the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s)+99)/100 - 1
	if i < 0 {
		i = 0
	}
	return s[i].Round(10 * time.Microsecond)
}

// rssKiB returns the resident set size of pid in KiB (VmRSS).
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb
		}
	}
	t.Fatalf("/proc/%d/status: no VmRSS", pid)
	return 0
}
