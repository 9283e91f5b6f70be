package fusefs_test

// End-to-end runs of issue 7's acceptance: git, python and cp driven from
// child processes against real mounts.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// python3 -m venv creates venv/bin/python3 as a link to the interpreter
// outside the project and runs it at once: 20 times in a row, 20 passes
// (it failed 3 times in 4 with EACCES while escaping links were served in
// place). --without-pip keeps each round short; the link is the same.
func TestLinksPythonVenv(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	need(t, "python3")
	_, mnt, _ := mountT(t)
	out := shOK(t, mnt, `ok=0; for i in $(seq 20); do rm -rf venv; python3 -m venv --without-pip venv && [ "$(venv/bin/python -c 'print(1)')" = 1 ] && ok=$((ok+1)); done; echo $ok`)
	if out != "20\n" {
		t.Errorf("python3 -m venv venv && venv/bin/python -c 'print(1)': %q passes of 20", out)
	}
}

// A repository committed natively that tracks an absolute in-root link, a
// relative escaping link and an absolute escaping link: git status in the
// mount shows no type change, deletion or untracked entry. Links whose text
// the mount rewrites may show as " M" (documented in the README).
func TestLinksGitStatus(t *testing.T) {
	need(t, "git")
	outside := canonT(t, t.TempDir())
	mkdirT(t, filepath.Join(outside, "lib"), 0o755)
	writeFileT(t, filepath.Join(outside, "lib/x"), "x\n", 0o644)
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		mkdirT(t, filepath.Join(b, "src"), 0o755)
		writeFileT(t, filepath.Join(b, "src/main.go"), "package main\n", 0o644)
		symlinkT(t, filepath.Join(b, "src/main.go"), filepath.Join(b, "absin"))
		rel, err := filepath.Rel(b, filepath.Join(outside, "lib"))
		if err != nil {
			t.Fatal(err)
		}
		symlinkT(t, rel, filepath.Join(b, "relout"))
		symlinkT(t, filepath.Join(outside, "lib"), filepath.Join(b, "absout"))
		symlinkT(t, "src/main.go", filepath.Join(b, "plain"))
		shOK(t, b, "git init -q . && git add -A && git -c user.email=a@b -c user.name=a commit -q -m init")
	}))
	out := shOK(t, mnt, "git status --porcelain")
	t.Logf("git status --porcelain in the mount:\n%s", out)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, " M ") {
			t.Errorf("git status --porcelain in the mount: %q (want nothing but \" M\" entries)", l)
		}
	}
	if strings.Contains(out, "plain") {
		t.Errorf("git status shows the unrewritten link plain: %q", out)
	}
	if out := shOK(t, mnt, "git ls-files -s absout relout | cut -c1-6 | sort -u"); out != "120000\n" {
		t.Errorf("git ls-files modes of the escaping links: %q, want links (120000)", out)
	}
}

// cp -a of an escaping link out of the mount gives a link that resolves
// while the session lives (its text is the host view's path).
func TestLinksCopyOutResolves(t *testing.T) {
	outside := canonT(t, t.TempDir())
	writeFileT(t, filepath.Join(outside, "f"), "out\n", 0o644)
	dst := canonT(t, t.TempDir())
	_, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		symlinkT(t, filepath.Join(outside, "f"), filepath.Join(b, "esc"))
	}))
	shOK(t, mnt, "cp -a esc "+shq(dst+"/copy"))
	if got, err := os.Readlink(filepath.Join(dst, "copy")); err != nil || got != hostViewOf(mnt)+outside+"/f" {
		t.Errorf("copied link -> %q, %v; want %q", got, err, hostViewOf(mnt)+outside+"/f")
	}
	if out := shOK(t, "/", "cat "+shq(dst+"/copy")); out != "out\n" {
		t.Errorf("cat of the copied link: %q", out)
	}
}
