package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/identity"
)

// tree makes dirs (trailing "/"), files, and symlinks ("name -> target",
// target may use {root}) under a fresh canonical t.TempDir() and returns it.
func tree(t *testing.T, entries ...string) string {
	t.Helper()
	root, err := identity.Canonical(t.TempDir())
	require.NoError(t, err)
	for _, e := range entries {
		e = strings.ReplaceAll(e, "{root}", root)
		name, link, isLink := strings.Cut(e, " -> ")
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch {
		case isLink:
			require.NoError(t, os.Symlink(link, p))
		case strings.HasSuffix(name, "/"):
			require.NoError(t, os.MkdirAll(p, 0o755))
		default:
			require.NoError(t, os.WriteFile(p, []byte(name), 0o644))
		}
	}
	return root
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func mustCompile(t *testing.T, s Spec) *Policy {
	t.Helper()
	p, err := Compile(s)
	require.NoError(t, err)
	return p
}

// strategies returns p as compiled and a copy using the other lookup
// strategy (root scan vs ancestor index), so every table covers both.
func strategies(p *Policy) map[string]*Policy {
	q := *p
	q.useIndex = !p.useIndex
	if p.useIndex {
		return map[string]*Policy{"index": p, "scan": &q}
	}
	return map[string]*Policy{"scan": p, "index": &q}
}

func allow(rule string) Decision { return Decision{Allow: true, Rule: rule} }
func deny(e syscall.Errno, rule string) Decision {
	return Decision{Errno: e, Rule: rule}
}

type check struct {
	op   Op
	path string // relative to the tree root unless absolute
	want Decision
}

func runChecks(t *testing.T, p *Policy, root string, checks []check) {
	t.Helper()
	for name, p := range strategies(p) {
		for _, c := range checks {
			path := c.path
			if !filepath.IsAbs(path) {
				path = root + "/" + path // not cleaned: TestDecidePathShape
			}
			assert.Equal(t, c.want, p.Decide(c.op, path), "%s: %s %s", name, c.op, path)
		}
	}
}

var modes = []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeFullAccess}
var accesses = []Access{AccessNone, AccessReadOnly, AccessReadWrite}

// TestMatrix covers every cell of mode × access of an additional root, for
// the primary root, the additional root, the temp area and the outside, with
// a create and a read.
func TestMatrix(t *testing.T) {
	root := tree(t, "proj/", "add/", "tmp/", "out/")
	for _, mode := range modes {
		for _, acc := range accesses {
			t.Run(fmt.Sprintf("%s/%s", mode, acc), func(t *testing.T) {
				p := mustCompile(t, Spec{
					Mode:       mode,
					Primary:    filepath.Join(root, "proj"),
					Additional: []Root{{Path: filepath.Join(root, "add"), Access: acc}},
					Temp:       []string{filepath.Join(root, "tmp")},
				})
				rw := func(area string, w bool) (Decision, Decision) {
					if w {
						return allow(area + ":read-write"), allow(area + ":read-write")
					}
					return deny(syscall.EROFS, area+":read-only"), allow(area + ":read-only")
				}
				pc, pr := rw("primary", mode != ModeReadOnly)
				tc, tr := rw("temp", mode != ModeReadOnly)
				oc, or := rw("outside", mode == ModeFullAccess)
				ac, ar := rw("additional", acc == AccessReadWrite)
				if acc == AccessNone {
					ac, ar = deny(syscall.EACCES, "root:none"), deny(syscall.EACCES, "root:none")
				}
				runChecks(t, p, root, []check{
					{OpCreate, "proj/f", pc}, {OpRead, "proj/f", pr},
					{OpCreate, "proj", pc}, {OpRead, "proj", pr},
					{OpCreate, "add/f", ac}, {OpRead, "add/f", ar},
					{OpRead, "add", ar}, {OpMkdir, "add/d/e", ac},
					{OpCreate, "tmp/f", tc}, {OpRead, "tmp/f", tr},
					{OpCreate, "out/f", oc}, {OpRead, "out/f", or},
					{OpCreate, "projx", oc}, // a sibling sharing the prefix is outside
					{OpCreate, "/", oc}, {OpRead, "/", or},
				})
				wantWritable := mode != ModeReadOnly || acc == AccessReadWrite
				assert.Equal(t, wantWritable, p.Writable())
				assert.Equal(t, mode, p.Mode())
			})
		}
	}
}

// TestNoneRoot: a none root refuses every op, whatever the mode, before the
// device and protected rules.
func TestNoneRoot(t *testing.T) {
	root := tree(t, "proj/", "secret/.git/hooks/")
	for _, mode := range modes {
		p := mustCompile(t, Spec{Mode: mode, Primary: filepath.Join(root, "proj"), Temp: []string{},
			Additional: []Root{{Path: filepath.Join(root, "secret"), Access: AccessNone}}})
		none := deny(syscall.EACCES, "root:none")
		var checks []check
		for op := Op(0); op < numOps; op++ {
			checks = append(checks, check{op, "secret/x", none}, check{op, "secret", none})
		}
		checks = append(checks, check{OpRead, "secret/.git/hooks/pre-commit", none})
		runChecks(t, p, root, checks)
	}
}

