package csi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
)

// --metrics-address unix:///PATH serves the daemon's metrics and the CSI
// calls: a published volume is a mounted session, a denial is counted by
// rule, and each call by method and code.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	msock := filepath.Join(e.dir, "metrics.sock")
	p := e.start(t, "--metrics-address", "unix://"+msock)
	target := filepath.Join(e.pods, "mount")
	if err := p.publish("vol-m", target, false, podAttrs(root, "m")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.unpublish("vol-m", target) })
	if err := os.WriteFile(filepath.Join(target, ".git", "config"), nil, 0o644); errnoOf(err) != syscall.EACCES {
		t.Fatalf("write .git/config: %v, want EACCES", err)
	}
	wantCode(t, "bad publish", p.publish("vol-x", target+"x", false, map[string]string{"root": e.outside}), codes.InvalidArgument)

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", msock)
	}}}
	resp, err := hc.Get("http://wsfs/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`wsfs_sessions{state="mounted"} 1`,
		`wsfs_policy_denials_total{session="vol-m",rule="protected:git:.git/config"} 1`,
		"wsfs_csi_volumes 1",
		"wsfs_csi_ready 1",
		`wsfs_csi_calls_total{method="NodePublishVolume",code="OK"} 1`,
		`wsfs_csi_calls_total{method="NodePublishVolume",code="InvalidArgument"} 1`,
		`wsfs_csi_call_duration_seconds_count{method="NodePublishVolume"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
