package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// wsfs csi refuses bad flags with a one-line usage error (exit 2) before it
// makes the state directory or the mount base.
func TestCSIUsageErrors(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	state, base := filepath.Join(dir, "state"), filepath.Join(dir, "mnt")
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"csi", "--state-dir", state, "--mount-base", base, "--endpoint", "unix://" + filepath.Join(dir, "c.sock")}
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no node id", []string{"--allowed-roots", ws}, "--node-id: required (the Kubernetes node name)"},
		{"no allowed roots", []string{"--node-id", "n"}, "--allowed-roots: at least one directory is required"},
		{"root /", []string{"--node-id", "n", "--allowed-roots", "/"}, `--allowed-roots: allowed root "/": must not be / (every path would be allowed)`},
		{"relative root", []string{"--node-id", "n", "--allowed-roots", "ws"}, `--allowed-roots: allowed root "ws": must be an absolute path`},
		{"missing root", []string{"--node-id", "n", "--allowed-roots", dir + "/nope"}, `--allowed-roots: allowed root "` + dir + `/nope": no such file or directory`},
		{"file root", []string{"--node-id", "n", "--allowed-roots", file}, `--allowed-roots: allowed root "` + file + `": not a directory`},
		{"tcp endpoint", []string{"--node-id", "n", "--allowed-roots", ws, "--endpoint", "tcp://127.0.0.1:1"}, `--endpoint: endpoint "tcp://127.0.0.1:1": want unix:///ABSOLUTE/PATH`},
		{"root holds the state", []string{"--node-id", "n", "--allowed-roots", dir}, `--allowed-roots: allowed root "` + dir + `" (physical ` + dir + `): overlaps the state directory ` + state},
		{"bad metrics address", []string{"--node-id", "n", "--allowed-roots", ws, "--metrics-address", "9090"}, `--metrics-address: metrics address "9090": want unix:///ABSOLUTE/PATH or HOST:PORT`},
		{"relative api socket", []string{"--node-id", "n", "--allowed-roots", ws, "--api-socket", "api.sock"}, `--api-socket "api.sock": must be an absolute path`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := cli(t, append(append([]string{}, common...), c.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, "wsfs: "+c.msg+"\n", errOut)
			for _, d := range []string{state, base} {
				_, err := os.Stat(d)
				assert.True(t, os.IsNotExist(err), "%s was made", d)
			}
		})
	}
}
