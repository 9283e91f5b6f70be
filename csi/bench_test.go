package csi_test

import (
	"bufio"
	"flag"
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

// benchVolumes is -csi.volumes: how many volumes BenchmarkPublishUnpublish
// publishes at once (hack/measure-csi.sh passes 1000).
var benchVolumes = flag.Int("csi.volumes", 200, "BenchmarkPublishUnpublish: volumes published at once")

// BenchmarkPublishUnpublish: per iteration, -csi.volumes (200)
// NodePublishVolume calls through gRPC (kubelet-shaped volume ids, each its
// own project root and target), then as many NodeUnpublishVolume. Reports
// p50/p99 of each call, the plugin's RSS growth per published volume
// (VmRSS with all published minus VmRSS before), its descriptors per
// volume and its CPU while all are published and idle (utime+stime over
// 5 s, percent of one CPU). Run with -benchtime=1x:
//
//	go test -run '^$' -bench PublishUnpublish -benchtime=1x ./csi/ -csi.volumes 1000
func BenchmarkPublishUnpublish(b *testing.B) {
	n := *benchVolumes
	e := newEnv(b)
	p := e.start(b)
	roots := make([]string, n)
	for i := range n {
		roots[i] = filepath.Join(e.allowed, fmt.Sprintf("p%04d", i))
		if err := os.MkdirAll(roots[i], 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var pubs, unpubs []time.Duration
	var perVol, fdsPerVol, idleCPU []float64
	pid := p.cmd.Process.Pid
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		before, fds0 := rssKiB(b, pid), openFds(b, pid)
		for i := range n {
			vid := fmt.Sprintf("csi-%060x%04x", it, i)
			start := time.Now()
			if err := p.publish(vid, filepath.Join(e.pods, fmt.Sprintf("t%04d", i)), false, podAttrs(roots[i], fmt.Sprint(i))); err != nil {
				b.Fatalf("publish %d: %v", i, err)
			}
			pubs = append(pubs, time.Since(start))
		}
		b.StopTimer()
		after := rssKiB(b, pid)
		perVol = append(perVol, float64(after-before)/float64(n))
		fdsPerVol = append(fdsPerVol, float64(openFds(b, pid)-fds0)/float64(n))
		t0, c0 := time.Now(), cpuTicks(b, pid)
		time.Sleep(5 * time.Second) // measuring idle CPU over a span, not synchronizing
		idleCPU = append(idleCPU, float64(cpuTicks(b, pid)-c0)/100/time.Since(t0).Seconds()*100)
		b.StartTimer()
		for i := range n {
			vid := fmt.Sprintf("csi-%060x%04x", it, i)
			start := time.Now()
			if err := p.unpublish(vid, filepath.Join(e.pods, fmt.Sprintf("t%04d", i))); err != nil {
				b.Fatalf("unpublish %d: %v", i, err)
			}
			unpubs = append(unpubs, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(pubs)
	slices.Sort(unpubs)
	b.ReportMetric(float64(n), "volumes")
	b.ReportMetric(float64(percentile(pubs, 50).Microseconds())/1000, "publish-p50-ms")
	b.ReportMetric(float64(percentile(pubs, 99).Microseconds())/1000, "publish-p99-ms")
	b.ReportMetric(float64(percentile(unpubs, 50).Microseconds())/1000, "unpublish-p50-ms")
	b.ReportMetric(float64(percentile(unpubs, 99).Microseconds())/1000, "unpublish-p99-ms")
	b.ReportMetric(slices.Max(perVol), "RSS-KiB/volume")
	b.ReportMetric(slices.Max(fdsPerVol), "fds/volume")
	b.ReportMetric(slices.Max(idleCPU), "idle-CPU-%")
	if left := mountsUnder(b, e.dir); len(left) != 0 {
		b.Fatalf("mounts left: %v", left)
	}
}

// openFds returns the number of open descriptors of process pid.
func openFds(tb testing.TB, pid int) int {
	tb.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		tb.Fatal(err)
	}
	return len(es)
}

// cpuTicks returns utime+stime of process pid in clock ticks
// (/proc/PID/stat; USER_HZ is 100 on Linux).
func cpuTicks(tb testing.TB, pid int) int {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}