func TestDevice(t *testing.T) {
	root := tree(t, "proj/", "ro/")
	for _, mode := range modes {
		p := mustCompile(t, Spec{Mode: mode, Primary: filepath.Join(root, "proj"), Temp: []string{},
			Additional: []Root{{Path: filepath.Join(root, "ro"), Access: AccessReadOnly}}})
		dev := deny(syscall.EPERM, "device")
		if mode == ModeFullAccess {
			// Devices and whiteouts are data there: the matrix and the
			// protected subpaths decide, as for any other create.
			runChecks(t, p, root, []check{
				{OpMknodDevice, "proj/null", allow("primary:read-write")},
				{OpMknodDevice, "ro/null", deny(syscall.EROFS, "additional:read-only")},
				{OpMknodDevice, "out/null", allow("outside:read-write")},
				{OpMknodDevice, "proj/.git/hooks/null", deny(syscall.EACCES, "protected:git:.git/hooks")},
				{OpMknodDevice, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
			})
			continue
		}
		runChecks(t, p, root, []check{
			{OpMknodDevice, "proj/null", dev},
			{OpMknodDevice, "ro/null", dev},
			{OpMknodDevice, "out/null", dev},
			{OpMknodDevice, "proj/.git/hooks/null", dev},
		})
	}
}

func TestProtected(t *testing.T) {
	acc := deny(syscall.EACCES, "protected:git:.git/hooks")
	cfg := deny(syscall.EACCES, "protected:git:.git/config")
	rw := allow("primary:read-write")

	t.Run("git directory", func(t *testing.T) {
		root := tree(t, "proj/.git/hooks/", "proj/.git/config", "proj/.git/HEAD", "proj/.git/objects/")
		p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}})
		runChecks(t, p, root, []check{
			{OpCreate, "proj/.git/hooks/pre-commit", acc},
			{OpOpenWrite, "proj/.git/hooks/pre-commit", acc},
			{OpSetattr, "proj/.git/hooks", acc},
			{OpRmdir, "proj/.git/hooks", acc},
			{OpRename, "proj/.git/hooks", acc},
			{OpOpenWrite, "proj/.git/config", cfg},
			{OpUnlink, "proj/.git/config", cfg},
			{OpSetxattr, "proj/.git/config", cfg},
			{OpSymlink, "proj/.git/config", cfg},
			{OpLink, "proj/.git/config", cfg},
			{OpRead, "proj/.git/hooks/pre-commit", rw},
			{OpRead, "proj/.git/config", rw},
			{OpOpenWrite, "proj/.git/HEAD", rw},
			{OpCreate, "proj/.git/objects/ab", rw},
			{OpRename, "proj/.git/objects", rw},
			{OpCreate, "proj/.git/hooksx", rw},      // a name sharing the prefix
			{OpCreate, "proj/.git/config.lock", rw}, // ditto
			// Moving or removing .git itself protects nothing away: a git
			// directory moved elsewhere keeps its HEAD and so its rule,
			// and an empty one can be removed as on ext4.
			{OpRename, "proj/.git", rw},
			{OpRmdir, "proj/.git", rw},
			{OpMkdir, "proj/.git", rw}, // creating an ancestor is fine
			{OpSetattr, "proj/.git", rw},
			// The name .git is a directory or nothing.
			{OpSymlink, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
			{OpCreate, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
		})
		for name, p := range strategies(p) {
			assert.Equal(t, rw, p.DecideRename(filepath.Join(root, "proj/.git"), filepath.Join(root, "proj/old-git")), name)
			// A protected end is a write to a protected name: EACCES, whatever
			// the other end (not EXDEV, which would send mv into a copy).
			assert.Equal(t, deny(syscall.EACCES, "protected:git:.git/hooks"), p.DecideRename(filepath.Join(root, "proj/x"), filepath.Join(root, "proj/.git/hooks/pre-commit")), name)
			assert.Equal(t, deny(syscall.EACCES, "protected:git:.git/config"), p.DecideRename(filepath.Join(root, "proj/.git/config"), filepath.Join(root, "proj/cfg")), name)
			assert.Equal(t, acc, p.DecideRename(filepath.Join(root, "proj/.git/hooks/a"), filepath.Join(root, "proj/.git/hooks/b")), name)
			assert.Equal(t, acc, p.DecideRename(filepath.Join(root, "proj/.git/hooks/a"), filepath.Join(root, "proj/.git/config")), name)
			assert.Equal(t, rw, p.DecideRename(filepath.Join(root, "proj/.git/config.lock"), filepath.Join(root, "proj/.git/HEAD")), name)
		}
	})

	t.Run("names that do not exist yet", func(t *testing.T) {
		root := tree(t, "proj/")
		p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}})
		runChecks(t, p, root, []check{
			{OpMkdir, "proj/.git", rw},
			{OpMkdir, "proj/.git/hooks", acc},
			{OpCreate, "proj/.git/hooks/post-checkout", acc},
			{OpCreate, "proj/.git/config", cfg},
			{OpCreate, "proj/.git/HEAD", rw},
		})
		// The decisions do not change once the names exist.
		require.NoError(t, os.MkdirAll(filepath.Join(root, "proj/.git/hooks"), 0o755))
		p2 := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}})
		for _, op := range []Op{OpMkdir, OpCreate, OpRename} {
			path := filepath.Join(root, "proj/.git/hooks")
			assert.Equal(t, p.Decide(op, path), p2.Decide(op, path))
		}
	})

	t.Run("symlinked .git", func(t *testing.T) {
		root := tree(t, "proj/", "store/gitdir/hooks/", "store/gitdir/config", "store/gitdir/HEAD",
			"proj/.git -> ../store/gitdir", "alias -> {root}/store")
		for _, mode := range []Mode{ModeFullAccess, ModeWorkspaceWrite} {
			s := Spec{Mode: mode, Primary: filepath.Join(root, "proj"), Temp: []string{}}
			other := allow("outside:read-write")
			if mode == ModeWorkspaceWrite {
				// The store is a read-write additional root: writable but
				// for the protected names.
				s.Additional = []Root{{Path: filepath.Join(root, "store"), Access: AccessReadWrite}}
				other = allow("additional:read-write")
			}
			p := mustCompile(t, s)
			aliasKey, err := identity.TargetKey(filepath.Join(root, "alias/gitdir/hooks/pre-push"))
			require.NoError(t, err)
			runChecks(t, p, root, []check{
				// The physical target is protected ...
				{OpCreate, "store/gitdir/hooks/pre-commit", acc},
				{OpOpenWrite, "store/gitdir/config", cfg},
				// ... as is a path reaching it through another spelling.
				{OpCreate, aliasKey, acc},
				{OpOpenWrite, "store/gitdir/HEAD", other},
				// Moving the gitdir or the link protects nothing away (the
				// gitdir keeps its HEAD; a new .git can only be a
				// directory, protected from birth).
				{OpRename, "store/gitdir", other},
				{OpUnlink, "proj/.git", rw},
				{OpSymlink, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
				{OpCreate, "proj/.git/hooks/pre-commit", acc},
			})
		}
	})

	t.Run("gitdir pointer file", func(t *testing.T) {
		for _, form := range []string{"relative", "absolute"} {
			t.Run(form, func(t *testing.T) {
				root := tree(t, "proj/", "real/hooks/", "real/config", "real/HEAD")
				target := "../real"
				if form == "absolute" {
					target = filepath.Join(root, "real")
				}
				writeFile(t, filepath.Join(root, "proj/.git"), "gitdir: "+target+"\n")
				p := mustCompile(t, Spec{Mode: ModeFullAccess, Primary: filepath.Join(root, "proj"), Temp: []string{}})
				runChecks(t, p, root, []check{
					{OpCreate, "real/hooks/pre-commit", acc},
					{OpOpenWrite, "real/config", cfg},
					{OpRename, "real", allow("outside:read-write")},
					{OpOpenWrite, "real/HEAD", allow("outside:read-write")},
					{OpCreate, "proj/src.go", rw},
					// The pointer itself: rewriting it could lead git to a
					// directory outside the rule (the temp area); removing
					// it leads git nowhere.
					{OpOpenWrite, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
					{OpSetattr, "proj/.git", deny(syscall.EACCES, "protected:git:.git")},
					{OpUnlink, "proj/.git", rw},
				})
			})
		}
	})

	t.Run("worktree commondir", func(t *testing.T) {
		root := tree(t, "main/.git/hooks/", "main/.git/config", "main/.git/worktrees/wt/HEAD", "wt/")
		writeFile(t, filepath.Join(root, "main/.git/worktrees/wt/commondir"), "../..\n")
		writeFile(t, filepath.Join(root, "wt/.git"), "gitdir: "+filepath.Join(root, "main/.git/worktrees/wt")+"\n")
		p := mustCompile(t, Spec{Mode: ModeFullAccess, Primary: filepath.Join(root, "wt"), Temp: []string{}})
		runChecks(t, p, root, []check{
			{OpCreate, "main/.git/worktrees/wt/hooks/x", acc},
			{OpCreate, "main/.git/hooks/pre-commit", acc},
			{OpOpenWrite, "main/.git/config", cfg},
			{OpOpenWrite, "main/.git/worktrees/wt/HEAD", allow("outside:read-write")},
		})
	})

	t.Run("roots and modes", func(t *testing.T) {
		root := tree(t, "proj/.git/hooks/", "rw/.git/hooks/", "ro/.git/hooks/")
		s := Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}, Additional: []Root{
			{Path: filepath.Join(root, "rw"), Access: AccessReadWrite},
			{Path: filepath.Join(root, "ro"), Access: AccessReadOnly},
		}}
		runChecks(t, mustCompile(t, s), root, []check{
			{OpCreate, "proj/.git/hooks/x", acc},
			{OpCreate, "rw/.git/hooks/x", acc},
			{OpCreate, "ro/.git/hooks/x", deny(syscall.EROFS, "additional:read-only")},
		})
		// In read-only mode the primary is not writable, so the plain
		// read-only rule answers; a read-write root stays protected.
		s.Mode = ModeReadOnly
		runChecks(t, mustCompile(t, s), root, []check{
			{OpCreate, "proj/.git/hooks/x", deny(syscall.EROFS, "primary:read-only")},
			{OpCreate, "rw/.git/hooks/x", acc},
			{OpCreate, "rw/f", allow("additional:read-write")},
		})
	})

	t.Run("custom list", func(t *testing.T) {
		root := tree(t, "proj/.git/hooks/", "proj/secrets/")
		p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}, Protected: []string{"secrets", "build/out"}})
		runChecks(t, p, root, []check{
			{OpCreate, "proj/secrets/key", deny(syscall.EACCES, "protected:secrets")},
			{OpCreate, "proj/build/out/x", deny(syscall.EACCES, "protected:build/out")},
			{OpCreate, "proj/build/x", rw},
			// The repository rule applies whatever the list says.
			{OpCreate, "proj/.git/hooks/x", acc},
		})
		assert.Equal(t, []string{"secrets", "build/out"}, p.Spec().Protected)
		nested := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}, Protected: []string{".git", ".git/hooks"}})
		runChecks(t, nested, root, []check{
			{OpCreate, "proj/.git/hooks/x", deny(syscall.EACCES, "protected:.git/hooks")}, // the innermost entry names the rule
			{OpCreate, "proj/.git/HEAD", deny(syscall.EACCES, "protected:.git")},
			{OpRename, "proj", deny(syscall.EACCES, "protected:.git")}, // the first entry
		})
		none := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}, Protected: []string{}})
		runChecks(t, none, root, []check{{OpCreate, "proj/.git/hooks/x", acc}, {OpCreate, "proj/secrets/key", rw}})
	})
}

