package mounts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/mounts/client"
)

// TestVenvThroughSpawnHelperOutlivesSession: a venv made through the
// client's command helper (confined: the jail shows the root at its
// physical path) records physical paths, never the mountpoint, and still
// runs after `session rm`.
func TestVenvThroughSpawnHelperOutlivesSession(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap missing")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 missing")
	}
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a")
	s, err := d.c.Create(t.Context(), api.CreateRequest{ID: "venv", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	cmd := d.c.Command(t.Context(), s.ID, []string{"python3", "-m", "venv", "--without-pip", "venv"}, client.ExecOptions{Binary: wsfsBin})
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv in the jail: %v\n%s", err, out)
	}
	if err := d.c.Remove(t.Context(), s.ID, false); err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(root, "venv")
	activate := readFile(t, filepath.Join(venv, "bin", "activate"))
	if strings.Contains(activate, s.Mountpoint) || !strings.Contains(activate, venv) {
		t.Errorf("bin/activate names %s (the mountpoint) or not %s:\n%s", s.Mountpoint, venv, activate)
	}
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import sys; print(sys.prefix)").CombinedOutput()
	if err != nil || string(out) != venv+"\n" {
		t.Errorf("the venv's python after session rm: %q %v, want %s", out, err, venv)
	}
	if _, err := os.Stat(s.Mountpoint); !os.IsNotExist(err) {
		t.Errorf("mountpoint %s still there: %v", s.Mountpoint, err)
	}
}
