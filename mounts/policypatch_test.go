package mounts_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// TestPolicyPatchLive: a session created read-only is widened with `wsfs
// session policy ID --mode workspace-write` (no file) and a `while` loop
// started with `wsfs exec` before it writes on its next turn; narrowed
// again, the next write is EROFS; both denials are the server's (logged
// with rule and pid, counted). --add-root and --protect patch the policy in
// force; an empty patch is refused; PATCH answers in the API.
func TestPolicyPatchLive(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	extra := filepath.Join(dir, "extra")
	mkTree(t, root, "sub/")
	mkTree(t, extra, "x")
	if r := d.wsfs(t, "session", "create", "lp", "--root", root, "--mode", "read-only"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	loop := exec.Command(wsfsBin, "exec", "--session", "lp", "--", "bash", "--noprofile", "--norc", "-c",
		`echo "pid $$"; while read -r n; do if echo "$n" 2>/dev/null > "f$n"; then echo "ok $n"; else echo "fail $n"; fi; done`)
	loop.Env = append(loop.Environ(), "WSFS_SOCKET="+d.socket)
	in, err := loop.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := loop.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); loop.Wait() })
	out := bufio.NewReader(outPipe)
	readLine := func() string {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("loop: %v (so far %q)", err, l)
		}
		return strings.TrimSuffix(l, "\n")
	}
	pid := strings.TrimPrefix(readLine(), "pid ")
	step := func(n int, want string) {
		t.Helper()
		fmt.Fprintf(in, "%d\n", n)
		if got := readLine(); got != want {
			t.Errorf("write %d: loop said %q, want %q", n, got, want)
		}
	}
	step(1, "fail 1")
	if r := d.wsfs(t, "session", "policy", "lp", "--mode", "workspace-write", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"mode":"workspace-write"`) {
		t.Fatalf("session policy --mode workspace-write: %d %s %s", r.code, r.stdout, r.stderr)
	}
	step(2, "ok 2")
	if r := d.wsfs(t, "session", "policy", "lp", "--mode", "read-only"); r.code != 0 {
		t.Fatalf("session policy --mode read-only: %d %s", r.code, r.stderr)
	}
	step(3, "fail 3")
	if got := readFile(t, filepath.Join(root, "f2")); got != "2\n" {
		t.Errorf("root/f2 = %q", got)
	}
	// Counted before the answer; logged on the daemon's stderr, which this
	// test reads asynchronously: wait for the lines (bounded).
	if text, err := d.c.Metrics(ctx); err != nil || !strings.Contains(text, "\n"+`wsfs_policy_denials_total{session="lp",rule="primary:read-only"} 2`+"\n") {
		t.Errorf("metrics: want 2 primary:read-only denials of lp (%v):\n%s", err, text)
	}
	denials := func() (n int) {
		for _, l := range strings.Split(d.logText(), "\n") {
			if strings.Contains(l, "msg=denied") && strings.Contains(l, "session=lp") &&
				strings.Contains(l, "rule=primary:read-only") && strings.Contains(l, "errno=EROFS") &&
				strings.Contains(l, "pid="+pid) && strings.Contains(l, "path="+canon(t, root)+"/f") {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); denials() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := denials(); n != 2 {
		t.Errorf("want 2 logged EROFS denials of the loop (pid %s) with rule primary:read-only, got %d; log:\n%s", pid, n, d.logText())
	}

	// --add-root and --protect patch the policy in force (mode kept).
	if r := d.wsfs(t, "session", "policy", "lp", "--add-root", extra+"=rw", "--protect", ".env"); r.code != 0 {
		t.Fatalf("session policy --add-root --protect: %d %s", r.code, r.stderr)
	}
	s, err := d.c.Get(ctx, "lp")
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Root{{Path: canon(t, extra), Access: api.AccessReadWrite}}
	if s.Mode != api.ModeReadOnly || fmt.Sprint(s.Policy.Additional) != fmt.Sprint(want) ||
		strings.Join(s.Policy.Protected, ",") != ".env" { // git's names are the repository rule's, not the list's
		t.Errorf("after patch: mode %s additional %v protected %v", s.Mode, s.Policy.Additional, s.Policy.Protected)
	}
	// The same root again with another access changes it, not a second entry.
	s, err = d.c.PatchPolicy(ctx, "lp", api.PolicyPatch{Additional: []api.Root{{Path: extra, Access: api.AccessReadOnly}}})
	if err != nil || len(s.Policy.Additional) != 1 || s.Policy.Additional[0].Access != api.AccessReadOnly {
		t.Errorf("PATCH additional again: %+v %v", s.Policy.Additional, err)
	}
	if r := d.wsfs(t, "session", "policy", "lp"); r.code != 2 || !strings.Contains(r.stderr, "give --policy FILE, --mode") {
		t.Errorf("session policy without a change: %d %q, want 2 and a usage line", r.code, r.stderr)
	}
	d.apiError(t, "PATCH", "/v1/sessions/lp/policy", `{}`, 400, mounts.CodeInvalid, `session "lp": policy patch: empty (give mode, additional or protected)`)
	d.apiError(t, "PATCH", "/v1/sessions/lp/policy", `{"mode":"wide-open"}`, 400, mounts.CodeInvalid, `session "lp": policy: mode "wide-open": unknown mode (want read-only, workspace-write or full-access)`)
	d.apiError(t, "PATCH", "/v1/sessions/nope/policy", `{"mode":"read-only"}`, 404, mounts.CodeNotFound, `session "nope": no such session`)
	if s, err := d.c.Get(ctx, "lp"); err != nil || s.Mode != api.ModeReadOnly {
		t.Errorf("after refused patches: %+v %v, want read-only still", s.Mode, err)
	}
	in.Close()
	loop.Wait()
}
