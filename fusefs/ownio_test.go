package fusefs_test

import (
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

// Mount does no I/O on its own new mount. go-fuse's WaitMount opens and
// polls a magic file through it (pollHack), and a SIGKILL that lands while
// the server holds one of those requests read but unanswered leaves the
// process unkillable, its mounts hanging (seen in the daemon's kill -9
// test). DisablePoll does that I/O only when asked. go-fuse's debug output
// (log.Default) names every request the server reads.
func TestMountDoesNoOwnIO(t *testing.T) {
	var out syncBuffer // acceptance_policy_test.go
	prev := log.Writer()
	log.SetOutput(&out)
	t.Cleanup(func() { log.SetOutput(prev) })

	dir := canonT(t, t.TempDir())
	root, mnt := filepath.Join(dir, "root"), filepath.Join(dir, "mnt")
	for _, d := range []string{root, mnt} {
		mkdirT(t, d, 0o755)
	}
	srv, err := fusefs.Mount(fusefs.Config{Root: root, Mountpoint: mnt, Policy: compileT(t, specFor(t, root)),
		Logger: testLogger(), NoWatch: true, Debug: true})
	if err != nil {
		t.Fatalf("Mount(%s): %v", mnt, err)
	}
	t.Cleanup(func() { unmountT(t, srv, mnt) })
	const hack = ".go-fuse-epoll-hack"
	if got := out.String(); strings.Contains(got, hack) {
		t.Errorf("Mount made requests on its own mount (go-fuse pollHack):\n%s", got)
	}
	if err := srv.DisablePoll(); err != nil {
		t.Fatalf("DisablePoll: %v", err)
	}
	got := out.String()
	if !strings.Contains(got, hack) || !strings.Contains(got, "POLL") {
		t.Errorf("DisablePoll: want a LOOKUP of %s and a POLL in the server's debug output, got:\n%s", hack, got)
	}
	// The mount serves as before: a file made on the backing side reads back.
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x" {
		t.Errorf("ReadFile(%s/f) = %q, %v; want \"x\", nil", mnt, b, err)
	}
}
