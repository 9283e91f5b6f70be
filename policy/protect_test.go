package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/identity"
)

func idOf(t *testing.T, p string) identity.FileID {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Lstat(p, &st))
	return identity.FileID{Dev: st.Dev, Ino: st.Ino}
}

// in names the name base(p) in its directory, by identity.
func in(t *testing.T, p string) Object {
	return Object{Dir: idOf(t, filepath.Dir(p)), Name: filepath.Base(p)}
}

var (
	denyHooks  = deny(syscall.EACCES, "protected:git:.git/hooks")
	denyConfig = deny(syscall.EACCES, "protected:git:.git/config")
)

// TestProtectedAlias: a hard link made on the host to a protected file is
// protected by (dev, ino), whichever name is used; other inodes are not.
func TestProtectedAlias(t *testing.T) {
	root := tree(t, "proj/.git/hooks/pre-commit", "proj/.git/config", "proj/f")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{}})
	// Made after Compile: the next decision sees them.
	require.NoError(t, os.Link(proj+"/.git/config", proj+"/alias"))
	require.NoError(t, os.Link(proj+"/.git/hooks/pre-commit", proj+"/hook-alias"))
	require.NoError(t, os.Link(proj+"/f", proj+"/f2"))

	for _, c := range []struct {
		op   Op
		path string
		want Decision
	}{
		{OpOpenWrite, "alias", denyConfig},
		{OpSetattr, "hook-alias", denyHooks}, // chmod 4777 through an alias
		{OpOpenWrite, ".git/config", denyConfig},
		{OpOpenWrite, "f2", allow("primary:read-write")},
		{OpOpenWrite, "f", allow("primary:read-write")},
	} {
		path := proj + "/" + c.path
		assert.Equal(t, c.want, p.DecideAt(c.op, path, Object{Self: idOf(t, path)}), "%s %s", c.op, c.path)
	}
	// Linking a protected inode to a new name is refused by identity too.
	assert.Equal(t, denyConfig, p.DecideLinkAt(proj+"/alias", proj+"/alias2",
		Object{Self: idOf(t, proj+"/alias")}, in(t, proj+"/alias2")))
	// Removing an alias name leaves the protected content alone: allowed.
	assert.Equal(t, allow("primary:read-write"), p.DecideAt(OpUnlink, proj+"/alias", in(t, proj+"/alias")))
}

// TestProtectedAliasOfEnclosingRepository: a root below a repository's
// top (a sub-session's, a session of a subdirectory) protects that
// repository's config and hooks by identity too: the git the user runs in
// the repository reads them, and a hard link to them inside the root was
// writable (allow "primary:read-write" before the fix).
func TestProtectedAliasOfEnclosingRepository(t *testing.T) {
	root := tree(t, "proj/.git/hooks/pre-commit", "proj/.git/config", "proj/d/f")
	proj := root + "/proj"
	d := proj + "/d"
	require.NoError(t, os.Link(proj+"/.git/config", d+"/cfg"))
	require.NoError(t, os.Link(proj+"/.git/hooks/pre-commit", d+"/hk"))
	assertRepoAliases(t, mustCompile(t, Spec{Primary: d, Temp: []string{}}), d, "f")
}

// assertRepoAliases asserts p's decisions in dir, a writable primary root
// holding cfg and hk, hard links to a protected repository's .git/config
// and a hook, and free, a file of its own: a write through either link is
// refused with the rule of what it reaches, one to free allowed.
func assertRepoAliases(t *testing.T, p *Policy, dir, free string) {
	t.Helper()
	for _, c := range []struct {
		op   Op
		name string
		want Decision
	}{
		{OpOpenWrite, "cfg", denyConfig},
		{OpSetattr, "hk", denyHooks},
		{OpOpenWrite, free, allow("primary:read-write")},
	} {
		path := dir + "/" + c.name
		assert.Equal(t, c.want, p.DecideAt(c.op, path, Object{Self: idOf(t, path)}), "%s %s", c.op, c.name)
	}
}

