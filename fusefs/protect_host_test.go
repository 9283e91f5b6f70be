package fusefs_test

// Protection that follows the host (DESIGN.md, "Protected subpaths"): hard
// links made on the host to protected files, and .git swapped on the host
// after mounting.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// errnoChild runs "op path [arg]" lines (argv[1:]) in the child's cwd and
// prints "op path: ERRNAME" (OK on success) per line. Ops: append, create
// (O_TRUNC, mode 755), chmod MODE, read, link NEW, unlink, rename NEW,
// mkdir, rmdir, symlink TEXT, readlink.
const errnoChild = `
import os, sys, errno
def run(op, p, arg):
    if op == "append":
        fd = os.open(p, os.O_WRONLY | os.O_APPEND); os.write(fd, b"x\n"); os.close(fd)
    elif op == "create":
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755); os.write(fd, b"x\n"); os.close(fd)
    elif op == "chmod":
        os.chmod(p, int(arg, 8))
    elif op == "read":
        open(p).read()
    elif op == "link":
        os.link(p, arg)
    elif op == "unlink":
        os.unlink(p)
    elif op == "rename":
        os.rename(p, arg)
    elif op == "mkdir":
        os.mkdir(p)
    elif op == "rmdir":
        os.rmdir(p)
    elif op == "symlink":
        os.symlink(arg, p)
    elif op == "readlink":
        os.readlink(p)
    else:
        raise SystemExit("bad op " + op)
for line in sys.argv[1:]:
    f = line.split()
    try:
        run(f[0], f[1], f[2] if len(f) > 2 else None)
        r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print("%s: %s" % (line, r))
`

func errnoRun(t *testing.T, dir string, ops ...string) map[string]string {
	t.Helper()
	args := make([]string, len(ops))
	for i, o := range ops {
		args[i] = shq(o)
	}
	out := shOK(t, dir, "python3 -c "+shq(errnoChild)+" "+strings.Join(args, " "))
	got := map[string]string{}
	for _, l := range lines(out) {
		k, v, _ := strings.Cut(l, ": ")
		got[k] = v
	}
	return got
}

// TestProtectedHardLinkAliasBothOrders: hard links made on the host after
// mounting, `alias` -> .git/config and `hookalias` -> .git/hooks/pre-commit.
// Whichever name the kernel looks up first, every write through either name
// is EACCES (the inode is protected by (dev, ino)), and a plain hard-linked
// pair gets the same (allowed) answer through both names. On ext4 without
// the policy all of these would succeed.
func TestProtectedHardLinkAliasBothOrders(t *testing.T) {
	if testing.Short() {
		t.Skip("race test: skipped with -short")
	}
	need(t, "python3")
	for _, aliasFirst := range []bool{true, false} {
		t.Run("aliasFirst="+strconv.FormatBool(aliasFirst), func(t *testing.T) {
			backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
				mkdirT(t, filepath.Join(b, ".git/hooks"), 0o755)
				writeFileT(t, filepath.Join(b, ".git/config"), "[core]\n", 0o644)
				writeFileT(t, filepath.Join(b, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
				writeFileT(t, filepath.Join(b, "f"), "f\n", 0o644)
			}))
			for _, l := range [][2]string{{".git/config", "alias"}, {".git/hooks/pre-commit", "hookalias"}, {"f", "f2"}} {
				if err := os.Link(filepath.Join(backing, l[0]), filepath.Join(backing, l[1])); err != nil {
					t.Fatal(err)
				}
			}
			snap := treeSnapshot(t, filepath.Join(backing, ".git"))
			first, second := []string{"read alias", "read hookalias", "read f2"}, []string{"read .git/config", "read .git/hooks/pre-commit", "read f"}
			if !aliasFirst {
				first, second = second, first
			}
			// Look the names up in the chosen order (in one child, so the
			// kernel's node for the inode is made through that name).
			errnoRun(t, mnt, append(first, second...)...)
			got := errnoRun(t, mnt,
				"append alias", "chmod hookalias 4777", "append .git/config",
				"chmod .git/hooks/pre-commit 4777", "link alias alias2",
				"append f", "append f2", "chmod f2 600")
			want := map[string]string{
				"append alias": "EACCES", "chmod hookalias 4777": "EACCES", "append .git/config": "EACCES",
				"chmod .git/hooks/pre-commit 4777": "EACCES", "link alias alias2": "EACCES",
				"append f": "OK", "append f2": "OK", "chmod f2 600": "OK",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: got %s, want %s", k, got[k], v)
				}
			}
			wantUnchanged(t, ".git after writes through aliases", filepath.Join(backing, ".git"), snap)
		})
	}
}

