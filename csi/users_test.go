package csi_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asUID runs script with bash as uid:uid (no supplementary groups) from
// "/", and returns its stdout, stderr and exit code. The script's first
// output line is its pid (echo $$ before it execs a command).
func asUID(t *testing.T, uid uint32, script string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("bash as %d: %v", uid, err)
	}
	return o.String(), e.String(), 0
}

// openUp makes dir and its ancestors searchable by every user.
func openUp(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPublishUsers: a pod-like run. A volume with the attribute users=65534
// (the pod's runAsUser) serves uid 65534 at the target, its files its own;
// uid 65533 gets EACCES, each refusal logged with its uid and pid.
func TestPublishUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	p := e.start(t)
	target := filepath.Join(e.pods, "uid-u", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	attrs := podAttrs(root, "agent-u")
	attrs["users"] = "65534"
	if err := p.publish("vol-users", target, false, attrs); err != nil {
		t.Fatalf("publish: %v\n%s", err, p.logText())
	}
	openUp(t, filepath.Dir(target))

	out, errOut, code := asUID(t, 65534, "set -e; umask 022; cd "+target+"; cat a.txt; echo pod > pod.txt; stat -c '%u:%g %a' pod.txt")
	if code != 0 || out != "a\n65534:65534 644\n" {
		t.Fatalf("uid 65534 (listed): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, "pod.txt"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("pod.txt in the root: uid %d, %v; want 65534", st.Uid, err)
	}

	out, errOut, code = asUID(t, 65533, "echo $$; exec cat "+target+"/a.txt")
	pid, _, _ := strings.Cut(out, "\n")
	if code == 0 || !strings.Contains(errOut, "Permission denied") {
		t.Errorf("uid 65533 (not listed): exit %d, stderr %q; want Permission denied", code, errOut)
	}
	lines := p.waitLogLines(1, "msg=denied", "rule=users:not-listed", "uid=65533", "pid="+pid)
	if !strings.Contains(lines[0], "csi.storage.k8s.io/pod.name=agent-u") {
		t.Errorf("denial line lacks the pod's identity: %s", lines[0])
	}
	if err := p.unpublish("vol-users", target); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
}
