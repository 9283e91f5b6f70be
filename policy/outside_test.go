package policy

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Outside "none": every path outside the roots is unreachable (EACCES
// root:none, reads included), whatever the mode; the roots keep their
// matrix; any other value is refused.
func TestOutsideNone(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, ro := filepath.Join(dir, "root"), filepath.Join(dir, "ro")
	for _, d := range []string{root, ro} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeFullAccess} {
		p, err := Compile(Spec{Mode: mode, Primary: root, Temp: []string{}, Outside: AccessNone,
			Additional: []Root{{Path: ro, Access: AccessReadOnly}}})
		if err != nil {
			t.Fatal(err)
		}
		none := Decision{Errno: syscall.EACCES, Rule: "root:none"}
		for _, op := range []Op{OpRead, OpCreate, OpUnlink} {
			if got := p.Decide(op, filepath.Join(dir, "elsewhere", "f")); got != none {
				t.Errorf("%s: %v outside: %+v, want %+v", mode, op, got, none)
			}
			if got := p.Decide(op, "/etc/passwd"); got != none {
				t.Errorf("%s: %v /etc/passwd: %+v, want %+v", mode, op, got, none)
			}
		}
		if got := p.Decide(OpRead, filepath.Join(ro, "f")); !got.Allow || got.Rule != "additional:read-only" {
			t.Errorf("%s: read in a read-only root: %+v", mode, got)
		}
		want := Decision{Allow: true, Rule: "primary:read-write"}
		if mode == ModeReadOnly {
			want = Decision{Errno: syscall.EROFS, Rule: "primary:read-only"}
		}
		if got := p.Decide(OpCreate, filepath.Join(root, "f")); got != want {
			t.Errorf("%s: create in the root: %+v, want %+v", mode, got, want)
		}
		if got := p.Spec().Outside; got != AccessNone {
			t.Errorf("Spec().Outside = %q", got)
		}
	}
	for _, bad := range []Access{AccessReadOnly, AccessReadWrite, "open"} {
		if _, err := Compile(Spec{Primary: root, Outside: bad}); err == nil {
			t.Errorf("outside %q: compiled", bad)
		}
	}
}