// TestMostSpecific: temp entries may contain explicit roots; the most
// specific root decides, and on a tie none > write > read.
func TestMostSpecific(t *testing.T) {
	root := tree(t, "proj/", "ro/", "rw/", "same/", "other/")
	// The default temp area (/tmp) contains the whole test tree.
	p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Additional: []Root{
		{Path: filepath.Join(root, "ro"), Access: AccessReadOnly},
	}})
	assert.Equal(t, DefaultTemp(), p.Spec().Temp)
	require.True(t, identity.Within(root, DefaultTemp()[0]), "the test tree must be under the temp area")
	runChecks(t, p, root, []check{
		{OpCreate, "proj/f", allow("primary:read-write")},
		{OpCreate, "ro/f", deny(syscall.EROFS, "additional:read-only")},
		{OpCreate, "other/f", allow("temp:read-write")},
		{OpCreate, DefaultTemp()[0] + "/f", allow("temp:read-write")},
	})

	// Read-only mode: temp is read-only, a read-write root under it is not.
	p = mustCompile(t, Spec{Mode: ModeReadOnly, Primary: filepath.Join(root, "proj"), Additional: []Root{
		{Path: filepath.Join(root, "rw"), Access: AccessReadWrite},
	}})
	runChecks(t, p, root, []check{
		{OpCreate, "proj/f", deny(syscall.EROFS, "primary:read-only")},
		{OpCreate, "rw/f", allow("additional:read-write")},
		{OpCreate, "other/f", deny(syscall.EROFS, "temp:read-only")},
	})

	// Ties: a temp entry equal to an explicit root.
	for _, c := range []struct {
		acc  Access
		want Decision
	}{
		{AccessReadOnly, allow("temp:read-write")}, // write beats read
		{AccessNone, deny(syscall.EACCES, "root:none")},
		{AccessReadWrite, allow("additional:read-write")},
	} {
		p = mustCompile(t, Spec{Primary: filepath.Join(root, "proj"),
			Additional: []Root{{Path: filepath.Join(root, "same"), Access: c.acc}},
			Temp:       []string{filepath.Join(root, "same")}})
		runChecks(t, p, root, []check{{OpCreate, "same/f", c.want}})
	}
	// A temp entry inside an explicit root is the more specific one.
	p = mustCompile(t, Spec{Primary: filepath.Join(root, "proj"),
		Additional: []Root{{Path: filepath.Join(root, "ro"), Access: AccessReadOnly}},
		Temp:       []string{filepath.Join(root, "ro")}})
	runChecks(t, p, root, []check{{OpCreate, "ro/f", allow("temp:read-write")}})
}

