package mounts

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/policy"
)

// namesIn returns the names in dir, sorted.
func namesIn(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// setStageMade sets the stageMade hook for the test.
func setStageMade(t *testing.T, f func(pd int, name string)) {
	t.Helper()
	stageMade = f
	t.Cleanup(func() { stageMade = nil })
}

// layerFor opens a layer (its directory under a temporary directory) on
// the project proj, removed when the test ends.
func layerFor(t *testing.T, proj string) *Layer {
	t.Helper()
	l, err := OpenLayer(filepath.Join(t.TempDir(), "layer"), proj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Remove() })
	return l
}

// allowAll is a commit's decider that allows every change.
func allowAll(policy.Op, string) error { return nil }

// TestLayerStageRenamedAway: a private directory a host process renames
// within its directory while a commit or a discard uses it (found by an
// attack: it stayed in the project, renamed, for good) is found again by
// its identity and removed; the verb applies the path.
func TestLayerStageRenamedAway(t *testing.T) {
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "old"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := layerFor(t, proj)
	moved := 0
	setStageMade(t, func(pd int, name string) {
		moved++
		if err := unix.Renameat(pd, name, pd, "moved"); err != nil {
			t.Errorf("rename %s: %v", name, err)
		}
	})
	if err := os.WriteFile(filepath.Join(l.Merged(), "f"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := l.Commit(nil, false, allowAll)
	if err != nil || !slices.Equal(res.Applied, []string{"f"}) {
		t.Fatalf("commit: %+v %v, want f applied", res, err)
	}
	if got := namesIn(t, proj); !slices.Equal(got, []string{"f", "old"}) || moved == 0 {
		t.Fatalf("the project after the commit (%d renamed): %q, want [f old]", moved, got)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "f")); err != nil || string(b) != "new\n" {
		t.Fatalf("f: %q %v", b, err)
	}
	// Discard: its private directory is in the merged tree (the upper).
	if err := os.Remove(filepath.Join(l.Merged(), "old")); err != nil {
		t.Fatal(err)
	}
	moved = 0
	res, err = l.Discard(nil)
	if err != nil || !slices.Equal(res.Applied, []string{"old"}) {
		t.Fatalf("discard: %+v %v, want old applied", res, err)
	}
	if got := namesIn(t, l.Merged()); !slices.Equal(got, []string{"f", "old"}) || moved == 0 {
		t.Fatalf("the merged tree after the discard (%d renamed): %q, want [f old]", moved, got)
	}
}

// TestLayerStageCrash: a private directory left by a verb stopped as a
// crash stops it (and renamed away meanwhile) is removed when the layer is
// opened again (as a recovery does) and at the next commit.
func TestLayerStageCrash(t *testing.T) {
	proj := t.TempDir()
	l := layerFor(t, proj)
	crash := func(verb func()) {
		setStageMade(t, func(pd int, name string) {
			if err := unix.Renameat(pd, name, pd, "moved"); err != nil {
				t.Errorf("rename %s: %v", name, err)
			}
			runtime.Goexit()
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			verb()
		}()
		<-done
		stageMade = nil
	}
	if err := os.WriteFile(filepath.Join(l.Merged(), "f"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crash(func() { l.Commit(nil, false, allowAll) })
	if got := namesIn(t, proj); !slices.Equal(got, []string{"moved"}) {
		t.Fatalf("the project after the crash: %q, want [moved]", got)
	}
	// Opened again, as a recovery does (the overlay is still mounted).
	l2, err := OpenLayer(l.Dir, proj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	if got := namesIn(t, proj); len(got) != 0 {
		t.Fatalf("the project after the layer was opened again: %q, want nothing", got)
	}
	crash(func() { l2.Commit(nil, false, allowAll) })
	if got := namesIn(t, proj); !slices.Equal(got, []string{"moved"}) {
		t.Fatalf("the project after the second crash: %q, want [moved]", got)
	}
	res, err := l2.Commit(nil, false, allowAll)
	if err != nil || !slices.Equal(res.Applied, []string{"f"}) {
		t.Fatalf("commit: %+v %v, want f applied", res, err)
	}
	if got := namesIn(t, proj); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("the project after the next commit: %q, want [f]", got)
	}
	// A discard's, in the merged tree, when the layer is opened again.
	if err := os.WriteFile(filepath.Join(l2.Merged(), "f"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crash(func() { l2.Discard(nil) })
	if got := namesIn(t, l2.Merged()); !slices.Equal(got, []string{"moved"}) {
		t.Fatalf("the merged tree after the crash: %q, want [moved]", got)
	}
	l3, err := OpenLayer(l.Dir, proj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l3.Close() })
	if got := namesIn(t, l3.Merged()); len(got) != 0 {
		t.Fatalf("the merged tree after the layer was opened again: %q, want nothing", got)
	}
}
