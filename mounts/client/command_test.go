package client_test

import (
	"context"
	"slices"
	"testing"

	"github.com/wsfs/wsfs/mounts/client"
)

// TestCommandArgs: Command runs `wsfs exec` on the client's socket,
// confined by default, with the options as flags before "--".
func TestCommandArgs(t *testing.T) {
	c := client.New("/run/x/wsfs.sock")
	ctx := context.Background()
	for _, tc := range []struct {
		opt  client.ExecOptions
		want []string
	}{
		{client.ExecOptions{Binary: "/opt/wsfs"},
			[]string{"/opt/wsfs", "exec", "--socket", "/run/x/wsfs.sock", "--session", "s1", "--confine", "--", "git", "status"}},
		{client.ExecOptions{Binary: "/opt/wsfs", User: 65534, AllowWrite: []string{"/cache"}, BestEffort: true},
			[]string{"/opt/wsfs", "exec", "--socket", "/run/x/wsfs.sock", "--session", "s1", "--confine=best-effort", "--user", "65534", "--allow-write", "/cache", "--", "git", "status"}},
		{client.ExecOptions{Binary: "/opt/wsfs", Unconfined: true},
			[]string{"/opt/wsfs", "exec", "--socket", "/run/x/wsfs.sock", "--session", "s1", "--", "git", "status"}},
	} {
		if got := c.Command(ctx, "s1", []string{"git", "status"}, tc.opt).Args; !slices.Equal(got, tc.want) {
			t.Errorf("Command(%+v).Args = %q, want %q", tc.opt, got, tc.want)
		}
	}
	t.Setenv("WSFS_BIN", "/from/env/wsfs")
	if got := c.Command(ctx, "s1", []string{"true"}, client.ExecOptions{}).Args[0]; got != "/from/env/wsfs" {
		t.Errorf("binary from $WSFS_BIN: %q", got)
	}
}
