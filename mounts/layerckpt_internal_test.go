package mounts

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// rawSnap describes every object below root as a checkpoint must keep
// it: type, mode, owner, device number, content or link text, access and
// modification times, every extended attribute (trusted.overlay.* too),
// and which paths are links of one object.
func rawSnap(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d rdev=%d mtime=%d", st.Mode, st.Uid, st.Gid, st.Rdev, st.Mtim.Nano())
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			desc += fmt.Sprintf(" atime=%d", st.Atim.Nano())
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " data=" + string(b)
			if first, ok := inodes[st.Ino]; ok {
				// The object's times are its first path's (reading
				// it there changed its access time since).
				desc = fmt.Sprintf("mode=%o uid=%d gid=%d data=%s link-of=%s", st.Mode, st.Uid, st.Gid, b, first)
			} else if st.Nlink > 1 {
				inodes[st.Ino] = rel
			}
		case unix.S_IFLNK:
			text, _ := os.Readlink(p)
			desc += " link=" + text
		}
		if rel == "." {
			desc = fmt.Sprintf("mode=%o uid=%d gid=%d", st.Mode, st.Uid, st.Gid)
		}
		xs, err := xattrList(p, false)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range xs {
				if !yield(k) {
					return
				}
			}
		}) {
			desc += " " + k + "=" + string(xs[k])
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ckptUpper makes an upper directory as overlayfs leaves one: files (one
// of two links), a symlink, a FIFO, a whiteout, an opaque directory, a
// redirected one, user and trusted xattrs, owners, modes, times.
func ckptUpper(t *testing.T, up string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(up, "opaque/sub"), 0o755))
	must(os.MkdirAll(filepath.Join(up, "moved"), 0o750))
	must(os.WriteFile(filepath.Join(up, "opaque/sub/f"), []byte("f\n"), 0o640))
	must(os.WriteFile(filepath.Join(up, "a"), []byte("a\n"), 0o4755))
	must(os.Link(filepath.Join(up, "a"), filepath.Join(up, "moved/a-link")))
	must(os.Symlink("../a", filepath.Join(up, "moved/sym")))
	must(unix.Mkfifo(filepath.Join(up, "fifo"), 0o620))
	must(unix.Mknod(filepath.Join(up, "gone"), unix.S_IFCHR, 0))
	must(unix.Setxattr(filepath.Join(up, "opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(unix.Setxattr(filepath.Join(up, "moved"), "trusted.overlay.redirect", []byte("/orig"), 0))
	must(unix.Setxattr(filepath.Join(up, "a"), "user.tag", []byte("v"), 0))
	must(unix.Setxattr(filepath.Join(up, "a"), "trusted.overlay.origin", []byte{0, 1, 2}, 0))
	must(unix.Lsetxattr(filepath.Join(up, "moved/sym"), "trusted.overlay.x", []byte("s"), 0))
	must(os.Lchown(filepath.Join(up, "moved/sym"), 1000, 1001))
	must(os.Chown(filepath.Join(up, "opaque/sub/f"), 1002, 1003))
	must(os.Chmod(filepath.Join(up, "a"), 0o4755)) // after chown-free setup: the set-uid bit stays
	ts := []unix.Timespec{{Sec: 1000, Nsec: 5}, {Sec: 2000, Nsec: 7}}
	for _, p := range []string{"a", "fifo", "opaque/sub", "opaque", "moved"} {
		must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(up, p), ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(up, "moved/sym"), ts, unix.AT_SYMLINK_NOFOLLOW))
	must(unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(up, "moved"), ts, unix.AT_SYMLINK_NOFOLLOW))
}

// TestLayerCheckpointCopy: a checkpoint's upper is the layer's exactly
// (rawSnap), its baseline the one in force, and meta.json counts what it
// holds; a file written while copied is copied again, whole.
func TestLayerCheckpointCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (trusted xattrs, mknod, chown)")
	}
	dir := t.TempDir()
	l := &Layer{Dir: dir, Lower: t.TempDir(), seen: map[string]bool{}}
	ckptUpper(t, l.Upper())
	base := "{\"p\":\"a\",\"absent\":true}\n{\"p\":\"b\",\"ino\":5}\n{\"p\":\"a\",\"ino\":9,\"reset\":true}\n{\"p\":\"b\",\"forget\":true}\n"
	if err := os.WriteFile(filepath.Join(dir, layerBaseline), []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	writes := 0
	ckptCopied = func(name string) {
		if name == "a" && writes < 2 {
			writes++
			if err := os.WriteFile(filepath.Join(l.Upper(), "a"), []byte(strings.Repeat("new", writes)+"\n"), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { ckptCopied = nil })
	c, err := l.Checkpoint("c1")
	if err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("a written %d times during the copy, want 2", writes)
	}
	// What the source holds now (a rewritten twice; its times are the
	// writes').
	want := rawSnap(t, l.Upper())
	if got := rawSnap(t, filepath.Join(dir, layerCheckpoints, "c1", layerUpper)); !reflect.DeepEqual(got, want) {
		t.Fatalf("the checkpoint's upper:\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(want["a"], "data=newnew\n") || !strings.Contains(want["moved/a-link"], "link-of=a") {
		t.Fatalf("source: %q, %q", want["a"], want["moved/a-link"])
	}
	if c.Name != "c1" || c.Files != 9 || c.Bytes != int64(len("newnew\n")+len("f\n")) {
		t.Fatalf("checkpoint: %+v, want 9 objects and %d bytes", c, len("newnew\n")+len("f\n"))
	}
	if b := readFileInternal(t, filepath.Join(dir, layerCheckpoints, "c1", layerBaseline)); b != "{\"p\":\"a\",\"ino\":9,\"reset\":true}\n" {
		t.Fatalf("the checkpoint's baseline: %q", b)
	}
	list, err := l.Checkpoints()
	if err != nil || len(list) != 1 || list[0] != c {
		t.Fatalf("Checkpoints: %+v %v, want [%+v]", list, err, c)
	}

	// A file that changes at every copy: an error, and nothing left.
	ckptCopied = func(name string) {
		if name == "a" {
			os.WriteFile(filepath.Join(l.Upper(), "a"), []byte(fmt.Sprint(writes)), 0o644)
			writes++
		}
	}
	_, err = l.Checkpoint("c2")
	if err == nil || !strings.Contains(err.Error(), `checkpoint "c2": a: changed while copied, 5 times`) {
		t.Fatalf("a file always written: %v", err)
	}
	if got := entriesInternal(t, filepath.Join(dir, layerCheckpoints)); !reflect.DeepEqual(got, []string{"c1"}) {
		t.Fatalf("checkpoints/ after the failure: %v, want [c1]", got)
	}
}

func readFileInternal(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entriesInternal(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
