package mounts_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts"
)

// wantErrno checks that err is a CodeInvalid refusal carrying errno (the
// API's "errno" field, mapped back by the client).
func wantErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	wantCode(t, what, err, mounts.CodeInvalid)
	if !errors.Is(err, errno) {
		t.Errorf("%s: %v, want errno %s", what, err, errno)
	}
}

// TestMutualRecursionLink: a link planted in the root, a -> ../mnt/ID/a,
// walks through the session's own mountpoint back to itself. In every
// symlink mode resolve and cd answer ELOOP, with the errno in the API's
// error, and the daemon stays up (its own walk once recursed into
// identity's until the stack overflowed, killing every session's mount). A
// trailing slash on a regular file is ENOTDIR, as in the kernel.
func TestMutualRecursionLink(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for _, mode := range []fusefs.SymlinkMode{fusefs.SymlinksContain, fusefs.SymlinksFollow} {
		id := "rec-" + string(mode)
		root := filepath.Join(dir, id)
		mkTree(t, root, "a -> ../mnt/"+id+"/a", "f", "sub/")
		s, err := d.c.Create(ctx, mounts.Spec{ID: id, Root: root, Symlinks: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"a", "a/x", "sub/../a/", s.Mountpoint + "/a", root + "/a"} {
			_, err := d.c.Resolve(ctx, id, p)
			wantErrno(t, string(mode)+": resolve "+p, err, syscall.ELOOP)
		}
		_, err = d.c.Chdir(ctx, id, "a")
		wantErrno(t, string(mode)+": cd a", err, syscall.ELOOP)
		for _, p := range []string{"f/", "f/.", "sub/../f/"} {
			_, err := d.c.Resolve(ctx, id, p)
			wantErrno(t, string(mode)+": resolve "+p, err, syscall.ENOTDIR)
		}
		_, err = d.c.Chdir(ctx, id, "f")
		wantErrno(t, string(mode)+": cd f", err, syscall.ENOTDIR)
		status, body := d.rawRequest(t, http.MethodGet, "/v1/sessions/"+id+"/resolve?path="+url.QueryEscape("a"), nil)
		if status != 400 || !strings.Contains(body, `"errno":"ELOOP"`) {
			t.Errorf("%s: GET resolve a: %d %s, want 400 with errno ELOOP", mode, status, body)
		}
		// Still serving, this session and the API.
		if r := d.exec(t, id, nil, "cat", "f"); r.code != 0 || r.stdout != "f" {
			t.Fatalf("%s: cat f after the walks: %+v", mode, r)
		}
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}
