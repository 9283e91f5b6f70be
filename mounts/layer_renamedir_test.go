package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// A directory the session changed (mode, owner, xattr) and renamed: diff
// lists the rename with what changed, and commit renames it in the project
// and gives it those attributes. Found by hack/layer-acceptance.sh (chmod
// -R go-w dir1 && mv dir1 dir2 on a 0777 dir1): the rename was listed and
// committed without them, so the project kept 0777.
func TestLayerRenamedDirAttrs(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "d1/f")
	d1 := filepath.Join(root, "d1")
	if err := unix.Chmod(d1, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(d1, "user.x", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "rd", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "rd", nil, "bash", "-c", "chmod 0750 d1 && chown 1234:5678 d1 && python3 -c 'import os; os.setxattr(\"d1\", \"user.x\", b\"2\")' && mv d1 d2"); r.code != 0 {
		t.Fatalf("session: %+v", r)
	}
	if r := d.wsfs(t, "session", "diff", "rd", "--stat"); r.code != 0 || r.stdout != "D d1 (dir)\nR d2 (dir: mode,owner,xattr) from d1\n" {
		t.Fatalf("diff: %+v", r)
	}
	if r := d.wsfs(t, "session", "commit", "rd"); r.code != 0 || r.stdout != "committed d2\ncommitted d1\n" {
		t.Fatalf("commit: %+v", r)
	}
	var st unix.Stat_t
	d2 := filepath.Join(root, "d2")
	if err := unix.Lstat(d2, &st); err != nil {
		t.Fatal(err)
	}
	x := make([]byte, 16)
	n, err := unix.Getxattr(d2, "user.x", x)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o750 || st.Uid != 1234 || st.Gid != 5678 || string(x[:n]) != "2" {
		t.Fatalf("d2 in the project: mode %o, owner %d:%d, user.x %q; want 750, 1234:5678, \"2\"", st.Mode&0o7777, st.Uid, st.Gid, x[:n])
	}
	if got := readFile(t, filepath.Join(d2, "f")); got != "d1/f" {
		t.Fatalf("d2/f: %q", got)
	}
	if _, err := os.Lstat(d1); !os.IsNotExist(err) {
		t.Fatalf("d1 after commit: %v, want it gone", err)
	}
	if r := d.wsfs(t, "session", "diff", "rd", "--stat"); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after commit: %+v, want nothing", r)
	}
	if err := d.c.Remove(ctx, "rd", false); err != nil {
		t.Fatal(err)
	}
}
