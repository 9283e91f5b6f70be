package csi

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/wsfs/wsfs/mounts"
)

// opBuckets are the upper bounds, in seconds, of the CSI call latency
// histogram.
var opBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// opKey labels wsfs_csi_calls_total.
type opKey struct {
	method string
	code   codes.Code
}

// opStats counts CSI calls.
type opStats struct {
	mu    sync.Mutex
	calls map[opKey]uint64
	hist  map[string][]uint64 // by method; len(opBuckets)+1
	sum   map[string]float64
}

func newOpStats() *opStats {
	return &opStats{calls: map[opKey]uint64{}, hist: map[string][]uint64{}, sum: map[string]float64{}}
}

// observe counts one call.
func (o *opStats) observe(method string, code codes.Code, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[opKey{method, code}]++
	h := o.hist[method]
	if h == nil {
		h = make([]uint64, len(opBuckets)+1)
		o.hist[method] = h
	}
	h[sort.SearchFloat64s(opBuckets, d.Seconds())]++
	o.sum[method] += d.Seconds()
}

// Metrics returns the plugin's metrics exposition (Prometheus text format
// 0.0.4): the daemon's (mounts.API.Metrics: sessions by state, FUSE
// operations and policy denials by session), then the published volumes
// and the CSI calls by method and gRPC code with their latency.
func (p *Plugin) Metrics() string {
	var b strings.Builder
	b.WriteString(p.api.Metrics())
	b.WriteString("# HELP wsfs_csi_volumes Volumes published on this node.\n# TYPE wsfs_csi_volumes gauge\n")
	fmt.Fprintf(&b, "wsfs_csi_volumes %d\n", len(p.volumeIDs()))
	ready := 0
	if p.ready.Load() && p.fuseErr.Load() == nil {
		ready = 1
	}
	b.WriteString("# HELP wsfs_csi_ready 1 when the plugin has restored its volumes and FUSE works.\n# TYPE wsfs_csi_ready gauge\n")
	fmt.Fprintf(&b, "wsfs_csi_ready %d\n", ready)
	o := p.stats
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]opKey, 0, len(o.calls))
	for k := range o.calls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].method != keys[j].method {
			return keys[i].method < keys[j].method
		}
		return keys[i].code < keys[j].code
	})
	b.WriteString("# HELP wsfs_csi_calls_total CSI calls, by method and gRPC code.\n# TYPE wsfs_csi_calls_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "wsfs_csi_calls_total{method=%q,code=%q} %d\n", k.method, k.code.String(), o.calls[k])
	}
	methods := make([]string, 0, len(o.hist))
	for m := range o.hist {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	b.WriteString("# HELP wsfs_csi_call_duration_seconds CSI call latency, by method.\n# TYPE wsfs_csi_call_duration_seconds histogram\n")
	for _, m := range methods {
		var cum uint64
		h := o.hist[m]
		for i, le := range opBuckets {
			cum += h[i]
			fmt.Fprintf(&b, "wsfs_csi_call_duration_seconds_bucket{method=%q,le=%q} %d\n", m, strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += h[len(opBuckets)]
		fmt.Fprintf(&b, "wsfs_csi_call_duration_seconds_bucket{method=%q,le=\"+Inf\"} %d\n", m, cum)
		fmt.Fprintf(&b, "wsfs_csi_call_duration_seconds_sum{method=%q} %s\n", m, strconv.FormatFloat(o.sum[m], 'g', -1, 64))
		fmt.Fprintf(&b, "wsfs_csi_call_duration_seconds_count{method=%q} %d\n", m, cum)
	}
	return b.String()
}

// MetricsHandler serves Metrics on GET (any path: mount it at /metrics).
func (p *Plugin) MetricsHandler() http.Handler {
	return mounts.MetricsHandler(p.Metrics)
}
