package mounts_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts"
)

// copyBinary copies the wsfs binary to dir and returns its path.
func copyBinary(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Open(wsfsBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, "wsfs")
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExecConfineBinaryAnywhere: `exec --confine` does not depend on where
// the wsfs binary lives: beside the daemon's socket (a directory the jail
// hides), in /tmp, and run as `go run ./cmd/wsfs` (a binary in the go
// build cache's temp directory). The jail starts at the root's physical
// path and writes through the mount.
func TestExecConfineBinaryAnywhere(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap missing")
	}
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "a")
	if r := d.wsfs(t, "session", "create", "bin", "--root", root); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	tmp, err := os.MkdirTemp("/tmp", "wsfs-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	jailArgs := []string{"exec", "--session", "bin", "--confine", "--", "sh", "-c", `pwd -P; echo "$1" > "$1"; cat "$1"`, "sh"}
	cases := []struct {
		name string
		argv []string
	}{
		{"beside the socket", []string{copyBinary(t, filepath.Dir(d.socket))}},
		{"in /tmp", []string{copyBinary(t, tmp)}},
	}
	if testing.Short() {
		t.Log("-short: go run case skipped (it builds the binary)")
	} else if _, err := exec.LookPath("go"); err == nil {
		cases = append(cases, struct {
			name string
			argv []string
		}{"go run", []string{"go", "run", "./cmd/wsfs"}})
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "f" + string(rune('0'+i))
			argv := append(append(append([]string{}, tc.argv...), jailArgs...), name)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = ".." // the repository, for go run
			cmd.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
			r := run(t, cmd)
			if want := root + "\n" + name + "\n"; r.code != 0 || r.stdout != want {
				t.Fatalf("%v: %+v, want exit 0 and %q", tc.argv, r, want)
			}
			if got := readFile(t, filepath.Join(root, name)); got != name+"\n" {
				t.Errorf("%s in the root: %q", name, got)
			}
		})
	}
	if strings.Contains(d.logText(), "level=ERROR") {
		t.Logf("daemon log:\n%s", d.logText())
	}
}

// TestSystemDirRootNotHiddenFromOthers: a session whose root is /usr
// (read-only) does not break other sessions' jails: a root at a system
// directory (mounts.SystemDir) is not hidden from them, so the loader, the
// libraries and sh are there; another session's ordinary root still is.
func TestSystemDirRootNotHiddenFromOthers(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap missing")
	}
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	root, secret := filepath.Join(dir, "proj"), filepath.Join(dir, "secret")
	mkTree(t, root, "a")
	mkTree(t, secret, "s")
	for _, args := range [][]string{
		{"session", "create", "sys", "--root", "/usr", "--mode", "read-only"},
		{"session", "create", "priv", "--root", secret},
		{"session", "create", "work", "--root", root},
	} {
		if r := d.wsfs(t, args...); r.code != 0 {
			t.Fatalf("%v: %d %s", args, r.code, r.stderr)
		}
	}
	r := d.exec(t, "work", []string{"--confine"}, "sh", "-c", `cat /usr/share/common-licenses/GPL-3 >/dev/null && echo usr ok; ls `+secret+`; echo "secret $(ls -A `+secret+` | wc -l)"`)
	if r.code != 0 || r.stdout != "usr ok\nsecret 0\n" {
		t.Errorf("jail of work beside a /usr session: %+v, want /usr readable and %s hidden (empty)", r, secret)
	}
	if !mounts.SystemDir("/usr") || !mounts.SystemDir("/usr/lib/x") || !mounts.SystemDir("/") || mounts.SystemDir("/srv/proj") || mounts.SystemDir("/usrx") {
		t.Errorf("SystemDir: /usr %v, /usr/lib/x %v, / %v, /srv/proj %v, /usrx %v", mounts.SystemDir("/usr"), mounts.SystemDir("/usr/lib/x"), mounts.SystemDir("/"), mounts.SystemDir("/srv/proj"), mounts.SystemDir("/usrx"))
	}
}
