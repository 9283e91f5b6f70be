package csi_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssKiB returns the resident set size of process pid (VmRSS, KiB).
func rssKiB(tb testing.TB, pid int) int {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// percentile returns the p-th percentile (nearest rank) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p/100+0.5) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// BenchmarkPublishUnpublish200: per iteration, 200 NodePublishVolume calls
// through gRPC (kubelet-shaped volume ids, each its own project root and
// target), then 200 NodeUnpublishVolume. Reports p50/p99 of each call and
// the plugin's RSS growth per published volume (VmRSS with all 200
// published minus VmRSS before). Run with -benchtime=1x:
//
//	go test -run '^$' -bench PublishUnpublish200 -benchtime=1x ./csi/
func BenchmarkPublishUnpublish200(b *testing.B) {
	const n = 200
	e := newEnv(b)
	p := e.start(b)
	roots := make([]string, n)
	for i := range n {
		roots[i] = filepath.Join(e.allowed, fmt.Sprintf("p%03d", i))
		if err := os.MkdirAll(roots[i], 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var pubs, unpubs []time.Duration
	var perVol []float64
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		before := rssKiB(b, p.cmd.Process.Pid)
		for i := range n {
			vid := fmt.Sprintf("csi-%060x%04x", it, i)
			start := time.Now()
			if err := p.publish(vid, filepath.Join(e.pods, fmt.Sprintf("t%03d", i)), false, podAttrs(roots[i], fmt.Sprint(i))); err != nil {
				b.Fatalf("publish %d: %v", i, err)
			}
			pubs = append(pubs, time.Since(start))
		}
		after := rssKiB(b, p.cmd.Process.Pid)
		perVol = append(perVol, float64(after-before)/n)
		for i := range n {
			vid := fmt.Sprintf("csi-%060x%04x", it, i)
			start := time.Now()
			if err := p.unpublish(vid, filepath.Join(e.pods, fmt.Sprintf("t%03d", i))); err != nil {
				b.Fatalf("unpublish %d: %v", i, err)
			}
			unpubs = append(unpubs, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(pubs)
	slices.Sort(unpubs)
	b.ReportMetric(float64(percentile(pubs, 50).Microseconds())/1000, "publish-p50-ms")
	b.ReportMetric(float64(percentile(pubs, 99).Microseconds())/1000, "publish-p99-ms")
	b.ReportMetric(float64(percentile(unpubs, 50).Microseconds())/1000, "unpublish-p50-ms")
	b.ReportMetric(float64(percentile(unpubs, 99).Microseconds())/1000, "unpublish-p99-ms")
	b.ReportMetric(slices.Max(perVol), "RSS-KiB/volume")
	if left := mountsUnder(b, e.dir); len(left) != 0 {
		b.Fatalf("mounts left: %v", left)
	}
}