func TestDecidePathShape(t *testing.T) {
	root := tree(t, "proj/.git/hooks/")
	p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}})
	runChecks(t, p, root, []check{
		{OpCreate, "/", deny(syscall.EROFS, "outside:read-only")},
		{OpCreate, "proj/", allow("primary:read-write")},
		{OpCreate, "proj/.git/hooks/", deny(syscall.EACCES, "protected:git:.git/hooks")},
		{OpCreate, "proj/.git/x/../hooks/pre-commit", deny(syscall.EACCES, "path:not-canonical")},
		{OpCreate, "proj/./f", deny(syscall.EACCES, "path:not-canonical")},
		{OpCreate, "proj//f", deny(syscall.EACCES, "path:not-canonical")},
		{OpCreate, "proj/.git/hooks//", deny(syscall.EACCES, "path:not-canonical")},
		{OpCreate, "proj/...", allow("primary:read-write")},
		{OpCreate, "proj/.x", allow("primary:read-write")},
		{OpCreate, "proj/.", deny(syscall.EACCES, "path:not-canonical")},
		{OpRead, "proj/..", deny(syscall.EACCES, "path:not-canonical")},
		{OpCreate, "proj/..f", allow("primary:read-write")},
	})
	for name, p := range strategies(p) {
		assert.Equal(t, deny(syscall.EACCES, "path:not-absolute"), p.Decide(OpRead, "proj/f"), name)
		assert.Equal(t, deny(syscall.EACCES, "path:not-absolute"), p.Decide(OpRead, ""), name)
	}
}

