package fusefs_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

// PresentLink answers exactly what the mount does for each kind of link:
// every link is a link (lstat says S_IFLNK), with the text readlink gives.
func TestPresentLinkAgreesWithMount(t *testing.T) {
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "f"), "out\n", 0o644)
	var mntPath string
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mntPath = filepath.Join(filepath.Dir(b), "mnt")
		mkdirT(t, filepath.Join(b, "d"), 0o755)
		writeFileT(t, filepath.Join(b, "d/f"), "in\n", 0o644)
		symlinkT(t, "d/f", filepath.Join(b, "plain"))                        // shown as stored
		symlinkT(t, filepath.Join(b, "d/f"), filepath.Join(b, "absin"))      // rewritten: "d/f"
		symlinkT(t, filepath.Join(mntPath, "d"), filepath.Join(b, "viamnt")) // names the mountpoint: "d"
		symlinkT(t, filepath.Join(outside, "f"), filepath.Join(b, "out"))    // into the host view
		symlinkT(t, filepath.Join(outside, "nope"), filepath.Join(b, "dangling"))
		symlinkT(t, filepath.Dir(b), filepath.Join(b, "up")) // holds the mountpoint
		symlinkT(t, "loop", filepath.Join(b, "loop"))        // a loop stays a link
		symlinkT(t, "/dev/null", filepath.Join(b, "null"))   // devices keep their text
	}))
	hv := hostViewOf(mnt)
	for name, want := range map[string]fusefs.LinkView{
		"plain":    {Text: "d/f", Key: filepath.Join(backing, "d/f")},
		"absin":    {Text: "d/f", Key: filepath.Join(backing, "d/f")},
		"viamnt":   {Text: "d", Key: filepath.Join(backing, "d")},
		"out":      {Text: hv + outside + "/f", Key: filepath.Join(outside, "f")},
		"dangling": {Text: hv + outside + "/nope", Key: filepath.Join(outside, "nope")},
		"up":       {Text: hv + filepath.Dir(backing), Key: filepath.Dir(backing)},
		"loop":     {Text: "loop"},
		"null":     {Text: "/dev/null", Key: "/dev/null"},
	} {
		text, err := os.Readlink(filepath.Join(backing, name))
		if err != nil {
			t.Fatal(err)
		}
		got := fusefs.PresentLink(backing, mnt, hv, fusefs.SymlinksContain, backing, text)
		if got != want {
			t.Errorf("PresentLink(%s -> %s) = %+v, want %+v", name, text, got, want)
		}
		// The mount's own answer: a symlink of the presented text's size.
		st := lstatT(t, filepath.Join(mnt, name))
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len(want.Text)) {
			t.Errorf("lstat mnt/%s: mode %#o size %d, want a symlink of size %d", name, st.Mode, st.Size, len(want.Text))
		}
		shown, rerr := os.Readlink(filepath.Join(mnt, name))
		if rerr != nil || shown != want.Text {
			t.Errorf("readlink mnt/%s = %q, %v; want %q", name, shown, rerr, want.Text)
		}
	}
}

// A link whose text names an in-root link keeps its text (or a text to that
// link), however far that link's own target lies: python -> python3 in a
// venv stays "python3" though python3 escapes (README, "Links are links":
// the text is judged by the object it names, lstat(2) semantics on the last
// component; the named link is presented on its own).
func TestLinkToInRootLinkKeepsText(t *testing.T) {
	outside := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(outside, "bin"), 0o755)
	writeFileT(t, filepath.Join(outside, "bin/python3.11"), "#!interp\n", 0o755)
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, ".venv/bin"), 0o755)
		mkdirT(t, filepath.Join(b, ".venv/lib"), 0o755)
		symlinkT(t, filepath.Join(outside, "bin/python3.11"), filepath.Join(b, ".venv/bin/python3"))
		symlinkT(t, "python3", filepath.Join(b, ".venv/bin/python"))
		symlinkT(t, filepath.Join(b, ".venv/bin/python3"), filepath.Join(b, ".venv/bin/abs"))
		symlinkT(t, "../bin/python", filepath.Join(b, ".venv/lib/up"))
	}))
	hv := hostViewOf(mnt)
	key := filepath.Join(outside, "bin/python3.11")
	for name, want := range map[string]string{
		".venv/bin/python3": hv + key,
		".venv/bin/python":  "python3",
		".venv/bin/abs":     "python3",
		".venv/lib/up":      "../bin/python",
	} {
		st := lstatT(t, filepath.Join(mnt, name))
		shown, err := os.Readlink(filepath.Join(mnt, name))
		if err != nil || shown != want || st.Size != int64(len(want)) {
			t.Errorf("readlink mnt/%s = %q (lstat size %d), %v; want %q (size %d)", name, shown, st.Size, err, want, len(want))
		}
		text, err := os.Readlink(filepath.Join(backing, name))
		if err != nil {
			t.Fatal(err)
		}
		got := fusefs.PresentLink(backing, mnt, hv, fusefs.SymlinksContain, filepath.Dir(filepath.Join(backing, name)), text)
		if got.Text != want || got.Key != key {
			t.Errorf("PresentLink(%s -> %s) = %+v, want text %q key %q", name, text, got, want, key)
		}
		data, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || string(data) != "#!interp\n" {
			t.Errorf("read through mnt/%s = %q, %v; want the outside file's content", name, data, err)
		}
	}
}

// TestPresentLongText: an escaping link whose presented text (the host
// view's prefix and the target's key) would exceed 4095 bytes answers
// READLINK with ENAMETOOLONG, never EIO; a shorter one reads.
func TestPresentLongText(t *testing.T) {
	long := "/wsfs-no-such-dir"
	for len(long) < 4000 {
		long += "/" + strings.Repeat("d", 200)
	}
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		symlinkT(t, long, filepath.Join(b, "long"))
		symlinkT(t, "/wsfs-no-such-dir/short", filepath.Join(b, "short"))
	}))
	got := errnoRun(t, mnt, "readlink long", "readlink short")
	if got["readlink long"] != "ENAMETOOLONG" || got["readlink short"] != "OK" {
		t.Errorf("readlink: %v, want long ENAMETOOLONG and short OK", got)
	}
}
