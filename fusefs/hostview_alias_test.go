package fusefs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/policy"
)

// A none root is hidden in the host view by identity, not by the name
// looked up (issue 20 item 5): a bind mount of a directory above it
// (outer, holding the none root secret) at an alias outside every root
// shows alias/secret, the same directory, EACCES as the root is, and the
// real path stays EACCES too, whichever of the two names a fresh view is
// asked first (one directory reached by two paths is one node). The rest
// of outer stays readable through the alias. Asked by child processes
// (cat) and by this one. A place the host view hides (HostViewConfig.Hidden,
// outer/hid, as the daemon hides its state) is refused at both paths and
// listed at neither: a listing of alias shows what one of outer shows,
// the none root included (listed, EACCES, as at its own path), asked
// before and after the lookups.
func TestHostViewAliasAboveNoneRoot(t *testing.T) {
	base := varTmpDirT(t)
	outer := filepath.Join(base, "outer")
	secret := filepath.Join(outer, "secret")
	mkdirT(t, secret, 0o755)
	mkdirT(t, filepath.Join(base, "proj"), 0o755)
	writeFileT(t, filepath.Join(secret, "s"), "secret\n", 0o644)
	writeFileT(t, filepath.Join(outer, "pub"), "pub\n", 0o644)
	hid := filepath.Join(outer, "hid")
	mkdirT(t, hid, 0o755)
	writeFileT(t, filepath.Join(hid, "x"), "hid\n", 0o644)
	alias := varTmpDirT(t)
	bindT(t, outer, alias)
	spec := specFor(t, filepath.Join(base, "proj"))
	spec.Additional = []policy.Root{{Path: secret, Access: policy.AccessNone}}
	pol := compileT(t, spec)
	real := secret + "/s"
	through := alias + "/secret/s"
	for name, order := range map[string][2]string{"alias-first": {through, real}, "real-first": {real, through}} {
		t.Run(name, func(t *testing.T) {
			hv := filepath.Join(canonT(t, t.TempDir()), "hv")
			mountHostViewT(t, fusefs.HostViewConfig{Mountpoint: hv, Policy: pol, Session: t.Name(),
				Hidden: []string{hid}, Logger: testLogger(), NoWatch: true})
			lists := func() {
				t.Helper()
				for _, p := range order {
					d := filepath.Dir(filepath.Dir(p))
					if got := namesT(t, hv+d); got != "pub secret" {
						t.Errorf("ls %s = %q, want %q", hv+d, got, "pub secret")
					}
				}
			}
			lists()
			for _, p := range []string{alias + "/hid/x", hid + "/x"} {
				_, err := os.ReadFile(hv + p)
				wantErrno(t, "read "+p, err, syscall.EACCES)
			}
			for _, p := range order {
				out, err := exec.Command("cat", hv+p).CombinedOutput()
				if want := "cat: " + hv + p + ": Permission denied\n"; err == nil || string(out) != want {
					t.Errorf("cat %s: %q, %v; want %q", hv+p, out, err, want)
				}
				_, err = os.ReadFile(hv + p)
				wantErrno(t, "read "+p, err, syscall.EACCES)
				_, err = os.Lstat(hv + filepath.Dir(p))
				wantErrno(t, "lstat "+filepath.Dir(p), err, syscall.EACCES)
			}
			if out, err := exec.Command("cat", hv+alias+"/pub").CombinedOutput(); err != nil || string(out) != "pub\n" {
				t.Errorf("cat %s: %q, %v; want %q", hv+alias+"/pub", out, err, "pub\n")
			}
			lists()
		})
	}
	if b, err := os.ReadFile(real); err != nil || string(b) != "secret\n" {
		t.Errorf("the source changed: %q, %v", b, err)
	}
}

// namesT returns the names os.ReadDir lists in dir, space-separated, or
// the error.
func namesT(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return strings.Join(names, " ")
}
