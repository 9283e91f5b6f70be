package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestClientLinksNoServer checks that a host importing the client links no
// FUSE server and no daemon internals: `go list -deps` of the client names,
// besides the standard library, only mounts/api and golang.org/x/sys/unix
// (errno names).
func TestClientLinksNoServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/wsfs/wsfs/mounts/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := []string{"github.com/wsfs/wsfs/mounts/api", "github.com/wsfs/wsfs/mounts/client", "golang.org/x/sys/unix"}
	got := strings.Fields(string(out))
	for _, p := range got {
		if !slices.Contains(allowed, p) {
			t.Errorf("mounts/client depends on %s: only the standard library and %q may be linked (no go-fuse, fusefs, policy or mounts)", p, allowed)
		}
	}
	if !slices.Contains(got, "github.com/wsfs/wsfs/mounts/api") {
		t.Errorf("mounts/client does not use mounts/api: %q", got)
	}
}
