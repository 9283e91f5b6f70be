package mounts_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// tryOps is a python program that runs each of its arguments, "append
// NAME", "link OLD NEW" or "ls", and prints one line per operation: the
// operation and "ok" or the errno's name.
const tryOps = `
import errno, os, sys
args = sys.argv[1:]
while args:
    op = args.pop(0)
    try:
        if op == "append":
            name = args.pop(0)
            what = op + " " + name
            with open(name, "a") as f:
                f.write("x\n")
        elif op == "link":
            old, new = args.pop(0), args.pop(0)
            what = op + " " + old + " " + new
            os.link(old, new)
        elif op == "ls":
            what = op
            os.listdir(".")
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
`

// tryIn runs tryOps in session id with args and returns its output.
func tryIn(t *testing.T, d *daemon, id string, args ...string) string {
	t.Helper()
	r := d.exec(t, id, nil, append([]string{"python3", "-c", tryOps}, args...)...)
	if r.code != 0 {
		t.Fatalf("%s: %v: %+v", id, args, r)
	}
	return r.stdout
}

// A layered session protects by the project's identity: a hard link
// (made in the project, or in the layer) reaching a protected file is
// protected as in an unlayered session (EACCES), whichever name was
// looked up first, git's config and hooks too; a file that is not
// protected stays writable under both of its names, and one made in the
// layer can be linked and written. A sub-session on the layer protects its
// own subpaths the same way. The project never changes. Both with the
// layer on the project's file system and on a tmpfs (where overlayfs's
// xino puts a layer id in the high bits of st_ino). Before the fix (the
// merged object's (dev, ino) compared with the project's) every "append"
// of a protected file below was "ok".
func TestLayerProtectedHardLink(t *testing.T) {
	t.Run("same-fs", func(t *testing.T) { layerProtectedHardLink(t, false) })
	t.Run("tmpfs-layer", func(t *testing.T) { layerProtectedHardLink(t, true) })
}

func layerProtectedHardLink(t *testing.T, tmpfsState bool) {
	dir := newDaemonDir(t)
	state := filepath.Join(dir, "state")
	if tmpfsState {
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("wsfs-layer-test", state, "tmpfs", 0, "size=16m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(state, unix.MNT_DETACH) })
	}
	d := startDaemonAt(t, dir, state, filepath.Join(dir, "mnt"))
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "u", "sub/n.txt")
	script := "cd " + root + " && git init -q && ln f g && ln u u2 && ln .git/config cfg && ln .git/hooks/pre-commit.sample hk && ln sub/n.txt sub/n-link.txt"
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", script, err, out)
	}
	before := treeSnap(t, root)

	if r := d.wsfs(t, "session", "create", "UL", "--root", root, "--layer", "--protect", "f"); r.code != 0 {
		t.Fatalf("create UL: %+v", r)
	}
	var pst, mst unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "f"), &pst); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(filepath.Join(state, "layers", "UL", "merged", "f"), &mst); err != nil {
		t.Fatal(err)
	}
	// What the merged object's stat says: never the project's identity.
	if mst.Dev == pst.Dev || (tmpfsState && mst.Ino == pst.Ino) {
		t.Fatalf("merged f is dev %d ino %d, the project's f dev %d ino %d: want another device, and with the layer on tmpfs another inode number (xino)", mst.Dev, mst.Ino, pst.Dev, pst.Ino)
	}
	got := tryIn(t, d, "UL", "append", "g", "append", "cfg", "append", "hk", "append", "f",
		"link", "g", "h", "append", "u2", "append", "u", "append", "new", "link", "new", "new2", "append", "new2",
		"append", ".git/config")
	want := "append g EACCES\nappend cfg EACCES\nappend hk EACCES\nappend f EACCES\n" +
		"link g h EACCES\nappend u2 ok\nappend u ok\nappend new ok\nlink new new2 ok\nappend new2 ok\n" +
		"append .git/config EACCES\n"
	if got != want {
		t.Fatalf("UL:\n got %q\nwant %q", got, want)
	}

	if haveJail() {
		// The jail view serves the layer at the project's own path.
		r := d.exec(t, "UL", []string{"--confine"}, "python3", "-c", tryOps, "append", filepath.Join(root, "g"), "append", filepath.Join(root, "u2"))
		if want := "append " + filepath.Join(root, "g") + " EACCES\nappend " + filepath.Join(root, "u2") + " ok\n"; r.code != 0 || r.stdout != want {
			t.Fatalf("UL's jail: %+v, want %q", r, want)
		}
	}

	// A link made in the layer before f was protected: the same overlay
	// object as f (one origin), protected once f is. f was copied up by
	// a write through g first.
	if r := d.wsfs(t, "session", "create", "UL2", "--root", root, "--layer"); r.code != 0 {
		t.Fatalf("create UL2: %+v", r)
	}
	if got, want := tryIn(t, d, "UL2", "append", "g", "link", "g", "h"), "append g ok\nlink g h ok\n"; got != want {
		t.Fatalf("UL2 before --protect f:\n got %q\nwant %q", got, want)
	}
	if _, err := d.c.PatchPolicy(ctx, "UL2", api.PolicyPatch{Protected: []string{"f"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "UL2", "append", "h", "append", "g", "append", "f", "append", "u2"), "append h EACCES\nappend g EACCES\nappend f EACCES\nappend u2 ok\n"; got != want {
		t.Fatalf("UL2 after --protect f:\n got %q\nwant %q", got, want)
	}

	// A sub-session on UL2's layer protecting n.txt: after a listing
	// (n-link.txt may be the name looked up first), n.txt and its link
	// are both refused.
	if _, err := d.c.Chdir(ctx, "UL2", "sub"); err != nil {
		t.Fatal(err)
	}
	if r := d.wsfs(t, "session", "create", "SK", "--root", filepath.Join(root, "sub"), "--parent", "UL2", "--protect", "n.txt"); r.code != 0 {
		t.Fatalf("create SK: %+v", r)
	}
	if got, want := tryIn(t, d, "SK", "ls", "append", "n-link.txt", "append", "n.txt"), "ls ok\nappend n-link.txt EACCES\nappend n.txt EACCES\n"; got != want {
		t.Fatalf("SK:\n got %q\nwant %q", got, want)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed under the layers:\n got %v\nwant %v", got, before)
	}
	for _, id := range []string{"SK", "UL2", "UL"} {
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "h")); !os.IsNotExist(err) {
		t.Fatalf("the layer's link reached the project: %v", err)
	}
}

