package mounts_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// getMetrics GETs /metrics from a listener at network, address.
func getMetrics(t *testing.T, network, address string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://metrics/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on %s %s: %v", network, address, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

// TestServeMetricsAddress: `wsfs serve --metrics-address` serves the
// daemon's metrics on a Unix socket (mode 0600) or TCP, for a Prometheus
// that cannot reach the API socket.
func TestServeMetricsAddress(t *testing.T) {
	dir := newDaemonDir(t)
	msock := filepath.Join(dir, "metrics.sock")
	d := startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"), "--metrics-address", "unix://"+msock)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a")
	if r := d.wsfs(t, "session", "create", "m1", "--root", root); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	fi, err := os.Stat(msock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("metrics socket: %v %v, want a socket of mode 0600", fi, err)
	}
	if text := getMetrics(t, "unix", msock); !strings.Contains(text, "\nwsfs_sessions{state=\"mounted\"} 1\n") {
		t.Errorf("metrics on the unix socket lack the mounted session:\n%s", text)
	}
	d.stop()
	if _, err := os.Lstat(msock); !os.IsNotExist(err) {
		t.Errorf("metrics socket left after stop: %v", err)
	}

	dir2 := newDaemonDir(t)
	d2 := startDaemonAt(t, dir2, filepath.Join(dir2, "state"), filepath.Join(dir2, "mnt"), "--metrics-address", "127.0.0.1:0")
	m := regexp.MustCompile(`msg=metrics address=(127\.0\.0\.1:\d+)`).FindStringSubmatch(d2.logText())
	if m == nil {
		t.Fatalf("no metrics address logged:\n%s", d2.logText())
	}
	if text := getMetrics(t, "tcp", m[1]); !strings.Contains(text, "\nwsfs_sessions{state=\"mounted\"} 0\n") {
		t.Errorf("metrics on TCP:\n%s", text)
	}
	r := run(t, execWsfs("serve", "--socket", filepath.Join(dir2, "x.sock"), "--state-dir", filepath.Join(dir2, "st3"), "--metrics-address", "nowhere"))
	if want := `wsfs: --metrics-address: metrics address "nowhere": want unix:///ABSOLUTE/PATH or HOST:PORT` + "\n"; r.code != 2 || r.stderr != want {
		t.Errorf("bad --metrics-address: %+v, want %q", r, want)
	}
}

// TestServeRefusedLeavesNothing: a `wsfs serve` refused at start (the
// socket is live; the state directory is in use) exits 2 and leaves no
// directory or file it made (state, sessions, tmp, lock, mount base,
// socket directory), and logs no "sessions unmounted".
func TestServeRefusedLeavesNothing(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	other := t.TempDir()
	for _, tc := range []struct {
		name, want string
		args       []string
		left       []string
	}{
		{"live socket", "another daemon is listening on it",
			[]string{"--socket", d.socket, "--state-dir", filepath.Join(other, "st"), "--mount-base", filepath.Join(other, "mb")},
			[]string{filepath.Join(other, "st"), filepath.Join(other, "mb")}},
		{"state directory in use", "in use by another wsfs daemon",
			// --takeover=false: by default a second daemon takes the
			// running one's sessions over (TestSessionsOutliveDaemon).
			[]string{"--takeover=false", "--socket", filepath.Join(other, "sockdir", "wsfs.sock"), "--state-dir", d.stateDir, "--mount-base", filepath.Join(other, "mb2")},
			[]string{filepath.Join(other, "sockdir"), filepath.Join(other, "mb2")}},
	} {
		r := run(t, execWsfs(append([]string{"serve"}, tc.args...)...))
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "sessions unmounted") {
			t.Errorf("%s: %+v, want exit 2 with %q and no \"sessions unmounted\"", tc.name, r, tc.want)
		}
		for _, p := range tc.left {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s: %s left behind (%v)", tc.name, p, err)
			}
		}
	}
	if ents, err := os.ReadDir(d.stateDir); err != nil || len(ents) == 0 {
		t.Errorf("the running daemon's state directory: %v %v", ents, err)
	}
}

// execWsfs is the wsfs CLI with args, outside any daemon's socket
// environment.
func execWsfs(args ...string) *exec.Cmd {
	return exec.Command(wsfsBin, args...)
}
