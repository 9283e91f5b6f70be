package mounts_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// The CLI as a new user meets it: `session create` prints one line (the
// object only with --json, every policy default filled in); `wsfs exec`
// finds a relative command in the session's working directory, not in the
// caller's, and says where it looked when there is none.
func TestCLISessionEdges(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/", ".git/")
	if err := os.WriteFile(filepath.Join(root, "sub", "run.sh"), []byte("#!/bin/sh\necho \"ran in $(pwd)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(d.mountBase, "s1")
	r := d.wsfs(t, "session", "create", "s1", "--root", root, "--cwd", "sub")
	if want := "session s1: " + root + " mounted at " + mp + " (workspace-write), cwd " + mp + "/sub\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("session create: exit %d stdout %q stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	r = d.wsfs(t, "session", "create", "s2", "--root", root, "--json")
	var s api.Session
	if err := json.Unmarshal([]byte(r.stdout), &s); r.code != 0 || err != nil || s.ID != "s2" ||
		len(s.Policy.Protected) != 0 || s.Policy.Mode != api.ModeWorkspaceWrite || s.Policy.Temp == nil {
		t.Fatalf("session create --json: exit %d stdout %q (%v)", r.code, r.stdout, err)
	}

	// From another directory (the daemon dir has no run.sh), as a shell in
	// the session's directory would.
	cmd := exec.Command(wsfsBin, "exec", "--session", "s1", "--", "./run.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	r = run(t, cmd)
	if want := "ran in " + mp + "/sub\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("exec ./run.sh from elsewhere: exit %d stdout %q stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	cmd = exec.Command(wsfsBin, "exec", "--session", "s1", "--", "./nope.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	r = run(t, cmd)
	if want := "wsfs: exec ./nope.sh: no such file in the session's working directory " + mp + "/sub\n"; r.code != 127 || r.stderr != want {
		t.Fatalf("exec ./nope.sh: exit %d stderr %q, want 127 %q", r.code, r.stderr, want)
	}
	if r := d.exec(t, "s1", nil, "no-such-command-wsfs"); r.code != 127 || r.stderr != "wsfs: exec no-such-command-wsfs: no such file in $PATH\n" {
		t.Fatalf("exec of an unknown name: exit %d stderr %q", r.code, r.stderr)
	}
	// A session over another session's live mount is refused naming it.
	r = d.wsfs(t, "session", "create", "s3", "--root", root, "--mountpoint", mp)
	if want := `wsfs: session "s3": mountpoint "` + mp + `" is in use by session "s1"` + "\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("create over a live mount: exit %d stderr %q", r.code, r.stderr)
	}
	for _, id := range []string{"s1", "s2"} {
		if r := d.wsfs(t, "session", "rm", id); r.code != 0 {
			t.Fatalf("rm %s: %d %s", id, r.code, r.stderr)
		}
	}
}

// A session whose mountpoint is a live wsfs mount the daemon does not own
// (a `wsfs mount` there) is refused naming it, not as "not empty".
func TestCreateOverForeignWsfsMount(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "mnt/")
	mp := filepath.Join(dir, "foreign")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	m := exec.Command(wsfsBin, "mount", "--root", root, "--mountpoint", mp)
	var stderr strings.Builder
	m.Stderr = &stderr
	out, err := m.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Process.Signal(syscall.SIGTERM); m.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "mounted ") {
		t.Fatalf("wsfs mount: %q %v; stderr %s", line, err, stderr.String())
	}
	r := d.wsfs(t, "session", "create", "s1", "--root", root, "--mountpoint", mp)
	if want := `wsfs: session "s1": mountpoint "` + mp + `" is a live wsfs mount; unmount it first (wsfs unmount ` + mp + `) or pick another directory` + "\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("create over a wsfs mount: exit %d stderr %q, want %q", r.code, r.stderr, want)
	}
}
