package mounts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestJailRefusesBackingStdin: `wsfs exec --confine -- cat < FILE` with
// FILE opened in the backing root (not through the mount) is refused before
// the jail starts, with exit 126 like the jail's other refusals and one
// line naming the descriptor, and the command never runs.
func TestJailRefusesBackingStdin(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	needJail(t)
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	proj := filepath.Join(dir, "proj")
	mkTree(t, proj, "README")
	if r := d.wsfs(t, "session", "create", "sd", "--root", proj); r.code != 0 {
		t.Fatalf("create sd: %s", r.stderr)
	}
	in, err := os.Open(filepath.Join(proj, "README"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(wsfsBin, "exec", "--session", "sd", "--confine", "--", "cat")
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	cmd.Stdin = in
	r := run(t, cmd)
	want := "wsfs: exec --confine: descriptor 0 is " + proj + "/README in the backing root " + proj + ", not through the mount; a jail does not inherit it\n"
	if r.code != 126 || r.stdout != "" || r.stderr != want {
		t.Fatalf("exec --confine with stdin in the backing root: exit %d stdout %q stderr %q, want 126, nothing, %q", r.code, r.stdout, r.stderr, want)
	}
}
