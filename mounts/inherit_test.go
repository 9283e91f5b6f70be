package mounts_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// TestSubSessionInherits: a child (--parent) of a read-only parent with an
// extra root, its own protected list and follow links comes up with all of
// them; a child may narrow (mode, a root's access) but never widen (mode,
// links, protection, a root's access, a root of its own), at create and by
// a later policy change; once the parent is gone, nothing constrains it.
func TestSubSessionInherits(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	data := filepath.Join(dir, "data")
	mine := filepath.Join(dir, "mine")
	mkTree(t, root, "src/", "sub/")
	mkTree(t, data, "d")
	mkTree(t, mine, "m")

	parent, err := d.c.Create(ctx, api.CreateRequest{
		ID: "p", Root: root, Cwd: "src", Symlinks: api.SymlinksFollow,
		Policy: &api.Policy{Mode: api.ModeWorkspaceWrite, Additional: []api.Root{{Path: data, Access: api.AccessReadOnly}},
			Protected: []string{".git/hooks", ".env"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.SetPolicy(ctx, "p", api.Policy{Mode: api.ModeReadOnly, Additional: parent.Policy.Additional, Protected: parent.Policy.Protected}); err != nil {
		t.Fatal(err)
	}

	// Everything left out comes from the parent.
	child, err := d.c.Create(ctx, api.CreateRequest{ID: "c", Root: root, Parent: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Mode != api.ModeReadOnly || child.Policy.Mode != api.ModeReadOnly || child.Symlinks != api.SymlinksFollow ||
		!slices.Equal(child.Policy.Protected, []string{".git/hooks", ".env"}) ||
		len(child.Policy.Additional) != 1 || child.Policy.Additional[0] != (api.Root{Path: data, Access: api.AccessReadOnly}) ||
		child.Parent != "p" || child.Cwd != filepath.Join(d.mountBase, "c", "src") ||
		!slices.Equal(child.Policy.Temp, []string{child.TmpDir}) {
		t.Fatalf("child of a read-only parent: %+v", child)
	}
	r, err := d.c.Resolve(ctx, "c", "new")
	if err != nil || r.Write != (api.Decision{Allow: false, Errno: "EROFS", Rule: "primary:read-only"}) {
		t.Fatalf("child write decision %+v %v, want EROFS primary:read-only", r.Write, err)
	}

	// Narrower is fine: a none root, a child on a subdirectory.
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "n1", Root: root, Parent: "p", Policy: &api.Policy{
		Additional: []api.Root{{Path: data, Access: api.AccessNone}}}}); err != nil {
		t.Fatalf("narrower child: %v", err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "n2", Root: filepath.Join(root, "sub"), Parent: "p", Mountpoint: filepath.Join(dir, "n2")}); err == nil || !strings.Contains(err.Error(), "may not read "+root+"/src (rule hostview:hidden)") {
		// The parent's directory (src) is outside root/sub, where the
		// child may go only if it may read it; not here: under /tmp,
		// which the child's host view hides.
		t.Fatalf("child on a subdirectory not holding the parent's cwd: %v", err)
	}

	// Wider is refused, naming the field and the parent.
	for _, tc := range []struct {
		name string
		req  api.CreateRequest
		msg  string
	}{
		{"mode", api.CreateRequest{ID: "w", Root: root, Parent: "p", Policy: &api.Policy{Mode: api.ModeWorkspaceWrite}},
			`session "w": policy mode "workspace-write" is wider than parent "p"'s "read-only"; a sub-session may only narrow its parent's policy`},
		{"protected", api.CreateRequest{ID: "w", Root: root, Parent: "p", Policy: &api.Policy{Protected: []string{}}},
			`session "w": policy protects less than parent "p": ".git/hooks" is missing from protected; a sub-session may only narrow its parent's policy`},
		{"root access", api.CreateRequest{ID: "w", Root: root, Parent: "p", Policy: &api.Policy{Additional: []api.Root{{Path: data, Access: api.AccessReadWrite}}}},
			`session "w": policy is wider than parent "p"'s: it may write ` + data + ` (additional:read-write), the parent may not (additional:read-only); a sub-session may only narrow its parent's policy`},
	} {
		_, err := d.c.Create(ctx, tc.req)
		if mounts.CodeOf(err) != mounts.CodeInvalid || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want invalid %q", tc.name, err, tc.msg)
		}
	}
	// A child of a workspace-write parent cannot take follow under
	// contain, a temp area of its own, nor a root elsewhere.
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "q", Root: root}); err != nil {
		t.Fatal(err)
	}
	_, err = d.c.Create(ctx, api.CreateRequest{ID: "w", Root: root, Parent: "q", Symlinks: api.SymlinksFollow})
	if want := `session "w": symlink mode "follow" is wider than parent "q"'s "contain"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("follow under contain: %v, want %q", err, want)
	}
	_, err = d.c.Create(ctx, api.CreateRequest{ID: "w", Root: root, Parent: "q", Policy: &api.Policy{Temp: []string{mine}}})
	if want := `session "w": policy is wider than parent "q"'s: it may write ` + mine + ` (temp:read-write), the parent may not (outside:read-only)`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a temp area of its own: %v, want %q", err, want)
	}
	_, err = d.c.Create(ctx, api.CreateRequest{ID: "w", Root: mine, Parent: "q", Mountpoint: filepath.Join(dir, "w")})
	if err == nil || mounts.CodeOf(err) != mounts.CodeInvalid {
		t.Errorf("child rooted elsewhere: %v, want invalid", err)
	}
	if _, err := d.c.Get(ctx, "w"); mounts.CodeOf(err) != mounts.CodeNotFound {
		t.Errorf("a refused child was left behind: %v", err)
	}

	// A later policy change of the child may not widen it either...
	_, err = d.c.PatchPolicy(ctx, "c", api.PolicyPatch{Mode: api.ModeFullAccess})
	if want := `session "c": policy mode "full-access" is wider than parent "p"'s "read-only"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("patch widening a child: %v, want %q", err, want)
	}
	if s, _ := d.c.Get(ctx, "c"); s.Mode != api.ModeReadOnly {
		t.Errorf("refused patch changed the mode to %q", s.Mode)
	}
	// ... until the parent is gone.
	for _, id := range []string{"n1", "c"} {
		if id == "c" {
			if err := d.c.Remove(ctx, "p", false); err != nil {
				t.Fatal(err)
			}
			if s, err := d.c.PatchPolicy(ctx, "c", api.PolicyPatch{Mode: api.ModeWorkspaceWrite}); err != nil || s.Mode != api.ModeWorkspaceWrite {
				t.Fatalf("patch after the parent left: %+v %v", s, err)
			}
		}
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.c.Remove(ctx, "q", false); err != nil {
		t.Fatal(err)
	}
}

// A sub-session rooted below its parent's root inherits the parent's
// protected places below its root, rebased to it (the parent's
// sub/sec.txt is the child's sec.txt: EACCES to the child, as to the
// parent), and none of the parent's places outside it (top.txt); an
// explicit list must hold the rebased name, and a later protection of the
// parent below the child's root narrows the child at once. Before the
// fix the child took the parent's list as it was (sub/sec.txt, top.txt
// relative to its own root) and its create was refused: "policy is wider
// than parent's ... (protected:sub/sec.txt)", or, given --protect sec.txt,
// "policy protects less than parent: "sub/sec.txt" is missing".
func TestSubSessionInheritsProtectedBelowRoot(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/sec.txt", "sub/other", "sub/free", "top.txt")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "P", Root: root, Policy: &api.Policy{Protected: []string{"sub/sec.txt", "top.txt"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, "P", "sub"); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "sub")
	if r := d.wsfs(t, "session", "create", "K", "--root", sub, "--parent", "P"); r.code != 0 {
		t.Fatalf("create K: %+v", r)
	}
	if s, err := d.c.Get(ctx, "K"); err != nil || !slices.Equal(s.Policy.Protected, []string{"sec.txt"}) {
		t.Fatalf("K's protected: %+v %v, want [sec.txt]", s.Policy.Protected, err)
	}
	if r := d.wsfs(t, "session", "create", "K2", "--root", sub, "--parent", "P", "--protect", "sec.txt"); r.code != 0 {
		t.Fatalf("create K2 --protect sec.txt: %+v", r)
	}
	r := d.wsfs(t, "session", "create", "K3", "--root", sub, "--parent", "P", "--protect", "free")
	if want := "wsfs: session \"K3\": policy protects less than parent \"P\": \"sec.txt\" is missing from protected; a sub-session may only narrow its parent's policy\n"; r.code != 2 || r.stderr != want {
		t.Fatalf("create K3 --protect free: %+v, want exit 2 and %q", r, want)
	}
	for _, id := range []string{"K", "K2"} {
		if got, want := tryIn(t, d, id, "append", "sec.txt", "append", "free"), "append sec.txt EACCES\nappend free ok\n"; got != want {
			t.Fatalf("%s:\n got %q\nwant %q", id, got, want)
		}
	}
	// The parent protects sub/other too: K is narrowed at once.
	if _, err := d.c.PatchPolicy(ctx, "P", api.PolicyPatch{Protected: []string{"sub/other"}}); err != nil {
		t.Fatal(err)
	}
	if s, err := d.c.Get(ctx, "K"); err != nil || !slices.Equal(s.Policy.Protected, []string{"sec.txt", "other"}) {
		t.Fatalf("K's protected after the parent's narrowing: %+v %v, want [sec.txt other]", s.Policy.Protected, err)
	}
	if got, want := tryIn(t, d, "K", "append", "other"), "append other EACCES\n"; got != want {
		t.Fatalf("K after the parent's narrowing:\n got %q\nwant %q", got, want)
	}
}

// A parent's protected place spelt through a symlink (lnk/sec.txt, lnk ->
// sub) protects the object it reaches (sub/sec.txt); a sub-session rooted
// at sub inherits it as sec.txt (EACCES), as it inherits a place spelt
// physically, and a later protection spelt so narrows it too. Before the
// fix the child was plain workspace-write and wrote sec.txt.
func TestSubSessionInheritsProtectedThroughSymlink(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "sub/sec.txt", "sub/later.txt", "sub/free")
	if err := os.Symlink("sub", filepath.Join(root, "lnk")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "P", Root: root, Policy: &api.Policy{Protected: []string{"lnk/sec.txt"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, "P", "sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "K", Root: filepath.Join(root, "sub"), Parent: "P"}); err != nil {
		t.Fatal(err)
	}
	if s, err := d.c.Get(ctx, "K"); err != nil || !slices.Equal(s.Policy.Protected, []string{"sec.txt"}) {
		t.Fatalf("K's protected: %+v %v, want [sec.txt]", s.Policy.Protected, err)
	}
	if _, err := d.c.PatchPolicy(ctx, "P", api.PolicyPatch{Protected: []string{"lnk/later.txt"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "K", "append", "sec.txt", "append", "later.txt", "append", "free"), "append sec.txt EACCES\nappend later.txt EACCES\nappend free ok\n"; got != want {
		t.Fatalf("K:\n got %q\nwant %q", got, want)
	}
}

// A sub-session keeps its parent's protected places outside its roots by
// identity (policy protected_outside): a hard link inside its root to the
// parent's protected f (or to .git/config, a repository's above its root)
// is EACCES to the child, as to the parent, whatever policy the child is
// given later, and a place the parent protects later narrows the child
// at once. Before the fix the child wrote f through its link (the
// parent's own write there was EACCES).
func TestSubSessionKeepsParentsProtectedOutside(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f", "g", "d/free")
	for _, l := range [][2]string{{"f", "d/falias"}, {"g", "d/galias"}} {
		if err := os.Link(filepath.Join(root, l[0]), filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "P", Root: root, Policy: &api.Policy{Protected: []string{"f"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, "P", "d"); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "P", "append", "falias"), "append falias EACCES\n"; got != want {
		t.Fatalf("P:\n got %q\nwant %q", got, want)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "K", Root: filepath.Join(root, "d"), Parent: "P"}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "K", "append", "falias", "append", "galias", "append", "free"), "append falias EACCES\nappend galias ok\nappend free ok\n"; got != want {
		t.Fatalf("K:\n got %q\nwant %q", got, want)
	}
	// A policy the child is given afresh keeps them; the parent's later
	// protection of g narrows the child.
	if r := d.wsfs(t, "session", "policy", "K", "--protect", "free"); r.code != 0 {
		t.Fatalf("session policy K --protect free: %+v", r)
	}
	if _, err := d.c.PatchPolicy(ctx, "P", api.PolicyPatch{Protected: []string{"g"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "K", "append", "falias", "append", "galias", "append", "free"), "append falias EACCES\nappend galias EACCES\nappend free EACCES\n"; got != want {
		t.Fatalf("K after its own policy and the parent's narrowing:\n got %q\nwant %q", got, want)
	}
}

// A sub-session protects by identity what its parent protects in the
// parent's writable roots that are not its own writable roots: the
// repositories there (a child in the parent's additional root a, with
// links to the primary root's .git/config and hook), and the protected
// places in a root the child only reads (the parent's read-write a
// narrowed to read-only: links to a/af and a/.git/config). Before the fix
// every one of these appends was ok (the parent's own: EACCES).
func TestSubSessionKeepsParentsRepos(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, a := filepath.Join(dir, "proj"), filepath.Join(dir, "a")
	mkTree(t, root, ".git/config", ".git/hooks/pre-commit", "d/free")
	mkTree(t, a, ".git/config", "af", "sub/free")
	for _, l := range [][2]string{
		{filepath.Join(root, ".git/config"), filepath.Join(a, "sub/pcfg")},
		{filepath.Join(root, ".git/hooks/pre-commit"), filepath.Join(a, "sub/phook")},
		{filepath.Join(a, "af"), filepath.Join(root, "d/afalias")},
		{filepath.Join(a, ".git/config"), filepath.Join(root, "d/acfg")},
	} {
		if err := os.Link(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "P", Root: root, Policy: &api.Policy{
		Additional: []api.Root{{Path: a, Access: api.AccessReadWrite}}, Protected: []string{"af"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Chdir(ctx, "P", a+"/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "KA", Root: filepath.Join(a, "sub"), Parent: "P"}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "KA", "append", "pcfg", "append", "phook", "append", "free"), "append pcfg EACCES\nappend phook EACCES\nappend free ok\n"; got != want {
		t.Fatalf("KA:\n got %q\nwant %q", got, want)
	}
	if _, err := d.c.Chdir(ctx, "P", root+"/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "KD", Root: filepath.Join(root, "d"), Parent: "P", Policy: &api.Policy{
		Additional: []api.Root{{Path: a, Access: api.AccessReadOnly}}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := tryIn(t, d, "KD", "append", "afalias", "append", "acfg", "append", "free"), "append afalias EACCES\nappend acfg EACCES\nappend free ok\n"; got != want {
		t.Fatalf("KD:\n got %q\nwant %q", got, want)
	}
}
