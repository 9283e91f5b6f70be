package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseGitConfig: the values git's config.c would read for
// core.hooksPath and the include paths.
func TestParseGitConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config")
	writeFile(t, p, "\xef\xbb\xbf# comment\n"+
		"[core]\n\trepositoryformatversion = 0\n\tHooksPath = .husky ; trailing comment\n"+
		"[Core] hookspath = \"with space\"/x\\\n-continued\n"+
		"[core \"sub\"]\n\thookspath = not-core\n"+
		"[include]\n\tpath = ../team.gitconfig\n"+
		"[includeIf \"gitdir:~/work/\"]\n\tpath = ~/cond.inc\n"+
		"[include.x]\n\tpath = old-syntax-is-a-subsection\n"+
		"[other]\n\tpath = nope\n\tbool\n")
	hooks, includes := parseGitConfig(p)
	assert.Equal(t, []string{".husky", "with space/x-continued"}, hooks)
	assert.Equal(t, []string{"../team.gitconfig", "~/cond.inc"}, includes)
}

// TestGitTransitions: HEAD and .git transitions that would make an
// unprotected file live, and what stays allowed.
func TestGitTransitions(t *testing.T) {
	root := tree(t, "proj/half/config", "proj/bare/HEAD", "proj/bare/config", "proj/prep/config", "proj/ok/", "proj/nest/",
		"proj/.git/HEAD", "proj/.git/config", "proj/.git/refs/heads/", "proj/x/objects/")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{}})
	rw := allow("primary:read-write")
	runChecks(t, p, root, []check{
		{OpCreate, "proj/half/HEAD", deny(syscall.EACCES, "protected:git:half/HEAD")},
		{OpSymlink, "proj/half/HEAD", deny(syscall.EACCES, "protected:git:half/HEAD")},
		{OpMkdir, "proj/half/HEAD", deny(syscall.EACCES, "protected:git:half/HEAD")},
		{OpOpenWrite, "proj/half/config", rw}, // not a git directory yet
		{OpCreate, "proj/ok/HEAD", rw},        // no protected name there
		{OpUnlink, "proj/bare/HEAD", deny(syscall.EACCES, "protected:git:bare/HEAD")},
		{OpOpenWrite, "proj/bare/config", deny(syscall.EACCES, "protected:git:bare/config")},
		{OpCreate, "proj/bare/hooks/x", deny(syscall.EACCES, "protected:git:bare/hooks")},
		{OpOpenWrite, "proj/bare/HEAD", rw},
		{OpCreate, "proj/.git/refs/heads/config", rw}, // a branch named config
		{OpCreate, "proj/.git/objects/config", rw},
		{OpUnlink, "proj/.git/HEAD", rw}, // named .git: protected without HEAD
	})
	for name, p := range strategies(p) {
		// Git's own HEAD update in a bare repository: onto an existing HEAD.
		assert.Equal(t, rw, p.DecideRename(proj+"/bare/HEAD.lock", proj+"/bare/HEAD"), name)
		assert.Equal(t, deny(syscall.EACCES, "protected:git:half/HEAD"), p.DecideRename(proj+"/ok/f", proj+"/half/HEAD"), name)
		assert.Equal(t, deny(syscall.EACCES, "protected:git:bare/HEAD"), p.DecideRename(proj+"/bare/HEAD", proj+"/ok/h"), name)
		// A prepared directory onto .git or below one; a git directory may go.
		assert.Equal(t, deny(syscall.EACCES, "protected:git:nest/.git"), p.DecideRename(proj+"/prep", proj+"/nest/.git"), name)
		assert.Equal(t, deny(syscall.EACCES, "protected:git:.git/modules/prep"), p.DecideRename(proj+"/prep", proj+"/.git/modules/prep"), name)
		assert.Equal(t, rw, p.DecideRename(proj+"/bare", proj+"/nest/.git"), name)
		assert.Equal(t, rw, p.DecideRename(proj+"/ok", proj+"/nest/.git"), name)
		assert.Equal(t, rw, p.DecideRename(proj+"/x/objects", proj+"/.git/objects2"), name)
	}
}

