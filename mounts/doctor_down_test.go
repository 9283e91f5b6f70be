package mounts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/transport"
)

// `wsfs doctor` while a daemon that keeps its connections is down (kill
// -9): it finishes, says on one line that no daemon runs for the state
// directory, that its holder keeps the session's connections (the mount
// and its host view), waiting for the next daemon, and how to start it;
// it leaves no probe process behind; the next daemon serves the mount on.
// Before the fix doctor probed each mount in turn, a timeout each, with no
// output until the end (the trial saw it hang), and named such mounts only
// "hung mount" without saying their daemon was down.
func TestDoctorDaemonDown(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "dd", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	h := &transport.Holder{Socket: filepath.Join(d.stateDir, "holder.sock")}
	holder, err := h.Ping()
	h.Close()
	if err != nil {
		t.Fatalf("no holder: %v", err)
	}
	d.kill()
	d.waitExit(t)

	r := run(t, exec.Command(wsfsBin, "doctor"))
	var ours []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, dir) {
			ours = append(ours, l)
		}
	}
	hv := filepath.Join(d.mountBase, "@host", "dd")
	want := fmt.Sprintf("fail  daemon not running: no wsfs serve runs for state directory %s: holder pid %d keeps its sessions' connections, waiting for the next daemon; processes in these mounts wait until it starts: %s, %s"+
		" — fix: start wsfs serve --state-dir %s (with the --socket and --mount-base it ran with): it serves these mounts on (to end them instead, stop that daemon with SIGINT, the full stop)",
		d.stateDir, holder, hv, s.Mountpoint, d.stateDir)
	if r.code != 1 || len(ours) != 1 || ours[0] != want {
		t.Fatalf("doctor: exit %d, lines naming %s:\n%q\nwant exit 1 and one line\n%q\nstderr %s", r.code, dir, ours, want, r.stderr)
	}
	// No probe left waiting in the mounts.
	for _, mp := range []string{s.Mountpoint, hv} {
		if pids := probesOf(t, mp); len(pids) != 0 {
			t.Errorf("probes of %s left: pids %v", mp, pids)
		}
	}

	d2 := startDaemon(t, dir)
	if r := d2.exec(t, "dd", nil, "cat", "f"); r.code != 0 || r.stdout != "f" {
		t.Fatalf("exec in dd after the restart: %+v", r)
	}
	if err := d2.c.Remove(ctx, "dd", false); err != nil {
		t.Fatal(err)
	}
}

// probesOf returns the pids of doctor's probes (stat -f) of mountpoint mp.
func probesOf(t *testing.T, mp string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	want := strings.Join([]string{"stat", "-f", "-c", "%i", "--", mp}, "\x00") + "\x00"
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
			out = append(out, e.Name())
		}
	}
	return out
}
