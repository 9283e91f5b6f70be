package fusefs_test

// Repository protection (DESIGN.md, Round 4, "What git executes is
// protected"; policy/git.go): a session's writes never make the host
// user's own git run code. Each attack writes a marker command where git
// would run it; the user's native git then runs on the backing tree (a
// child process, not through the mount) and the marker must never appear.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoFixture is the user's tree, made natively: a top-level repository
// with core.hooksPath=.husky and include.path=../team.gitconfig, nested
// repositories at depth 1 (sub1) and 3 (a/b/sub3) and a worktree whose
// .git is a "gitdir:" pointer to store/g, all staged as gitlinks so that
// the top-level git status recurses into them.
const repoFixture = `set -e
git init -q -b main .
git config core.hooksPath .husky
git config include.path ../team.gitconfig
mkdir .husky nest
echo base > f
git init -q -b main sub1; (cd sub1 && echo s > s && git add s && git commit -qm s)
mkdir -p a/b; git init -q -b main a/b/sub3; (cd a/b/sub3 && echo s > s && git add s && git commit -qm s)
mkdir store; git init -q -b main --separate-git-dir=store/g wt; (cd wt && echo w > w && git add w && git commit -qm w)
echo store/ > .gitignore
git add .gitignore f sub1 a/b/sub3 wt 2>/dev/null
git commit -qm init
`

// repoAttacks are the session's writes through the mount, each printing
// "name: ok" or "name: <strerror>"; $M is the marker directory, $B the
// backing root (what a path written into a config names).
const repoAttacks = `
try() { n=$1; shift; if out=$( { "$@"; } 2>&1 ); then echo "$n: ok"; else echo "$n: ${out##*: }"; fi; }
fsm() { printf '[core]\n\tfsmonitor = touch %s\n' "$M/$1"; }
hook() { printf '#!/bin/sh\ntouch %s\n' "$M/$1"; }
try depth1-config sh -c "$(declare -f fsm); fsm depth1 >> sub1/.git/config"
try depth1-hook sh -c "$(declare -f hook); hook depth1-hook > sub1/.git/hooks/pre-commit && chmod +x sub1/.git/hooks/pre-commit"
try depth3-config sh -c "$(declare -f fsm); fsm depth3 >> a/b/sub3/.git/config"
try depth3-hook sh -c "$(declare -f hook); hook depth3-hook > a/b/sub3/.git/hooks/post-checkout && chmod +x a/b/sub3/.git/hooks/post-checkout"
try husky sh -c "$(declare -f hook); hook husky > .husky/pre-commit && chmod +x .husky/pre-commit"
try include sh -c "$(declare -f fsm); fsm include > team.gitconfig"
try pointer-config sh -c "$(declare -f fsm); fsm pointer >> store/g/config"
try pointer-rewrite sh -c "echo gitdir: $B/store/g > wt/.git"
try git-init git init -q deep/x/y
try init-config sh -c "$(declare -f fsm); fsm init >> deep/x/y/.git/config"
try evil-mkdir mkdir -p evil/objects evil/refs evilwt
try evil-config sh -c "$(declare -f fsm); { fsm evil; printf '\tworktree = %s\n' $B/evilwt; } > evil/config"
try evil-head sh -c "echo 'ref: refs/heads/main' > evil/HEAD"
try evil-head-symlink ln -s refs/heads/main evil/HEAD
try prep-mkdir mkdir -p prep/objects prep/refs
try prep-config sh -c "$(declare -f fsm); fsm prep > prep/config"
try prep-rename mv -T prep nest/.git
try nest-head sh -c "echo 'ref: refs/heads/main' > nest/.git/HEAD"
`

// repoNative is the user's own git afterwards, on the backing tree.
const repoNative = `
git status --porcelain >/dev/null 2>&1
git -C sub1 status >/dev/null 2>&1
git -C a/b/sub3 checkout -q -b other >/dev/null 2>&1
git -C a/b/sub3 status >/dev/null 2>&1
git -C wt status >/dev/null 2>&1
git -C deep/x/y status >/dev/null 2>&1
git --git-dir=evil status >/dev/null 2>&1
git -C nest status >/dev/null 2>&1
echo n >> f && git commit -qam native >/dev/null 2>&1
(cd sub1 && echo t >> s && git commit -qam t >/dev/null 2>&1)
ls -A "$M"
`

func needGit(t *testing.T) {
	t.Helper()
	if exec.Command("git", "--version").Run() != nil {
		t.Skip("git is not installed on this host")
	}
}

