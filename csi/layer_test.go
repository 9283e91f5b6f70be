package csi_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// wsfsCLI runs the wsfs CLI with args against the daemon API at sock and
// returns its stdout, stderr and exit code.
func wsfsCLI(t *testing.T, sock string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(wsfsBin, args...)
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+sock)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wsfs %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// readT returns the content of p, or "<ERR>" when it cannot be read.
func readT(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestPublishLayer: a volume with the attribute layer=true runs on a
// copy-on-write layer in the plugin's state: the pod's writes reach the
// target, not the project. After kill -9 and a start the target is
// restored on the same layer (the pod's writes still there, the project
// still unchanged). The operator reaches the layer through the plugin's
// --api-socket: `session diff` lists the pod's changes, `session commit
// new.txt` applies that one. Unpublish removes the session and its layer:
// the committed file stays in the project, the uncommitted change is
// gone. layer=yes is refused naming the attribute.
func TestPublishLayer(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	api := filepath.Join(e.dir, "api.sock")
	p := e.start(t, "--api-socket", api)
	target := filepath.Join(e.pods, "uid-l", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	attrs := podAttrs(root, "agent-l")
	attrs["layer"] = "yes"
	err := p.publish("vol-layer", target, false, attrs)
	wantCode(t, "layer=yes", err, codes.InvalidArgument)
	if want := `volume attribute layer "yes": want true or false`; !strings.Contains(err.Error(), want) {
		t.Fatalf("layer=yes: %v, want %q", err, want)
	}
	attrs["layer"] = "true"
	if err := p.publish("vol-layer", target, false, attrs); err != nil {
		t.Fatalf("publish: %v\n%s", err, p.logText())
	}
	layerDir := filepath.Join(e.state, "layers", "vol-layer")
	if err := os.WriteFile(filepath.Join(target, "new.txt"), []byte("pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "a.txt"), []byte("pod-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		if got := readT(filepath.Join(root, "a.txt")); got != "a\n" {
			t.Fatalf("%s: the project's a.txt = %q, want a", when, got)
		}
		if _, err := os.Lstat(filepath.Join(root, "new.txt")); !os.IsNotExist(err) {
			t.Fatalf("%s: new.txt in the project: %v", when, err)
		}
	}
	unchanged("after the pod's writes")
	if got := readT(filepath.Join(layerDir, "upper", "new.txt")); got != "pod\n" {
		t.Fatalf("the layer's new.txt = %q", got)
	}

	p.kill9(t)
	p = e.start(t, "--api-socket", api)
	for f, want := range map[string]string{"new.txt": "pod\n", "a.txt": "pod-a\n"} {
		if got := readT(filepath.Join(target, f)); got != want {
			t.Fatalf("after kill -9 and a start, target's %s = %q, want %q\n%s", f, got, want, p.logText())
		}
	}
	unchanged("after the restart")

	out, errOut, code := wsfsCLI(t, api, "session", "diff", "vol-layer", "--stat")
	if want := "M a.txt (file: content)\nA new.txt (file)\n"; code != 0 || out != want {
		t.Fatalf("session diff through --api-socket: exit %d, %q %q; want %q", code, out, errOut, want)
	}
	out, errOut, code = wsfsCLI(t, api, "session", "commit", "vol-layer", "new.txt")
	if code != 0 || out != "committed new.txt\n" {
		t.Fatalf("session commit new.txt: exit %d, %q %q", code, out, errOut)
	}
	if got := readT(filepath.Join(root, "new.txt")); got != "pod\n" {
		t.Fatalf("the project's new.txt after the commit = %q", got)
	}

	if err := p.unpublish("vol-layer", target); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := os.Lstat(layerDir); !os.IsNotExist(err) {
		t.Fatalf("the layer after unpublish: %v", err)
	}
	if got := readT(filepath.Join(root, "a.txt")) + readT(filepath.Join(root, "new.txt")); got != "a\npod\n" {
		t.Fatalf("the project after unpublish: %q, want a.txt unchanged and the committed new.txt", got)
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}
