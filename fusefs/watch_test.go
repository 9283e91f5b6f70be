package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHostChangesVisible: with the default minute-long cache timeouts, a
// change made on the host is seen through the mount by the next process
// once SyncHostChanges returns (the watcher's invalidation).
func TestHostChangesVisible(t *testing.T) {
	backing, mnt, srv := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "d"), 0o755)
		writeFileT(t, filepath.Join(b, "d/f"), "one\n", 0o644)
	}))
	sync := func() {
		t.Helper()
		if err := srv.SyncHostChanges(); err != nil {
			t.Fatalf("SyncHostChanges: %v", err)
		}
	}
	// Warm the kernel's caches: entries, attributes, listing, data.
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls d && cat d/f && stat -c %a d/f && ls nothere 2>/dev/null; true"); got != "f\none\n644\n" {
		t.Fatalf("warm-up: %q", got)
	}
	writeFileT(t, filepath.Join(backing, "d/f"), "one two three\n", 0o644)
	writeFileT(t, filepath.Join(backing, "d/g"), "g\n", 0o644)
	writeFileT(t, filepath.Join(backing, "nothere"), "now\n", 0o644)
	if err := os.Chmod(filepath.Join(backing, "d/f"), 0o600); err != nil {
		t.Fatal(err)
	}
	sync()
	want := "f\ng\none two three\n600\nnow\n"
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls d && cat d/f && stat -c %a d/f && cat nothere"); got != want {
		t.Errorf("after host changes: %q, want %q", got, want)
	}
	if err := os.Rename(filepath.Join(backing, "d"), filepath.Join(backing, "e")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(backing, "nothere")); err != nil {
		t.Fatal(err)
	}
	sync()
	if got := shOK(t, "/", "cd "+shq(mnt)+" && ls && cat e/g"); got != "e\ng\n" {
		t.Errorf("after host rename and remove: %q, want %q", got, "e\ng\n")
	}
}
