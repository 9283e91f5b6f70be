package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts"
)

// Every volume id maps to a valid session id; kubelet's ephemeral ids (68
// characters) are hashed, valid ids kept, and no two ids of a large and
// adversarial set share a session id (in particular a volume id that looks
// like a hashed session id does not meet the id it looks like).
func TestSessionIDInjective(t *testing.T) {
	seen := map[string]string{}
	add := func(vid string) {
		t.Helper()
		sid := SessionID(vid)
		if err := mounts.ValidID(sid); err != nil {
			t.Fatalf("SessionID(%q) = %q: %v", vid, sid, err)
		}
		if other, ok := seen[sid]; ok && other != vid {
			t.Fatalf("volume ids %q and %q share session id %q", other, vid, sid)
		}
		seen[sid] = vid
	}
	for i := range 5000 {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		kubelet := "csi-" + hex.EncodeToString(sum[:])
		if len(kubelet) != 68 {
			t.Fatal(len(kubelet))
		}
		add(kubelet)
		add(fmt.Sprintf("vol-%d", i))
		add(SessionID(kubelet)) // a volume id spelled like a hashed session id
		add(strings.ToUpper(kubelet))
	}
	for _, vid := range []string{"a", ".", "..", "h.", "h.x", "x/y", strings.Repeat("a", 64), strings.Repeat("a", 65), "ü", "with space"} {
		add(vid)
	}
	if got := SessionID("vol-1"); got != "vol-1" {
		t.Fatalf("a valid id is kept: %q", got)
	}
	if got := SessionID("csi-" + strings.Repeat("0", 64)); !strings.HasPrefix(got, "h.") || len(got) != 45 {
		t.Fatalf("kubelet id: %q", got)
	}
	if got := SessionID("h.abc"); got == "h.abc" {
		t.Fatalf("an id in the hashed namespace is kept as is")
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{"unix:///csi/csi.sock": "/csi/csi.sock", "unix:/csi/csi.sock": "/csi/csi.sock", "/a/b/../c.sock": "/a/c.sock"} {
		if got, err := ParseEndpoint(in); err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"tcp://127.0.0.1:10000", "unix://csi.sock", "csi.sock", ""} {
		if got, err := ParseEndpoint(in); err == nil {
			t.Errorf("ParseEndpoint(%q) = %q, want an error", in, got)
		}
	}
	for in, want := range map[string][2]string{":9090": {"tcp", ":9090"}, "tcp://0.0.0.0:9090": {"tcp", "0.0.0.0:9090"}, "unix:///run/m.sock": {"unix", "/run/m.sock"}} {
		n, a, err := ParseMetricsAddress(in)
		if err != nil || n != want[0] || a != want[1] {
			t.Errorf("ParseMetricsAddress(%q) = %q %q %v; want %v", in, n, a, err, want)
		}
	}
	for _, in := range []string{"9090", "unix://rel", "host:"} {
		if _, _, err := ParseMetricsAddress(in); err == nil {
			t.Errorf("ParseMetricsAddress(%q): want an error", in)
		}
	}
}