// TestGitConfigNames: what a repository's config names is protected, found
// by walking up from the write, and re-read when the config changes; the
// temp area is exempt.
func TestGitConfigNames(t *testing.T) {
	root := tree(t, "proj/.git/HEAD", "proj/sub/.git/HEAD", "proj/tools/", "proj/src/", "tmp/")
	proj := root + "/proj"
	writeFile(t, proj+"/.git/config", "[core]\n\thooksPath = tools/hooks\n[include]\n\tpath = ../shared.inc\n")
	writeFile(t, proj+"/shared.inc", "[includeIf \"onbranch:main\"]\n\tpath = src/nested.inc\n")
	writeFile(t, proj+"/sub/.git/config", "[core]\n\thooksPath = "+proj+"/abs-hooks\n")
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{root + "/tmp"}})
	rw := allow("primary:read-write")
	runChecks(t, p, root, []check{
		{OpCreate, "proj/tools/hooks/pre-commit", deny(syscall.EACCES, "protected:git:tools/hooks")},
		{OpMkdir, "proj/tools/hooks", deny(syscall.EACCES, "protected:git:tools/hooks")},
		{OpRename, "proj/tools", deny(syscall.EACCES, "protected:git:tools/hooks")},  // on the way
		{OpSymlink, "proj/tools", deny(syscall.EACCES, "protected:git:tools/hooks")}, // on the way
		{OpCreate, "proj/tools/other", rw},
		{OpOpenWrite, "proj/shared.inc", deny(syscall.EACCES, "protected:git:shared.inc")},
		{OpCreate, "proj/src/nested.inc", deny(syscall.EACCES, "protected:git:src/nested.inc")}, // included by an include
		{OpCreate, "proj/src/main.go", rw},
		// sub's own config names an absolute directory; writes below sub
		// find it walking up.
		{OpCreate, "proj/sub/x", rw},
		// The temp area is exempt: git init there works.
		{OpCreate, "tmp/r/.git/config", allow("temp:read-write")},
		{OpCreate, "tmp/r/.git/hooks/pre-commit", allow("temp:read-write")},
	})
	// The config changes: the old hooks directory is free, the new one
	// protected, at the next decision.
	writeFile(t, proj+"/.git/config", "[core]\n\thooksPath = .husky\n")
	runChecks(t, p, root, []check{
		{OpCreate, "proj/tools/hooks/pre-commit", rw},
		{OpCreate, "proj/.husky/pre-commit", deny(syscall.EACCES, "protected:git:.husky")},
		{OpOpenWrite, "proj/shared.inc", rw},
	})
	// A hooks path through a symlink: its target is protected too.
	require.NoError(t, os.MkdirAll(proj+"/real-hooks", 0o755))
	require.NoError(t, os.Symlink("real-hooks", proj+"/.husky"))
	writeFile(t, proj+"/.git/config", "[core]\n\thooksPath = .husky\n\n")
	runChecks(t, p, root, []check{
		{OpCreate, "proj/real-hooks/pre-commit", deny(syscall.EACCES, "protected:git:real-hooks")},
	})
}

// TestLimits: a spec over a limit is refused first, naming the field and
// the limit; one at the limits compiles.
func TestLimits(t *testing.T) {
	root := tree(t, "proj/")
	proj := root + "/proj"
	many := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	sub := func(i int) string { return fmt.Sprintf("d%d/x", i) }
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Primary: proj, Protected: many(MaxProtected+1, sub)}, "policy: protected: 1025 entries, at most 1024"},
		{Spec{Primary: proj, Protected: many(100000, sub)}, "policy: protected: 100000 entries, at most 1024"},
		{Spec{Primary: proj, Temp: many(MaxTemp+1, func(i int) string { return "/tmp" })}, "policy: temp: 65 entries, at most 64"},
		{Spec{Primary: proj, Additional: make([]Root, MaxAdditional+1)}, "policy: additional: 257 entries, at most 256"},
		{Spec{Primary: proj, Protected: []string{strings.Repeat("a", 4096)}}, "policy: protected[0]: 4096 bytes, at most 4095"},
		{Spec{Primary: proj, Protected: many(MaxProtected, sub), Additional: []Root{{Path: root + "/a", Access: AccessReadWrite}, {Path: root + "/b", Access: AccessReadOnly},
			{Path: root + "/c", Access: AccessReadWrite}, {Path: root + "/d", Access: AccessReadWrite}, {Path: root + "/e", Access: AccessReadWrite}}},
			"policy: protected: 1024 entries in each of 5 writable roots (5120 places), at most 4096 in all"},
	} {
		_, err := Compile(c.spec)
		require.Error(t, err)
		assert.Equal(t, c.want, err.Error())
	}
	p, err := Compile(Spec{Primary: proj, Temp: []string{}, Protected: many(MaxProtected, sub)})
	require.NoError(t, err)
	assert.Len(t, p.Spec().Protected, MaxProtected)
	// A read-only session guards nothing: 4 read-write additional roots
	// are at the bound.
	for _, d := range []string{"a", "b", "c", "d"} {
		require.NoError(t, os.MkdirAll(root+"/"+d, 0o755))
	}
	rw := []Root{{Path: root + "/a", Access: AccessReadWrite}, {Path: root + "/b", Access: AccessReadWrite},
		{Path: root + "/c", Access: AccessReadWrite}, {Path: root + "/d", Access: AccessReadWrite}}
	_, err = Compile(Spec{Mode: ModeReadOnly, Primary: proj, Temp: []string{}, Protected: many(MaxProtected, sub), Additional: rw})
	require.NoError(t, err)
	// A patch over a count limit is refused before it is merged.
	assert.EqualError(t, Patch{Additional: make([]Root, MaxAdditional+1)}.CheckLimits(), "policy: additional: 257 entries, at most 256")
	assert.EqualError(t, Patch{Protected: many(100000, sub)}.CheckLimits(), "policy: protected: 100000 entries, at most 1024")
	assert.NoError(t, Patch{Protected: many(MaxProtected, sub)}.CheckLimits())
	// A patch of many entries merges in linear time, and Compile refuses it.
	big := Spec{Primary: proj}.Apply(Patch{Protected: many(100000, sub)})
	assert.Len(t, big.Protected, 100000)
}
