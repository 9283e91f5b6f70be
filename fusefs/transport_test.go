package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wsfs/wsfs/transport"
)

// TestRingServesSession: with WSFS_TEST_FUSE_TRANSPORT=io-uring (the CI
// step that runs this suite over FUSE over io_uring), a session mount's
// requests from another process arrive through the ring: Server.Transport
// says so and RingRequests grows with a workload whose results are those
// of the file system (a create, a write, a listing, a read back). Skipped
// otherwise (the mount is then on /dev/fuse and RingRequests is 0).
func TestRingServesSession(t *testing.T) {
	backing, mnt, srv := mountT(t)
	if os.Getenv(transport.TestModeEnv) != string(transport.IOURing) {
		if srv.Transport() == transport.NameDev && srv.RingRequests() != 0 {
			t.Fatalf("RingRequests on /dev/fuse: %d, want 0", srv.RingRequests())
		}
		t.Skipf("over %s: %s=io-uring runs it over the ring", srv.Transport(), transport.TestModeEnv)
	}
	if srv.Transport() != transport.NameURing {
		t.Fatalf("Transport: %q, want %q", srv.Transport(), transport.NameURing)
	}
	before := srv.RingRequests()
	got := shOK(t, mnt, "mkdir d && printf 'over the ring' > d/f && ls d && cat d/f")
	if got != "f\nover the ring" {
		t.Fatalf("through the mount: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "d", "f")); err != nil || string(b) != "over the ring" {
		t.Fatalf("backing d/f: %q, %v", b, err)
	}
	if after := srv.RingRequests(); after <= before {
		t.Fatalf("RingRequests: %d before the workload, %d after: nothing came through the ring", before, after)
	}
}
