package mounts

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// latencyBuckets are the upper bounds, in seconds, of the API request
// latency histogram.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// metrics are the API's own counters; the per-session FUSE counters are read
// from each mount (fusefs.Server.Stats) when rendering.
type metrics struct {
	mu       sync.Mutex
	requests map[reqKey]uint64
	hist     map[string]*histogram // by route
}

// reqKey labels wsfs_api_requests_total.
type reqKey struct {
	route, method string
	status        int
}

// histogram is a cumulative Prometheus histogram.
type histogram struct {
	counts []uint64 // per bucket, not cumulative; len(latencyBuckets)+1 (the last is +Inf)
	sum    float64
	count  uint64
}

func newMetrics() *metrics {
	return &metrics{requests: map[reqKey]uint64{}, hist: map[string]*histogram{}}
}

// observe counts one request.
func (m *metrics) observe(route, method string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[reqKey{route, method, status}]++
	h := m.hist[route]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.hist[route] = h
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.count++
}

// render returns the Prometheus text exposition (format 0.0.4) of the
// daemon: sessions by state, FUSE operations and policy denials by session,
// API requests and their latency.
func (m *metrics) render(mgr *Manager) string {
	var b strings.Builder
	sessions := mgr.List(context.Background())
	states := map[string]int{StateMounted: 0, StateFailed: 0}
	for _, s := range sessions {
		states[s.State]++
	}
	b.WriteString("# HELP wsfs_sessions Sessions by state (mounted, failed).\n# TYPE wsfs_sessions gauge\n")
	for _, st := range []string{StateMounted, StateFailed} {
		fmt.Fprintf(&b, "wsfs_sessions{state=%q} %d\n", st, states[st])
	}

	stats := mgr.Stats()
	b.WriteString("# HELP wsfs_fuse_ops_total FUSE operations served, by session and operation.\n# TYPE wsfs_fuse_ops_total counter\n")
	for _, s := range stats {
		for _, op := range sortedKeys(s.Stats.Ops) {
			fmt.Fprintf(&b, "wsfs_fuse_ops_total{session=\"%s\",op=\"%s\"} %d\n", labelEscape(s.ID), labelEscape(op), s.Stats.Ops[op])
		}
	}
	b.WriteString("# HELP wsfs_policy_denials_total Operations the policy denied, by session and rule.\n# TYPE wsfs_policy_denials_total counter\n")
	for _, s := range stats {
		for _, rule := range sortedKeys(s.Stats.Denials) {
			fmt.Fprintf(&b, "wsfs_policy_denials_total{session=\"%s\",rule=\"%s\"} %d\n", labelEscape(s.ID), labelEscape(rule), s.Stats.Denials[rule])
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	b.WriteString("# HELP wsfs_api_requests_total API requests, by route, method and status code.\n# TYPE wsfs_api_requests_total counter\n")
	keys := make([]reqKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, c := keys[i], keys[j]
		if a.route != c.route {
			return a.route < c.route
		}
		if a.method != c.method {
			return a.method < c.method
		}
		return a.status < c.status
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "wsfs_api_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"} %d\n", labelEscape(k.route), k.method, k.status, m.requests[k])
	}
	b.WriteString("# HELP wsfs_api_request_duration_seconds API request latency, by route.\n# TYPE wsfs_api_request_duration_seconds histogram\n")
	for _, route := range sortedKeys(m.hist) {
		h := m.hist[route]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "wsfs_api_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %d\n", labelEscape(route), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(&b, "wsfs_api_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %d\n", labelEscape(route), cum)
		fmt.Fprintf(&b, "wsfs_api_request_duration_seconds_sum{route=\"%s\"} %s\n", labelEscape(route), strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(&b, "wsfs_api_request_duration_seconds_count{route=\"%s\"} %d\n", labelEscape(route), h.count)
	}
	return b.String()
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// labelEscape escapes a Prometheus label value: backslash, double quote and
// newline.
func labelEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
