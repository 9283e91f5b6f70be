package mounts_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/transport"
)

// A session says how requests reach its mount (session show's transport
// line, the API's transport field): "/dev/fuse" under --fuse-transport dev,
// "io-uring" under io-uring (when the kernel's parameter is on).
func TestSessionShowsTransport(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"dev", transport.NameDev},
		{"io-uring", transport.NameURing},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			if present, on := transport.KernelURing(); tc.mode == "io-uring" && !(present && on) {
				t.Skipf("FUSE over io_uring is off (%s)", transport.URingParameter)
			}
			dir := newDaemonDir(t)
			d := startDaemonAt(t, dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"), "--fuse-transport", tc.mode)
			root := filepath.Join(dir, "proj")
			mkTree(t, root, "f")
			s, err := d.c.Create(context.Background(), api.CreateRequest{ID: "t1", Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if s.Transport != tc.want {
				t.Errorf("create's answer: transport %q, want %q", s.Transport, tc.want)
			}
			r := d.wsfs(t, "session", "show", "t1")
			if want := "transport: " + tc.want + "\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("session show: exit %d stdout %q, want a line %q", r.code, r.stdout, want)
			}
			r = d.wsfs(t, "session", "show", "t1", "--json")
			var got api.Session
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Transport != tc.want {
				t.Errorf("session show --json: exit %d stdout %q, want transport %q", r.code, r.stdout, tc.want)
			}
		})
	}
}
