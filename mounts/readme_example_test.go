package mounts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEHostExampleGo runs the README's Go host example
// (hack/examples/host, shown verbatim in README.md) against a daemon: it
// creates a session, writes a file and syncs, runs ls in it confined,
// changes its cwd and removes it.
func TestREADMEHostExampleGo(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	src, err := os.ReadFile("../hack/examples/host/main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md does not show hack/examples/host/main.go as it is")
	}
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "src/", "docs/", ".git/")
	cmd := exec.Command("go", "run", "./hack/examples/host", root)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket, "WSFS_BIN="+wsfsBin)
	out, err := cmd.CombinedOutput()
	mp := filepath.Join(d.mountBase, "task-1")
	want := "ran ls in " + root + ": NOTES docs src\ncwd now " + filepath.Join(mp, "src") + " (" + filepath.Join(root, "src") + ")\nremoved task-1\n"
	if err != nil || string(out) != want {
		t.Fatalf("go run ./hack/examples/host: %v\n%s\nwant\n%s", err, out, want)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Errorf("the example's mountpoint %s is still there (%v)", mp, err)
	}
}
