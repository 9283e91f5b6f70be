package fusefs

import (
	"bytes"
	"context"
	"log/slog"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"

	"github.com/wsfs/wsfs/policy"
)

// A denial is logged with session=<id>, and without a session attribute for
// a mount of no session (wsfs mount without --session), never session="";
// with the caller's pid, uid and gid (an --allow-other mount serves many
// users).
func TestDenyLogSession(t *testing.T) {
	for _, c := range []struct{ session, want string }{
		{"s1", "level=INFO msg=denied session=s1 op=mkdir path=/p/x rule=primary:read-only errno=EROFS pid=42 uid=65534 gid=100\n"},
		{"", "level=INFO msg=denied op=mkdir path=/p/x rule=primary:read-only errno=EROFS pid=42 uid=65534 gid=100\n"},
	} {
		var buf bytes.Buffer
		h := slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})
		m := &mount{log: slog.New(h), session: c.session}
		ctx := fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: 65534, Gid: 100}, Pid: 42})
		errno := m.deny(ctx, "mkdir", "/p/x", policy.Decision{Rule: "primary:read-only", Errno: syscall.EROFS})
		assert.Equal(t, syscall.EROFS, errno)
		assert.Equal(t, c.want, buf.String())
	}
}