func TestDecideRenameAndLink(t *testing.T) {
	root := tree(t, "proj/.git/hooks/", "proj/.git/config", "ro/", "rw/", "none/", "tmp/", "out/")
	spec := func(m Mode) Spec {
		return Spec{Mode: m, Primary: filepath.Join(root, "proj"), Temp: []string{filepath.Join(root, "tmp")},
			Additional: []Root{
				{Path: filepath.Join(root, "ro"), Access: AccessReadOnly},
				{Path: filepath.Join(root, "rw"), Access: AccessReadWrite},
				{Path: filepath.Join(root, "none"), Access: AccessNone},
			}}
	}
	xren := deny(syscall.EXDEV, "rename:cross-root")
	xlink := deny(syscall.EXDEV, "link:cross-root")
	cases := []struct {
		mode         Mode
		src, dst     string
		rename, link Decision
	}{
		{ModeWorkspaceWrite, "proj/a", "proj/b", allow("primary:read-write"), allow("primary:read-write")},
		{ModeWorkspaceWrite, "proj/a", "out/b", xren, xlink},
		{ModeWorkspaceWrite, "out/a", "proj/b", xren, xlink},
		{ModeWorkspaceWrite, "ro/a", "proj/b", xren, xlink},
		{ModeWorkspaceWrite, "proj/a", "ro/b", xren, xlink},
		{ModeWorkspaceWrite, "proj/a", "tmp/b", xren, xlink}, // both writable, different roots
		{ModeWorkspaceWrite, "proj/a", "rw/b", xren, xlink},  // ditto
		{ModeWorkspaceWrite, "tmp/a", "tmp/b", allow("temp:read-write"), allow("temp:read-write")},
		{ModeWorkspaceWrite, "out/a", "out/b", deny(syscall.EROFS, "outside:read-only"), deny(syscall.EROFS, "outside:read-only")},
		{ModeWorkspaceWrite, "ro/a", "out/b", deny(syscall.EROFS, "additional:read-only"), deny(syscall.EROFS, "additional:read-only")},
		{ModeWorkspaceWrite, "proj/a", "none/b", deny(syscall.EACCES, "root:none"), deny(syscall.EACCES, "root:none")},
		{ModeWorkspaceWrite, "none/a", "proj/b", deny(syscall.EACCES, "root:none"), deny(syscall.EACCES, "root:none")},
		// Protected: a protected end is EACCES whatever the other end.
		{ModeWorkspaceWrite, "proj/a", "proj/.git/hooks/pre-commit", deny(syscall.EACCES, "protected:git:.git/hooks"), deny(syscall.EACCES, "protected:git:.git/hooks")},
		{ModeWorkspaceWrite, "proj/.git/config", "proj/cfg", deny(syscall.EACCES, "protected:git:.git/config"), deny(syscall.EACCES, "protected:git:.git/config")},
		{ModeWorkspaceWrite, "out/a", "proj/.git/config", deny(syscall.EACCES, "protected:git:.git/config"), deny(syscall.EACCES, "protected:git:.git/config")},
		{ModeWorkspaceWrite, "proj/.git/hooks/a", "proj/.git/hooks/b", deny(syscall.EACCES, "protected:git:.git/hooks"), deny(syscall.EACCES, "protected:git:.git/hooks")},
		{ModeWorkspaceWrite, "proj/.git/config", "proj/.git/hooks/b", deny(syscall.EACCES, "protected:git:.git/config"), deny(syscall.EACCES, "protected:git:.git/config")},
		// Moving a git directory away protects nothing away (it keeps its
		// HEAD); a non-directory cannot be made at .git.
		{ModeWorkspaceWrite, "proj/.git", "proj/git-old", allow("primary:read-write"), allow("primary:read-write")}, // (a directory cannot be hard-linked anyway)
		{ModeWorkspaceWrite, "tmp/a", "proj/.git", xren, xlink},                                                     // (.git exists: EEXIST from the kernel)
		{ModeFullAccess, "out/a", "out/b", allow("outside:read-write"), allow("outside:read-write")},
		{ModeFullAccess, "out/a", "proj/b", xren, xlink},
		{ModeReadOnly, "rw/a", "proj/b", xren, xlink},
		{ModeReadOnly, "proj/a", "proj/b", deny(syscall.EROFS, "primary:read-only"), deny(syscall.EROFS, "primary:read-only")},
		{ModeReadOnly, "rw/a", "rw/b", allow("additional:read-write"), allow("additional:read-write")},
	}
	for _, mode := range modes {
		p := mustCompile(t, spec(mode))
		for name, p := range strategies(p) {
			for _, c := range cases {
				if c.mode != mode {
					continue
				}
				src, dst := filepath.Join(root, c.src), filepath.Join(root, c.dst)
				assert.Equal(t, c.rename, p.DecideRename(src, dst), "%s %s: rename %s %s", name, mode, c.src, c.dst)
				assert.Equal(t, c.link, p.DecideLink(src, dst), "%s %s: link %s %s", name, mode, c.src, c.dst)
			}
		}
	}
	// Renaming the git directory away, or a non-directory onto .git.
	p := mustCompile(t, spec(ModeWorkspaceWrite))
	assert.Equal(t, allow("primary:read-write"),
		p.DecideRename(filepath.Join(root, "proj/.git"), filepath.Join(root, "proj/git2")))
	assert.Equal(t, deny(syscall.EACCES, "protected:git:.git"),
		p.DecideRename(filepath.Join(root, "proj/x"), filepath.Join(root, "proj/.git")))
}