// raceHookChild writes .git/hooks/x (and .git/config) through the mount for
// argv[1] seconds and prints "ops=N" and one "result count" line per outcome.
const raceHookChild = `
import os, sys, time, errno, collections
end = time.time() + float(sys.argv[1])
res = collections.Counter()
ops = 0
while time.time() < end:
    for p, fl in ((".git/hooks/x", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), (".git/config", os.O_WRONLY | os.O_APPEND)):
        ops += 1
        try:
            fd = os.open(p, fl, 0o755)
            try:
                os.write(fd, b"#!/bin/sh\necho pwned\n")
            finally:
                os.close(fd)
            res[p + ":ok"] += 1
        except OSError as e:
            res[p + ":" + errno.errorcode.get(e.errno, str(e.errno))] += 1
print("ops=%d" % ops)
for k in sorted(res):
    print(k, res[k])
`

// TestRaceSwapGitForSymlink: a host loop swaps .git for a symlink (to a
// decoy inside the root, then to one outside it) and back, as fast as it
// can, while a child process writes .git/hooks/x and appends to .git/config
// through the mount for ~5 s. No write lands in a protected place (the real
// hooks and config wherever they are, the decoys' hooks and config: each
// decoy holds HEAD, so git would take it as the gitdir while .git points at
// it, and the repository rule protects it wherever it is) or outside the
// root.
func TestRaceSwapGitForSymlink(t *testing.T) {
	if testing.Short() {
		t.Skip("race test: skipped with -short")
	}
	need(t, "python3")
	outside := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(outside, "hooks"), 0o755)
	writeFileT(t, filepath.Join(outside, "config"), "outside config\n", 0o644)
	writeFileT(t, filepath.Join(outside, "HEAD"), "ref: refs/heads/main\n", 0o644)
	outBefore := treeSnapshot(t, outside)
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, ".git/hooks"), 0o755)
		writeFileT(t, filepath.Join(b, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
		writeFileT(t, filepath.Join(b, ".git/config"), "[core]\n", 0o644)
		mkdirT(t, filepath.Join(b, "decoy/hooks"), 0o755)
		writeFileT(t, filepath.Join(b, "decoy/config"), "decoy config\n", 0o644)
		writeFileT(t, filepath.Join(b, "decoy/HEAD"), "ref: refs/heads/main\n", 0o644)
	}))
	git, real := filepath.Join(backing, ".git"), filepath.Join(backing, ".git.real")
	gitBefore := treeSnapshot(t, git)
	decoyBefore := treeSnapshot(t, filepath.Join(backing, "decoy"))

	targets := []string{"decoy", outside}
	out := runRace(t, mnt, raceHookChild, raceSeconds(t, 5), func(i int) error {
		err := os.Rename(git, real)
		if err == nil {
			err = os.Symlink(targets[i%2], git)
			if err == nil {
				err = os.Remove(git)
			}
			if e := os.Rename(real, git); e != nil && err == nil {
				err = e
			}
		}
		return err
	})
	if strings.Contains(out, ":ok") {
		t.Errorf("a write through .git succeeded during the race:\n%s", out)
	}
	if _, err := os.Lstat(git); err != nil {
		t.Fatalf(".git after the race: %v", err)
	}
	wantUnchanged(t, "real .git after the race", git, gitBefore)
	wantUnchanged(t, "in-root decoy after the race", filepath.Join(backing, "decoy"), decoyBefore)
	wantUnchanged(t, "outside decoy after the race", outside, outBefore)
}