// TestProtectedOutside: places outside the roots (a sub-session's parent's
// protected places) are protected by identity: a hard link inside the root
// reaching one, or reaching a file below a protected directory, is refused
// under every name, and a write at a place's own path; other files are
// not; reads keep the outside's decision; a place whose directory is made
// after Compile is protected once made. A relative or unclean place is
// refused at Compile.
func TestProtectedOutside(t *testing.T) {
	root := tree(t, "proj/f", "proj/sec/key", "proj/d/free")
	proj := root + "/proj"
	d := proj + "/d"
	require.NoError(t, os.Link(proj+"/f", d+"/falias"))
	require.NoError(t, os.Link(proj+"/sec/key", d+"/keyalias"))
	p := mustCompile(t, Spec{Primary: d, Temp: []string{}, ProtectedOutside: []string{proj + "/f", proj + "/sec"}})
	for _, c := range []struct {
		op   Op
		path string
		want Decision
	}{
		{OpOpenWrite, d + "/falias", deny(syscall.EACCES, "protected:"+proj+"/f")},
		{OpSetattr, d + "/keyalias", deny(syscall.EACCES, "protected:"+proj+"/sec")},
		{OpOpenWrite, d + "/free", allow("primary:read-write")},
		{OpOpenWrite, proj + "/f", deny(syscall.EACCES, "protected:"+proj+"/f")},
		{OpRead, proj + "/f", allow("outside:read-only")},
	} {
		assert.Equal(t, c.want, p.DecideAt(c.op, c.path, Object{Self: idOf(t, c.path)}), "%s %s", c.op, c.path)
	}
	// A place whose directory is made after Compile: protected once made.
	p = mustCompile(t, Spec{Primary: d, Temp: []string{}, ProtectedOutside: []string{proj + "/build/key"}})
	require.NoError(t, os.MkdirAll(proj+"/build", 0o755))
	require.NoError(t, os.WriteFile(proj+"/build/key", nil, 0o644))
	require.NoError(t, os.Link(proj+"/build/key", d+"/kalias"))
	assert.Equal(t, deny(syscall.EACCES, "protected:"+proj+"/build/key"),
		p.DecideAt(OpOpenWrite, d+"/kalias", Object{Self: idOf(t, d+"/kalias")}), "kalias, build/ made after Compile")
	for _, bad := range []string{"f", proj + "/./f"} {
		_, err := Compile(Spec{Primary: d, ProtectedOutside: []string{bad}})
		assert.EqualError(t, err, fmt.Sprintf("policy: protected_outside[0] %q: must be an absolute, clean path", bad))
	}
}

// TestProtectedRepos: a directory in ProtectedRepos has its repository's
// config and hooks protected by identity, as a writable root's own: a
// hard link to them inside the root is refused; a relative entry is
// refused at Compile.
func TestProtectedRepos(t *testing.T) {
	root := tree(t, "proj/.git/hooks/pre-commit", "proj/.git/config", "other/free")
	proj, other := root+"/proj", root+"/other"
	require.NoError(t, os.Link(proj+"/.git/config", other+"/cfg"))
	require.NoError(t, os.Link(proj+"/.git/hooks/pre-commit", other+"/hk"))
	assertRepoAliases(t, mustCompile(t, Spec{Primary: other, Temp: []string{}, ProtectedRepos: []string{proj}}), other, "free")
	_, err := Compile(Spec{Primary: other, ProtectedRepos: []string{"proj"}})
	assert.EqualError(t, err, `policy: protected_repos[0] "proj": must be an absolute, clean path`)
}

