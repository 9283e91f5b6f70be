package fusefs

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/x\134y`: `/x\y`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := identity.UnescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMountAt: the statx/statmount answers agree with the mount table: a
// directory that is no mount point, a tmpfs mounted on it and gone again,
// the proc mount (RefusedMount names it), and "/" itself.
func TestMountAt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount(2))")
	}
	dir := t.TempDir()
	if e, ok, err := MountAt(dir); err != nil || ok {
		t.Fatalf("MountAt(%s) before the mount: %+v %v %v, want none", dir, e, ok, err)
	}
	if err := unix.Mount("wsfs-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if e, ok, err := MountAt(dir); err != nil || !ok || e.FSType != "tmpfs" || e.Source != "wsfs-test" || e.Root != "/" {
		t.Errorf("MountAt(%s) after the mount: %+v %v %v, want tmpfs from wsfs-test", dir, e, ok, err)
	} else if table, err := MountTable(); err != nil || table[dir] != e {
		t.Errorf("MountAt(%s) = %+v, the mount table has %+v (%v)", dir, e, table[dir], err)
	}
	if root, fstype, known := MountRootType(dir); !known || !root || fstype != "tmpfs" {
		t.Errorf("MountRootType(%s): %v %q %v, want a tmpfs root", dir, root, fstype, known)
	}
	if mp, fstype, refused, err := RefusedMount(dir + "/missing/x"); err != nil || refused {
		t.Errorf("RefusedMount(tmpfs/missing/x): %q %q %v %v, want not refused", mp, fstype, refused, err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := MountAt(dir); err != nil || ok {
		t.Errorf("MountAt(%s) after the unmount: %+v %v %v, want none", dir, e, ok, err)
	}
	if mp, fstype, refused, err := RefusedMount("/proc/1/fd"); err != nil || !refused || mp != "/proc" || fstype != "proc" {
		t.Errorf("RefusedMount(/proc/1/fd): %q %q %v %v, want the proc mount at /proc", mp, fstype, refused, err)
	}
	table, err := MountTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/proc"} {
		if e, ok, err := MountAt(p); err != nil || !ok || e != table[p] {
			t.Errorf("MountAt(%s): %+v %v %v, want %+v as in the mount table", p, e, ok, err, table[p])
		}
	}
	if root, fstype, known := MountRootType("/"); !known || !root || fstype != strings.SplitN(table["/"].FSType, ".", 2)[0] {
		t.Errorf("MountRootType(/): %v %q %v, want the root of a %s mount", root, fstype, known, table["/"].FSType)
	}
}