func TestCompileErrors(t *testing.T) {
	root := tree(t, "proj/", "proj/sub/", "other/", "file", "plink -> proj", "twin -> other")
	proj := filepath.Join(root, "proj")
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"no primary", Spec{}, `policy: primary: required`},
		{"relative primary", Spec{Primary: "rel/x"}, `policy: primary "rel/x": must be absolute`},
		{"missing primary", Spec{Primary: root + "/nope"}, `policy: primary "` + root + `/nope": must exist`},
		{"file primary", Spec{Primary: root + "/file"}, `policy: primary "` + root + `/file": must be a directory`},
		{"unknown mode", Spec{Mode: "yolo", Primary: proj}, `policy: mode "yolo": unknown mode (want read-only, workspace-write or full-access)`},
		{"unknown access", Spec{Primary: proj, Additional: []Root{{Path: root + "/other", Access: "rw"}}},
			`policy: additional[0].access "rw": unknown access (want none, read-only or read-write)`},
		{"empty access", Spec{Primary: proj, Additional: []Root{{Path: root + "/other"}}},
			`policy: additional[0].access "": unknown access`},
		{"relative additional", Spec{Primary: proj, Additional: []Root{
			{Path: root + "/other", Access: AccessReadOnly}, {Path: "rel/x", Access: AccessReadOnly}}},
			`policy: additional[1].path "rel/x": must be absolute`},
		{"missing additional", Spec{Primary: proj, Additional: []Root{{Path: root + "/gone", Access: AccessReadOnly}}},
			`policy: additional[0].path "` + root + `/gone": must exist`},
		{"empty additional", Spec{Primary: proj, Additional: []Root{{Access: AccessReadOnly}}},
			`policy: additional[0].path: required`},
		{"additional inside primary", Spec{Primary: proj, Additional: []Root{{Path: proj + "/sub", Access: AccessReadOnly}}},
			`policy: additional[0].path "` + proj + `/sub" is inside primary "` + proj + `": explicit roots must not overlap`},
		{"additional contains primary", Spec{Primary: proj + "/sub", Additional: []Root{{Path: root, Access: AccessReadWrite}}},
			`policy: additional[0].path "` + root + `" contains primary "` + proj + `/sub": explicit roots must not overlap`},
		{"additional equals primary via a link", Spec{Primary: proj, Additional: []Root{{Path: root + "/plink", Access: AccessNone}}},
			`policy: additional[0].path "` + root + `/plink" (canonical "` + proj + `") is the same directory as primary "` + proj + `"`},
		{"two additional equal", Spec{Primary: proj, Additional: []Root{
			{Path: root + "/other", Access: AccessReadOnly}, {Path: root + "/twin", Access: AccessReadWrite}}},
			`policy: additional[1].path "` + root + `/twin" (canonical "` + root + `/other") is the same directory as additional[0].path "` + root + `/other"`},
		{"relative temp", Spec{Primary: proj, Temp: []string{"tmp"}}, `policy: temp[0] "tmp": must be absolute`},
		{"root temp", Spec{Primary: proj, Temp: []string{"/"}}, `policy: temp[0] "/": must not be the file system root / (a temp area there makes every path writable)`},
		{"root temp unclean", Spec{Primary: proj, Temp: []string{os.TempDir(), "//."}}, `policy: temp[1] "//.": must not be the file system root /`},
		{"protected parent", Spec{Primary: proj, Protected: []string{".git/hooks", "../x"}}, `policy: protected[1] "../x": must not contain ".."`},
		{"protected absolute", Spec{Primary: proj, Protected: []string{"/etc"}}, `policy: protected[0] "/etc": must be relative`},
		{"protected unclean", Spec{Primary: proj, Protected: []string{"a/./b"}}, `policy: protected[0] "a/./b": must be clean ("a/b")`},
		{"protected trailing slash", Spec{Primary: proj, Protected: []string{"a/"}}, `policy: protected[0] "a/": must be clean ("a")`},
		{"protected dot", Spec{Primary: proj, Protected: []string{"."}}, `policy: protected[0] ".": must be clean`},
		{"protected empty", Spec{Primary: proj, Protected: []string{""}}, `policy: protected[0] "": must not be empty`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(c.spec)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
			assert.NotContains(t, err.Error(), "policy.", "Go type names in %q", err)
			assert.NotContains(t, err.Error(), "!!", "YAML tags in %q", err)
			assert.True(t, strings.HasPrefix(err.Error(), "policy: "), err.Error())
		})
	}
}

func TestSpec(t *testing.T) {
	root := tree(t, "real/", "other/", "tmp/", "link -> real", "tlink -> tmp")
	p := mustCompile(t, Spec{Primary: root + "/link",
		Additional: []Root{{Path: root + "/other/", Access: AccessReadOnly}},
		Temp:       []string{root + "/tlink", root + "/tmp", root + "/missing"}})
	s := p.Spec()
	assert.Equal(t, Spec{
		Mode:       ModeWorkspaceWrite,
		Primary:    root + "/real",
		Additional: []Root{{Path: root + "/other", Access: AccessReadOnly}},
		Temp:       []string{root + "/tmp"},
		Protected:  DefaultProtected,
	}, s)
	// The result is a copy.
	s.Additional[0].Access = AccessReadWrite
	s.Protected = append(s.Protected, "x")
	s.Temp[0] = "/"
	assert.Equal(t, AccessReadOnly, p.Spec().Additional[0].Access)
	assert.Equal(t, DefaultProtected, p.Spec().Protected)
	assert.Equal(t, []string{root + "/tmp"}, p.Spec().Temp)
	// git's names are the repository rule's, not the list's.
	assert.Equal(t, []string{}, DefaultProtected)
	assert.Equal(t, []string{"config", "config.worktree", "commondir", "hooks"}, GitNames)

	// Defaults.
	d := mustCompile(t, Spec{Primary: root + "/real"}).Spec()
	assert.Equal(t, DefaultTemp(), d.Temp)
	assert.Equal(t, DefaultProtected, d.Protected)
	canonTmp, err := identity.Canonical(os.TempDir())
	require.NoError(t, err)
	assert.Equal(t, []string{canonTmp}, DefaultTemp())
}

