package mounts_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestConfineIsolation: a confined command cannot reach the daemon's socket
// (it could widen its own policy through it), cannot see (so signal)
// processes outside its PID namespace, and inherits no descriptor but
// stdio; unconfined, the same three work, so each refusal is the jail's.
func TestConfineIsolation(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	mkTree(t, root, "sub/")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "iso", Root: root}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	leak, err := os.Create(filepath.Join(dir, "leak"))
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	for _, tc := range []struct {
		action, arg      string
		confined, freely string
	}{
		{"connect", d.socket, "EACCES", "ok"},
		{"signal", strconv.Itoa(victim.Process.Pid), "ESRCH", "ok"},
		{"fd3", "-", "EBADF", "ok"},
	} {
		for _, confine := range []bool{true, false} {
			args := []string{"exec", "--session", "iso"}
			want := tc.freely
			if confine {
				args = append(args, "--confine", "--env", helperEnv)
				want = tc.confined
			}
			cmd := exec.Command(wsfsBin, append(args, "--", self, tc.arg)...)
			cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, helperEnv+"="+tc.action)
			cmd.ExtraFiles = []*os.File{leak} // fd 3 in wsfs exec
			r := run(t, cmd)
			if r.code != 0 || r.stdout != want+"\n" {
				t.Errorf("%s (confined=%v): exit %d stdout %q stderr %q, want %s", tc.action, confine, r.code, r.stdout, r.stderr, want)
			}
		}
	}
	if err := d.c.Remove(ctx, "iso", false); err != nil {
		t.Fatal(err)
	}
}
