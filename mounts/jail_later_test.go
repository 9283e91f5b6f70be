package mounts_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// jailShell is a long-running `wsfs exec --confine` bash of one session
// that runs the lines it is sent, one at a time, and answers each with one
// line (jailShell.ask).
type jailShell struct {
	in  io.WriteCloser
	out *bufio.Reader
	pid int // the jail's outer process (wsfs exec, then bwrap)
}

// startJailShell starts the jail; cleanup kills it and waits for it.
func (d *daemon) startJailShell(t *testing.T, id string) *jailShell {
	t.Helper()
	cmd := exec.Command(wsfsBin, "exec", "--session", id, "--confine", "--", "bash", "--noprofile", "--norc", "-c",
		`echo ready; while IFS= read -r line; do eval "$line"; done`)
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	j := &jailShell{in: in, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	if line, err := j.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("jail of %s did not start: %q %v\nstderr %s", id, line, err, stderr.String())
	}
	return j
}

// ask runs the shell command c in the jail and returns
// "rc=N <its stdout and stderr on one line>".
func (j *jailShell) ask(t *testing.T, c string) string {
	t.Helper()
	fmt.Fprintf(j.in, "out=$( { %s ; } 2>&1 ); echo \"rc=$? $(echo $out)\"\n", c)
	line, err := j.out.ReadString('\n')
	if err != nil {
		t.Fatalf("jail: %s: %v", c, err)
	}
	return strings.TrimSuffix(jailBashLine.ReplaceAllString(line, "bash: "), "\n")
}

// TestJailHidesLaterSessions: the places sessions hide from each other
// (other sessions' roots, temp areas and mountpoints) are hidden in a jail
// started before a session was created exactly as those of a session that
// existed when it started — an empty read-only directory, a write there
// EROFS — and in its host view (EACCES); so are those of a session created
// after a removed one at the same paths. (issue 22: the jail's hidden list
// was computed once, when it started.)
func TestJailHidesLaterSessions(t *testing.T) {
	needJail(t)
	daemonDir := newDaemonDir(t)
	dir := outsideDaemonDir(t) // not in the daemon's socket directory, which every jail hides
	// The mountpoints lie there: cleared after the daemon's cleanup
	// (registered later, run earlier) of what a killed daemon left.
	t.Cleanup(func() { clearMounts(t, dir) })
	d := startDaemon(t, daemonDir)
	ctx := context.Background()
	type sess struct{ root, mnt, tmp string }
	create := func(id, root, mnt string) sess {
		t.Helper()
		mkTree(t, root, "f")
		s, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root, Mountpoint: mnt})
		if err != nil {
			t.Fatal(err)
		}
		return sess{s.Root, s.Mountpoint, s.TmpDir}
	}
	create("a", filepath.Join(dir, "proj-a"), filepath.Join(dir, "mnt-a"))
	before := create("p", filepath.Join(dir, "proj-p"), filepath.Join(dir, "mnt-p"))
	j := d.startJailShell(t, "a")
	hv := filepath.Join(d.mountBase, "@host", "a")

	check := func(when string, s sess) {
		t.Helper()
		var cases [][2]string
		for _, p := range []string{s.root, s.mnt} {
			cases = append(cases, [][2]string{
				{"ls -A " + p, "rc=0 "},
				{"cat " + p + "/f", "rc=1 cat: " + p + "/f: No such file or directory"},
				{"touch " + p + "/new", "rc=1 touch: cannot touch '" + p + "/new': Read-only file system"},
			}...)
		}
		// The temp directory lies in the state directory, which the jail
		// hides whole: not even its name shows.
		cases = append(cases, [2]string{"ls -A " + s.tmp, "rc=2 ls: cannot access '" + s.tmp + "': No such file or directory"})
		{
			for _, c := range cases {
				if got := j.ask(t, c[0]); got != c[1] {
					t.Errorf("%s: in a's jail: %s: %q, want %q", when, c[0], got, c[1])
				}
			}
		}
		c := "cat " + hv + s.root + "/f"
		if got, want := j.ask(t, c), "rc=1 cat: "+hv+s.root+"/f: Permission denied"; got != want {
			t.Errorf("%s: in a's jail: %s: %q, want %q", when, c, got, want)
		}
	}
	check("a session that existed when the jail started", before)

	b := create("b", filepath.Join(dir, "proj-b"), filepath.Join(dir, "mnt-b"))
	check("a session created after the jail started", b)

	if err := d.c.Remove(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	c := create("c", filepath.Join(dir, "proj-b"), filepath.Join(dir, "mnt-b"))
	check("a session created at a removed one's paths", c)

	// The jail itself still works: its own root is served.
	if got, want := j.ask(t, "cat "+filepath.Join(dir, "proj-a", "f")), "rc=0 f"; got != want {
		t.Errorf("in a's jail: cat its own f: %q, want %q", got, want)
	}
}