// TestRepoProtectionNativeGit: every attack is EACCES at the write that
// would make git run it, and the user's native git status and commit then
// run no marker.
func TestRepoProtectionNativeGit(t *testing.T) {
	needGit(t)
	env := gitEnv(t)
	markers := t.TempDir()
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		if out, errOut, code := shEnv(t, b, env, repoFixture); code != 0 {
			t.Fatalf("fixture: exit %d: %s %s", code, out, errOut)
		}
	}))
	env = append(env, "M="+markers, "B="+backing)
	pointer, err := os.ReadFile(filepath.Join(backing, "wt/.git"))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := shEnv(t, mnt, env, repoAttacks)
	want := `depth1-config: Permission denied
depth1-hook: Permission denied
depth3-config: Permission denied
depth3-hook: Permission denied
husky: Permission denied
include: Permission denied
pointer-config: Permission denied
pointer-rewrite: Permission denied
git-init: Permission denied
init-config: Permission denied
evil-mkdir: ok
evil-config: ok
evil-head: Permission denied
evil-head-symlink: Permission denied
prep-mkdir: ok
prep-config: ok
prep-rename: Permission denied
nest-head: Directory nonexistent
`
	if code != 0 || out != want {
		t.Errorf("attacks through the mount: exit %d\n got:\n%s\nwant:\n%s\nstderr: %s", code, out, want, errOut)
	}
	// The refused writes left nothing git would run.
	for _, p := range []string{"sub1/.git/hooks/pre-commit", "a/b/sub3/.git/hooks/post-checkout", ".husky/pre-commit",
		"team.gitconfig", "deep/x/y/.git/config", "evil/HEAD", "nest/.git"} {
		if _, err := os.Lstat(filepath.Join(backing, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists on the backing tree after a refused write (err=%v)", p, err)
		}
	}
	for _, p := range []string{"sub1/.git/config", "a/b/sub3/.git/config", "store/g/config"} {
		if b, err := os.ReadFile(filepath.Join(backing, p)); err != nil || strings.Contains(string(b), "fsmonitor") {
			t.Errorf("%s after refused appends: %q (err=%v)", p, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(backing, "wt/.git")); err != nil || string(b) != string(pointer) {
		t.Errorf("wt/.git after a refused rewrite: %q (err=%v)", b, err)
	}
	// The user's own git runs nothing the session wrote.
	got, errOut, code := shEnv(t, backing, env, repoNative)
	if code != 0 || got != "" {
		t.Errorf("native git after the session: exit %d, markers %q (want none); stderr: %s", code, got, errOut)
	}
}

// TestRepoProtectionGitWorks: normal git work in the top-level repository
// through the mount is unchanged: add, commit, a branch named config
// (.git/refs/heads is not a git directory), status.
func TestRepoProtectionGitWorks(t *testing.T) {
	needGit(t)
	env := gitEnv(t)
	backing, mnt, _ := mountT(t, withPopulate(func(t *testing.T, b string) {
		if out, errOut, code := shEnv(t, b, env, repoFixture); code != 0 {
			t.Fatalf("fixture: exit %d: %s %s", code, out, errOut)
		}
	}))
	script := `set -e
echo two > f2
git add f2
git commit -qm two
git branch config
git branch --list
git log --format=%s
git status --porcelain
git -C sub1 log --format=%s
`
	out, errOut, code := shEnv(t, mnt, env, script)
	want := "  config\n* main\ntwo\ninit\ns\n"
	if code != 0 || out != want {
		t.Errorf("git through the mount: exit %d, stdout %q, want %q; stderr: %s", code, out, want, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(backing, ".git/refs/heads/config")); err != nil || len(strings.TrimSpace(string(b))) != 40 {
		t.Errorf(".git/refs/heads/config on the backing tree: %q (err=%v)", b, err)
	}
}

// TestRepoProtectionEmptyDotGit: mkdir <root>/.git then rmdir works as on
// ext4 (an empty .git holds nothing git would run); what it would hold is
// refused while it exists.
func TestRepoProtectionEmptyDotGit(t *testing.T) {
	backing, mnt, _ := mountT(t)
	got := errnoRun(t, mnt, "mkdir .git", "create .git/config", "mkdir .git/hooks", "rmdir .git", "mkdir .git", "rename .git moved", "rmdir moved")
	want := map[string]string{"mkdir .git": "OK", "create .git/config": "EACCES", "mkdir .git/hooks": "EACCES",
		"rmdir .git": "OK", "rename .git moved": "OK", "rmdir moved": "OK"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if _, err := os.Lstat(filepath.Join(backing, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git on the backing tree after rmdir: err=%v", err)
	}
}
