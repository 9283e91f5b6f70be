package csi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// kill -9 of the plugin after N publishes (its FUSE connections die, the
// targets answer ENOTCONN), then a restart on the same state directory:
// every published target is served again (same content, writes land), and
// unpublishing all of them leaves nothing.
func TestKill9RestoresTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test; skipped with -short")
	}
	const n = 6
	e := newEnv(t)
	p := e.start(t)
	type vol struct{ id, root, target string }
	var vols []vol
	for i := range n {
		v := vol{id: fmt.Sprintf("csi-%064x", i+1), root: mkProject(t, e, fmt.Sprintf("p%d", i)), target: filepath.Join(e.pods, fmt.Sprintf("uid-%d", i), "mount")}
		if err := os.MkdirAll(filepath.Dir(v.target), 0o750); err != nil {
			t.Fatal(err)
		}
		attrs := podAttrs(v.root, fmt.Sprintf("agent-%d", i))
		if i%2 == 1 {
			attrs["mode"] = "read-only"
		}
		if err := p.publish(v.id, v.target, false, attrs); err != nil {
			t.Fatalf("publish %s: %v\n%s", v.id, err, p.logText())
		}
		if err := os.WriteFile(filepath.Join(v.root, "before.txt"), []byte(v.id), 0o644); err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v)
	}
	p.kill9(t)
	if _, err := os.ReadFile(filepath.Join(vols[0].target, "a.txt")); err == nil || !strings.Contains(err.Error(), "transport endpoint is not connected") {
		t.Fatalf("a target of the killed plugin: %v, want ENOTCONN", err)
	}

	p = e.start(t)
	for _, v := range vols {
		if got, err := os.ReadFile(filepath.Join(v.target, "before.txt")); err != nil || string(got) != v.id {
			t.Fatalf("after restart, %s: %q, %v\n%s", v.target, got, err, p.logText())
		}
	}
	if err := os.WriteFile(filepath.Join(vols[0].target, "after.txt"), []byte("x"), 0o644); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(vols[0].root, "after.txt")); string(got) != "x" {
		t.Fatalf("write after restart did not land: %q", got)
	}
	if strings.Count(p.logText(), "csi: target restored") != n {
		t.Fatalf("want %d restored targets in the log:\n%s", n, p.logText())
	}
	for _, v := range vols {
		if err := p.unpublish(v.id, v.target); err != nil {
			t.Fatalf("unpublish %s: %v", v.id, err)
		}
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
	if got := entries(t, filepath.Join(e.state, "sessions")); len(got) != 0 {
		t.Fatalf("session files left: %v", got)
	}
}

// A clean stop (SIGTERM) unbinds and unmounts; the next start binds every
// published volume again.
func TestCleanRestartRestoresTargets(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	p := e.start(t)
	target := filepath.Join(e.pods, "mount")
	if err := p.publish("vol-a", target, true, podAttrs(root, "a")); err != nil {
		t.Fatal(err)
	}
	p.stop()
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left after SIGTERM: %v", left)
	}
	p = e.start(t)
	if got, err := os.ReadFile(filepath.Join(target, "a.txt")); err != nil || string(got) != "a\n" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(target, "n"), nil, 0o644); errnoOf(err) == 0 {
		t.Fatalf("the read-only bind came back writable")
	}
	if err := p.unpublish("vol-a", target); err != nil {
		t.Fatal(err)
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}

// Publishes and unpublishes of different volumes run concurrently (kubelet
// starts many pods at once): every target serves its own project, and
// nothing is left afterwards.
func TestConcurrentPublishes(t *testing.T) {
	const n = 16
	e := newEnv(t)
	p := e.start(t)
	roots := make([]string, n)
	for i := range n {
		roots[i] = mkProject(t, e, fmt.Sprintf("c%02d", i))
		if err := os.WriteFile(filepath.Join(roots[i], "id"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := func(i int) string { return filepath.Join(e.pods, fmt.Sprintf("t%02d", i)) }
	vid := func(i int) string { return fmt.Sprintf("csi-%064x", i+100) }
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- p.publish(vid(i), target(i), false, podAttrs(roots[i], fmt.Sprint(i))) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	for i := range n {
		if got, err := os.ReadFile(filepath.Join(target(i), "id")); err != nil || string(got) != fmt.Sprint(i) {
			t.Fatalf("target %d serves %q, %v", i, got, err)
		}
	}
	for i := range n {
		go func() { errs <- p.unpublish(vid(i), target(i)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("unpublish: %v", err)
		}
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
	if got := entries(t, filepath.Join(e.state, "sessions")); len(got) != 0 {
		t.Fatalf("session files left: %v", got)
	}
}

// A target reached through a symlinked kubelet directory whose pod
// directory vanished while the plugin was down: the restart reports it
// ("not restored"), and NodeUnpublishVolume with kubelet's spelling still
// finds the volume and removes its session.
func TestUnpublishAfterPodDirGone(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test; skipped with -short")
	}
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	link := filepath.Join(e.dir, "kubelet-pods")
	if err := os.Symlink(e.pods, link); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(e.pods, "uid-gone")
	if err := os.Mkdir(podDir, 0o750); err != nil {
		t.Fatal(err)
	}
	given := filepath.Join(link, "uid-gone", "mount")
	p := e.start(t)
	if err := p.publish("vol-gone", given, false, podAttrs(root, "gone")); err != nil {
		t.Fatal(err)
	}
	p.kill9(t)
	if err := syscall.Unmount(filepath.Join(podDir, "mount"), syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(podDir); err != nil {
		t.Fatal(err)
	}
	p = e.start(t)
	if !strings.Contains(p.logText(), "csi: target not restored") {
		t.Fatalf("the restart does not report the lost target:\n%s", p.logText())
	}
	if err := p.unpublish("vol-gone", given); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(e.state, "sessions")); len(got) != 0 {
		t.Fatalf("session files left: %v", got)
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}