func TestParseNames(t *testing.T) {
	for _, m := range modes {
		got, err := ParseMode(string(m))
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	m, err := ParseMode("")
	require.NoError(t, err)
	assert.Equal(t, ModeWorkspaceWrite, m)
	_, err = ParseMode("Read-Only")
	assert.EqualError(t, err, `policy: mode "Read-Only": unknown mode (want read-only, workspace-write or full-access)`)
	for _, a := range accesses {
		got, err := ParseAccess(string(a))
		require.NoError(t, err)
		assert.Equal(t, a, got)
	}
	_, err = ParseAccess("")
	assert.EqualError(t, err, `policy: access "": unknown access (want none, read-only or read-write)`)
	for _, n := range Ops() {
		op, ok := ParseOp(n)
		require.True(t, ok)
		assert.Equal(t, n, op.String())
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	want := Spec{Mode: ModeReadOnly, Primary: "/w/proj",
		Additional: []Root{{Path: "/w/lib", Access: AccessReadWrite}},
		Temp:       []string{"/tmp"}, Protected: []string{".git/hooks"}}
	files := map[string]string{
		"p.json": `{"mode": "read-only", "primary": "/w/proj",
			"additional": [{"path": "/w/lib", "access": "read-write"}],
			"temp": ["/tmp"], "protected": [".git/hooks"]}`,
		"p.yaml": "mode: read-only\nprimary: /w/proj\nadditional:\n  - path: /w/lib\n    access: read-write\ntemp: [/tmp]\nprotected: [.git/hooks]\n",
		"p.yml":  "mode: read-only\nprimary: /w/proj\nadditional: [{path: /w/lib, access: read-write}]\ntemp: [/tmp]\nprotected: [.git/hooks]\n",
		"p-json": `  {"mode": "read-only", "primary": "/w/proj", "additional": [{"path": "/w/lib", "access": "read-write"}], "temp": ["/tmp"], "protected": [".git/hooks"]}`,
		"p-yaml": "mode: read-only\nprimary: /w/proj\nadditional: [{path: /w/lib, access: read-write}]\ntemp: [/tmp]\nprotected: [.git/hooks]\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		got, err := LoadFile(p)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}

	bad := []struct{ name, content, want string }{
		{"u.json", `{"primary": "/w", "moed": "read-only"}`, `json: line 1: unknown field "moed"`},
		{"u2.json", "{\"primary\": \"/w\",\n \"additional\": [{\"path\": \"/x\", \"acess\": \"none\"}]}", `json: line 2: unknown field "acess" in additional[0]`},
		{"d.yaml", "mode: read-only\nmode: workspace-write\n", `yaml: line 2: mapping key "mode" already defined at line 1`},
		{"u.yaml", "primary: /w\nmoed: read-only\n", `yaml: line 2: unknown field "moed"`},
		{"u2.yaml", "primary: /w\nadditional:\n  - path: /x\n    acess: none\n", `yaml: line 4: unknown field "acess" in additional[0]`},
		{"u3.yaml", "primary: /w\nmoed: 1\ncolour: 2\n", `yaml: line 2: unknown field "moed"; line 3: unknown field "colour"`},
		{"k1.yaml", "primary: [a]\n", `yaml: line 1: primary: want a string, got a list`},
		{"k2.yaml", "primary: /w\ntemp: /tmp\n", `yaml: line 2: temp: want a list of strings, got a string`},
		{"k3.yaml", "primary: /w\nadditional: {path: /x}\n", `yaml: line 2: additional: want a list of roots, got a mapping`},
		{"k4.yaml", "primary: /w\nadditional:\n  - 3\n", `yaml: line 3: additional[0]: want a root (a mapping of path and access), got a number`},
		{"k5.yaml", "primary: /w\nadditional:\n  - path: /x\n    access: [rw]\n", `yaml: line 4: additional[0].access: want a string, got a list`},
		{"k6.yaml", "- a\n- b\n", `yaml: line 1: the policy: want a policy (a mapping of mode, primary, additional, temp, protected), got a list`},
		{"k7.yaml", "protected: [a, [b]]\n", `yaml: line 1: protected[1]: want a string, got a list`},
		{"n.yaml", "~\n", `yaml: empty policy`},
		{"s2.json", `{"temp": "x"}`, `json: temp: want a list of strings, got a string`},
		{"s3.json", `{"additional": [{"path": 1}]}`, `json: additional.path: want a string, got a number`},
		{"s4.json", `[1]`, `json: the policy: want a policy (a mapping of mode, primary, additional, temp, protected), got a list`},
		{"e.json", "  \n", `json: empty policy`},
		{"e.yaml", "", `yaml: empty policy`},
		{"t.json", `{"primary": "/w"} {"primary": "/x"}`, `json: trailing data`},
		{"t.yaml", "primary: /w\n---\nprimary: /x\n", `yaml: more than one document`},
		{"s.json", `{"primary": 3}`, `json: primary: want a string, got a number`},
	}
	for _, b := range bad {
		p := filepath.Join(dir, b.name)
		writeFile(t, p, b.content)
		_, err := LoadFile(p)
		require.Error(t, err, b.name)
		assert.Contains(t, err.Error(), "policy: "+p+": "+b.want, b.name)
		assert.NotContains(t, err.Error(), "\n")
		assert.NotContains(t, err.Error(), "policy.", "Go type names in %q", err)
		assert.NotContains(t, err.Error(), "!!", "YAML tags in %q", err)
	}
	_, err := LoadFile(filepath.Join(dir, "missing.json"))
	require.Error(t, err)
	assert.Equal(t, "policy: "+dir+"/missing.json: no such file or directory", err.Error())
}

// TestLoadAndCompile reads a fixture-style file end to end.
func TestLoadAndCompile(t *testing.T) {
	root := tree(t, "proj/", "lib/")
	p := filepath.Join(root, "policy.yaml")
	writeFile(t, p, fmt.Sprintf("mode: read-only\nprimary: %s/proj\nadditional:\n  - {path: %s/lib, access: read-write}\n", root, root))
	s, err := LoadFile(p)
	require.NoError(t, err)
	pol := mustCompile(t, s)
	assert.True(t, pol.Writable())
	assert.Equal(t, deny(syscall.EROFS, "primary:read-only"), pol.Decide(OpWrite, root+"/proj/f"))
	assert.Equal(t, allow("additional:read-write"), pol.Decide(OpWrite, root+"/lib/f"))
}

// TestDecideNoAlloc: reads, and writes refused by the area, allocate
// nothing; a write a writable root allows is also asked of the repository
// rule, which makes system calls (git.go).
func TestDecideNoAlloc(t *testing.T) {
	root := tree(t, "proj/.git/hooks/", "ro/")
	p := mustCompile(t, Spec{Primary: root + "/proj", Additional: []Root{{Path: root + "/ro", Access: AccessReadOnly}}})
	paths := []string{root + "/proj/a/b.go", root + "/ro/x", "/etc/passwd", root + "/proj/.git/hooks/x"}
	dst := root + "/ro/z"
	for name, p := range strategies(p) {
		for _, path := range paths {
			n := testing.AllocsPerRun(100, func() {
				_ = p.Decide(OpRead, path)
			})
			assert.Zero(t, n, "%s %s", name, path)
		}
		for _, path := range paths[1:3] {
			n := testing.AllocsPerRun(100, func() {
				_ = p.Decide(OpCreate, path)
				_ = p.Decide(OpRename, path)
				_ = p.DecideRename(dst, path)
			})
			assert.Zero(t, n, "%s %s", name, path)
		}
	}
}

func TestConcurrentDecide(t *testing.T) {
	root := tree(t, "proj/.git/hooks/")
	p := mustCompile(t, Spec{Primary: root + "/proj"})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				assert.True(t, p.Decide(OpCreate, root+"/proj/f").Allow)
				assert.False(t, p.Decide(OpCreate, root+"/proj/.git/hooks/x").Allow)
			}
		}()
	}
	wg.Wait()
}

