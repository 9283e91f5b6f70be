package mounts_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLayerAcceptanceScript runs hack/layer-acceptance.sh, issue 23's
// acceptance, with the wsfs TestMain built: one script (npm ci, pip
// install, rm -rf, git checkout -b and commit -am, chmod -R, mv of a
// directory, ln, ln -s, setfattr, truncate, a SQLite WAL write, chown,
// mkfifo, a setgid directory) run natively in a copy of a project and in
// a layered session on the original. Every check it makes must pass, the
// last line must be its verdict, and it must leave nothing behind (no
// mount, no file).
func TestLayerAcceptanceScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm, pip and git three times and a daemon (about 30 s)")
	}
	dir := newDaemonDir(t)
	if _, err := exec.LookPath("setfattr"); err != nil {
		t.Skip("setfattr (Debian package attr) is not installed; hack/ci-setup.sh installs it")
	}
	cmd := exec.Command("bash", "../hack/layer-acceptance.sh")
	cmd.Env = append(os.Environ(), "WSFS_BIN="+wsfsBin, "LAYER_ACCEPTANCE_DIR="+dir, "LAYER_ACCEPTANCE_KEEP=")
	r := run(t, cmd)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || lines[len(lines)-1] != "layer-acceptance: ok" {
		t.Fatalf("hack/layer-acceptance.sh: exit %d, want 0 and a last line \"layer-acceptance: ok\"\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	checks := []string{
		"cp -a made a faithful copy",
		"the layered run printed what the native run printed",
		"the original is unchanged until commit (mtimes and ctimes too)",
		"the session sees what the native run made",
		"git agrees in the session",
		"session diff --json lists exactly the paths the native run changed",
		"commit applied",
		"after commit the project equals the native run's result",
		"after commit each file has the session's mtime",
		"git agrees in the project after commit",
		"session diff l1 is empty after commit",
		"the second session sees what the native run made",
		"the second original is unchanged until discard (mtimes and ctimes too)",
		"after discard the second original is unchanged (mtimes and ctimes too)",
		"after discard the session sees the original",
		"session diff l2 is empty after discard",
		"the layers went with their sessions",
	}
	for _, c := range checks {
		if !strings.Contains(r.stdout, "\nlayer-acceptance: ok: "+c) {
			t.Errorf("no passed check %q in the output", c)
		}
	}
	if strings.Contains(r.stdout, "FAIL") || strings.Contains(r.stdout, " differs ") {
		t.Errorf("a check failed or a difference was printed")
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", r.stdout)
	}
	if m := fuseMountsUnder(t, dir); len(m) != 0 {
		t.Fatalf("mounts left: %v", m)
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("left in %s: %v", dir, got)
	}
}
