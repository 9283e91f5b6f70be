package fusefs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

// PresentLink answers exactly what the mount does for each kind of link:
// the text readlink gives, the object served in place, or the errno.
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
		symlinkT(t, filepath.Join(outside, "f"), filepath.Join(b, "out"))    // served in place
		symlinkT(t, filepath.Join(outside, "nope"), filepath.Join(b, "dangling"))
		symlinkT(t, filepath.Dir(b), filepath.Join(b, "up")) // holds the mountpoint
		symlinkT(t, "loop", filepath.Join(b, "loop"))        // a loop stays a link
	}))
	for name, want := range map[string]fusefs.LinkView{
		"plain":    {Text: "d/f", Key: filepath.Join(backing, "d/f")},
		"absin":    {Text: "d/f", Key: filepath.Join(backing, "d/f")},
		"viamnt":   {Text: "d", Key: filepath.Join(backing, "d")},
		"out":      {Key: filepath.Join(outside, "f")},
		"dangling": {Errno: syscall.EACCES},
		"up":       {Errno: syscall.EACCES},
		"loop":     {Text: "loop"},
	} {
		text, err := os.Readlink(filepath.Join(backing, name))
		if err != nil {
			t.Fatal(err)
		}
		got := fusefs.PresentLink(backing, mnt, fusefs.SymlinksContain, backing, text)
		if got != want {
			t.Errorf("PresentLink(%s -> %s) = %+v, want %+v", name, text, got, want)
		}
		// The mount's own answer.
		st, err := os.Lstat(filepath.Join(mnt, name))
		switch {
		case want.Errno != 0:
			wantErrno(t, "lstat mnt/"+name, err, want.Errno)
		case want.Text != "":
			shown, rerr := os.Readlink(filepath.Join(mnt, name))
			if rerr != nil || shown != want.Text {
				t.Errorf("readlink mnt/%s = %q, %v; want %q", name, shown, rerr, want.Text)
			}
		case err != nil || st.Mode()&os.ModeSymlink != 0:
			t.Errorf("lstat mnt/%s = %v, %v; want the target served in place", name, st, err)
		}
	}
}