// benchPolicy compiles a policy with n explicit roots (the primary and n-1
// additional roots of mixed access) under a fresh tree.
func benchPolicy(b *testing.B, n int) (*Policy, []string) {
	root, err := identity.Canonical(b.TempDir())
	require.NoError(b, err)
	s := Spec{Primary: filepath.Join(root, "r000"), Temp: nil}
	for i := 0; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("r%03d", i))
		require.NoError(b, os.MkdirAll(filepath.Join(d, ".git/hooks"), 0o755))
		if i > 0 {
			s.Additional = append(s.Additional, Root{Path: d, Access: accesses[i%3]})
		}
	}
	p, err := Compile(s)
	require.NoError(b, err)
	last := filepath.Join(root, fmt.Sprintf("r%03d", n-1))
	return p, []string{
		filepath.Join(root, "r000/src/pkg/module/file.go"), // primary, allowed
		filepath.Join(last, "src/pkg/module/file.go"),      // the last root
		filepath.Join(root, "r000/.git/hooks/pre-commit"),  // protected
		"/usr/share/doc/pkg/README",                        // outside
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			p, paths := benchPolicy(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = p.Decide(OpCreate, paths[i&3])
				i++
			}
		})
	}
}

// TestProtectedAncestorCreation: with no .git at Compile time, the name .git
// may become a directory (git init) but not a symlink, a gitdir-pointer file,
// a hard link or a special file, any of which would lead around the
// protection computed at Compile time.
func TestProtectedAncestorCreation(t *testing.T) {
	root := tree(t, "proj/", "proj/rg/hooks/")
	p := mustCompile(t, Spec{Primary: filepath.Join(root, "proj"), Temp: []string{}})
	hooks := deny(syscall.EACCES, "protected:git:.git/hooks")
	dotgit := deny(syscall.EACCES, "protected:git:.git")
	runChecks(t, p, root, []check{
		{OpMkdir, "proj/.git", allow("primary:read-write")},
		{OpSymlink, "proj/.git", dotgit},
		{OpCreate, "proj/.git", dotgit},
		{OpLink, "proj/.git", dotgit},
		{OpMknod, "proj/.git", dotgit},
		{OpCreate, "proj/.git/hooks/pre-commit", hooks},
		{OpCreate, "proj/.git/commondir", deny(syscall.EACCES, "protected:git:.git/commondir")},
		{OpCreate, "proj/.git/config.worktree", deny(syscall.EACCES, "protected:git:.git/config.worktree")},
		{OpCreate, "proj/.git/HEAD", allow("primary:read-write")},
		{OpCreate, "proj/rg/hooks/x", allow("primary:read-write")},
		{OpCreate, "proj", allow("primary:read-write")}, // a root is not checked as an ancestor
	})
}

// BenchmarkDecideAt is BenchmarkDecide through the host-following entry
// point: a write the path rules allow revalidates the witnesses (lstat(2)
// of the chain to every protected key) before the identity checks.
func BenchmarkDecideAt(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			p, paths := benchPolicy(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = p.DecideAt(OpCreate, paths[i&3], Object{})
				i++
			}
		})
	}
}
