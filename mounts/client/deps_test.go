package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServer checks that a host importing the client links no
// FUSE server and no daemon internals: `go list -deps` of the client names
// only the standard library and mounts/api.
func TestClientLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/wsfs/wsfs/mounts/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{"github.com/wsfs/wsfs/mounts/api", "github.com/wsfs/wsfs/mounts/client"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("non-standard dependencies of mounts/client = %q, want exactly %q (no go-fuse, fusefs, policy or mounts)", got, want)
	}
}
