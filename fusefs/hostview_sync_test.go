package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsfs/wsfs/fusefs"
)

// TestHostViewSyncHostChanges: a host view has no watcher; with minute-long
// cache timeouts a child process's stat would keep the old size of a file
// the host appended to, and a lookup the old negative entry of a file the
// host made. After SyncHostChanges a new child sees both.
func TestHostViewSyncHostChanges(t *testing.T) {
	dir := canonT(t, t.TempDir())
	out := filepath.Join(dir, "outside")
	mkdirT(t, out, 0o755)
	writeFileT(t, filepath.Join(out, "f"), "a", 0o644)
	hv := filepath.Join(dir, "hv")
	mkdirT(t, filepath.Join(dir, "proj"), 0o755)
	srv := mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: compileT(t, specFor(t, filepath.Join(dir, "proj"))),
		Session: t.Name(), Logger: testLogger(), NoWatch: true,
		EntryTimeout: time.Minute, AttrTimeout: time.Minute, NegativeTimeout: time.Minute})
	at := hv + out
	if got := shOK(t, "/", "stat -c %s "+shq(at+"/f")+"; test -e "+shq(at+"/new")+" || echo no new"); got != "1\nno new\n" {
		t.Fatalf("before: %q", got)
	}
	f, err := os.OpenFile(filepath.Join(out, "f"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("bc"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	writeFileT(t, filepath.Join(out, "new"), "n\n", 0o644)
	if err := srv.SyncHostChanges(); err != nil {
		t.Fatalf("SyncHostChanges: %v", err)
	}
	if got := shOK(t, "/", "stat -c %s "+shq(at+"/f")+"; cat "+shq(at+"/new")); got != "3\nn\n" {
		t.Errorf("after SyncHostChanges: %q, want the new size and the new file", got)
	}
}