// A commit decides each path with the project object's identity, as the
// mount decides: a session that removes g, a hard link to the protected f,
// and makes a new g (upper-only: writable) with another mode, owner and an
// xattr may not commit g, whose change a commit makes to the project's g,
// f's inode (before the fix f became -rwsrwxrwx nobody, user.evil=1). The
// project's f keeps its bytes, mode, owner and xattrs; g is left in the
// layer, refused by "protected:f".
func TestLayerCommitProtectedAlias(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "other")
	f := filepath.Join(root, "f")
	if err := os.WriteFile(f, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(f, filepath.Join(root, "g")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Policy: &api.Policy{Protected: []string{"f"}}}); err != nil {
		t.Fatal(err)
	}
	script := "rm g && printf 'secret\\n' > g && setfattr -n user.evil -v 1 g && chown 65534:65534 g && chmod 4777 g && echo changed > other && echo ok"
	if r := d.exec(t, "L", nil, "sh", "-c", script); r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("in the session: %+v", r)
	}
	res, err := d.c.Commit(ctx, "L", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Applied, []string{"other"}) || len(res.Refused) != 1 || res.Refused[0].Path != "g" ||
		!strings.Contains(res.Refused[0].Reason, "protected:f") {
		t.Fatalf("commit: %+v, want other applied and g refused by protected:f", res)
	}
	var st unix.Stat_t
	if err := unix.Lstat(f, &st); err != nil || st.Mode != unix.S_IFREG|0o644 || st.Uid != 0 || st.Nlink != 2 {
		t.Fatalf("project f after the commit: mode %o uid %d nlink %d (%v), want 100644 0 2", st.Mode, st.Uid, st.Nlink, err)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "secret\n" {
		t.Fatalf("project f: %q, %v", b, err)
	}
	if n, err := unix.Lgetxattr(f, "user.evil", make([]byte, 16)); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("project f's user.evil: %d, %v; want ENODATA", n, err)
	}
}