// TestProtectionFollowsHostSwap: .git swapped on the host for a symlink to a
// decoy after Compile; the decoy's hooks are protected at the next
// decision, and the real hooks stay protected where they went.
func TestProtectionFollowsHostSwap(t *testing.T) {
	root := tree(t, "proj/.git/hooks/pre-commit", "proj/.git/config", "proj/decoy/hooks/", "proj/decoy/config")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{}})
	require.NoError(t, os.Rename(proj+"/.git", proj+"/.git.real"))
	require.NoError(t, os.Symlink("decoy", proj+"/.git"))

	x := proj + "/decoy/hooks/x"
	assert.Equal(t, denyHooks, p.DecideAt(OpCreate, x, in(t, x)))
	assert.Equal(t, denyConfig, p.DecideAt(OpOpenWrite, proj+"/decoy/config", Object{Self: idOf(t, proj+"/decoy/config")}))
	// The real hooks, renamed on the host: protected by identity.
	real := proj + "/.git.real/hooks/x"
	assert.Equal(t, denyHooks, p.DecideAt(OpCreate, real, in(t, real)))
	hook := proj + "/.git.real/hooks/pre-commit"
	assert.Equal(t, denyHooks, p.DecideAt(OpSetattr, hook, Object{Self: idOf(t, hook)}))
	// Moving the real hooks away or making a new one in its place is refused.
	assert.Equal(t, denyHooks, p.DecideAt(OpRename, proj+"/.git.real/hooks", in(t, proj+"/.git.real/hooks")))
	// Swapped back: both stay protected (monotone).
	require.NoError(t, os.Remove(proj+"/.git"))
	require.NoError(t, os.Rename(proj+"/.git.real", proj+"/.git"))
	assert.Equal(t, denyHooks, p.DecideAt(OpCreate, x, in(t, x)))
	assert.Equal(t, denyHooks, p.DecideAt(OpCreate, proj+"/.git/hooks/x", in(t, proj+"/.git/hooks/x")))
	assert.Equal(t, allow("primary:read-write"), p.DecideAt(OpCreate, proj+"/decoy/y", in(t, proj+"/decoy/y")))
}

// TestProtectionFollowsGitdirPointer: a gitdir: pointer written on the host
// after Compile protects the hooks and config of the gitdir it names.
func TestProtectionFollowsGitdirPointer(t *testing.T) {
	root := tree(t, "proj/", "other/hooks/", "other/config", "rw/")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{},
		Additional: []Root{{Path: root + "/rw", Access: AccessReadWrite}, {Path: root + "/other", Access: AccessReadWrite}}})
	x := root + "/other/hooks/x"
	assert.Equal(t, allow("additional:read-write"), p.DecideAt(OpCreate, x, in(t, x)))
	writeFile(t, proj+"/.git", "gitdir: ../other\n")
	assert.Equal(t, denyHooks, p.DecideAt(OpCreate, x, in(t, x)))
	assert.Equal(t, denyConfig, p.DecideAt(OpOpenWrite, root+"/other/config", Object{Self: idOf(t, root+"/other/config")}))
	assert.Equal(t, deny(syscall.EACCES, "protected:git:.git"), p.DecideAt(OpOpenWrite, proj+"/.git", Object{Self: idOf(t, proj+"/.git")}))
}

// TestObserveLink: a link on the way to a protected key, seen by the server
// before it presents it, protects what its text reaches even when the host
// swaps it back before the next decision.
func TestObserveLink(t *testing.T) {
	// A protected entry of the list (git's names follow the repository
	// rule, which needs no observation: git accepts no gitdir without
	// HEAD, and one with HEAD is protected wherever it lies).
	root := tree(t, "proj/cfg/hooks/", "proj/decoy/hooks/")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{}, Protected: []string{"cfg/hooks"}})
	p.ObserveLink(proj+"/cfg", "decoy") // never on disk
	x := proj + "/decoy/hooks/x"
	listed := deny(syscall.EACCES, "protected:cfg/hooks")
	assert.Equal(t, listed, p.DecideAt(OpCreate, x, in(t, x)))
	assert.Equal(t, listed, p.Decide(OpCreate, x))
	before := p.prot.cur.Load()
	p.ObserveLink(proj+"/src", "elsewhere") // not on the way: nothing changes
	assert.Same(t, before, p.prot.cur.Load())
}

// TestProtectionNoRecompute: decisions on an unchanged tree reuse the set.
func TestProtectionNoRecompute(t *testing.T) {
	root := tree(t, "proj/.git/hooks/", "proj/.git/config")
	proj := root + "/proj"
	p := mustCompile(t, Spec{Primary: proj, Temp: []string{}})
	before := p.prot.cur.Load()
	for i := 0; i < 10; i++ {
		f := proj + "/f"
		writeFile(t, f, "x") // churn in the root does not recompute
		assert.Equal(t, allow("primary:read-write"), p.DecideAt(OpCreate, f, in(t, f)))
	}
	assert.Same(t, before, p.prot.cur.Load())
	require.NoError(t, os.WriteFile(proj+"/.git/hooks/new", nil, 0o755))
	assert.Equal(t, allow("primary:read-write"), p.DecideAt(OpCreate, proj+"/g", in(t, proj+"/g")))
	assert.NotSame(t, before, p.prot.cur.Load())
}
