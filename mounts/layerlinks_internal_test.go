package mounts

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inode returns the inode number and link count of p (not followed).
func inode(t *testing.T, p string) (uint64, uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino, uint64(st.Nlink)
}

// appendTo appends s to the file p.
func appendTo(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestLayerHardLinks: what the session's hard links are after a commit,
// as a native run leaves them: two new files linked (n, n2), a new name
// of a project file the session did not change (u2: the project's u
// itself, not a copy), a project file of two names written in place (x:
// its other name z changes with it, listed as modified, "links" naming
// x), a changed project file linked (c, c2), a new name of a project file
// of two names (p2: p, q and p2 are the project's p). The diff names each
// path's other names; the commit makes them one file (st_ino and st_nlink
// equal) with the session's content; the next diff lists nothing.
func TestLayerHardLinks(t *testing.T) {
	proj := t.TempDir()
	for _, p := range []string{"x", "u", "c", "p", "d/w"} {
		if err := os.MkdirAll(filepath.Join(proj, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proj, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for old, new := range map[string]string{"x": "z", "p": "q"} {
		if err := os.Link(filepath.Join(proj, old), filepath.Join(proj, new)); err != nil {
			t.Fatal(err)
		}
	}
	uIno, _ := inode(t, filepath.Join(proj, "u"))
	pIno, _ := inode(t, filepath.Join(proj, "p"))
	l := layerFor(t, proj)
	m := l.Merged()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(m, "n"), []byte("new\n"), 0o640))
	must(os.Link(filepath.Join(m, "n"), filepath.Join(m, "d/n2")))
	must(os.Link(filepath.Join(m, "u"), filepath.Join(m, "u2")))
	appendTo(t, filepath.Join(m, "x"), "more\n")
	appendTo(t, filepath.Join(m, "c"), "more\n")
	must(os.Link(filepath.Join(m, "c"), filepath.Join(m, "d/c2")))
	must(os.Link(filepath.Join(m, "p"), filepath.Join(m, "p2")))
	// The session's view: one inode per file.
	if a, _ := inode(t, filepath.Join(m, "x")); a != func() uint64 { b, _ := inode(t, filepath.Join(m, "z")); return b }() {
		t.Fatal("the overlay shows x and z as two files (index=on?)")
	}

	changes, err := l.Diff(false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Path] = c.Kind + " " + strings.Join(c.Fields, ",") + " links=" + strings.Join(c.Links, ",")
	}
	want := map[string]string{
		"n": "added  links=d/n2", "d/n2": "added  links=n",
		"u2": "added  links=u",
		"x":  "modified content links=z", "z": "modified content links=x",
		"c": "modified content links=d/c2", "d/c2": "added  links=c",
		"p2": "added  links=p,q",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff:\n%v\nwant\n%v", got, want)
	}

	res, err := l.Commit(nil, false, allowAll)
	if err != nil || len(res.Refused)+len(res.Conflicts) != 0 || len(res.Applied) != len(want) {
		t.Fatalf("commit: %+v %v", res, err)
	}
	groups := [][]string{{"n", "d/n2"}, {"u", "u2"}, {"x", "z"}, {"c", "d/c2"}, {"p", "p2", "q"}}
	content := map[string]string{"n": "new\n", "u": "u\n", "x": "x\nmore\n", "c": "c\nmore\n", "p": "p\n"}
	for _, g := range groups {
		ino0, _ := inode(t, filepath.Join(proj, g[0]))
		for _, p := range g {
			ino, nlink := inode(t, filepath.Join(proj, p))
			if ino != ino0 || nlink != uint64(len(g)) {
				t.Errorf("%s in the project: inode %d, %d links; want %s's inode %d, %d links", p, ino, nlink, g[0], ino0, len(g))
			}
			if b, err := os.ReadFile(filepath.Join(proj, p)); err != nil || string(b) != content[g[0]] {
				t.Errorf("%s in the project: %q %v, want %q", p, b, err, content[g[0]])
			}
		}
	}
	if ino, _ := inode(t, filepath.Join(proj, "u2")); ino != uIno {
		t.Errorf("u2 in the project is inode %d, want u's own %d (linked, not copied)", ino, uIno)
	}
	if ino, _ := inode(t, filepath.Join(proj, "p2")); ino != pIno {
		t.Errorf("p2 in the project is inode %d, want p's own %d (linked, not copied)", ino, pIno)
	}
	if fi, err := os.Stat(filepath.Join(proj, "n")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("n in the project: %v %v, want -rw-r-----", fi, err)
	}
	again, err := l.Diff(false)
	if err != nil || len(again) != 0 {
		t.Fatalf("diff after the commit: %+v %v, want nothing", again, err)
	}
}

// TestLayerHardLinksDiscard: a discard puts the project's hard links back
// in the session's view: x (two names with z in the project) written in
// place and discarded with z is one file again in the layer, with the
// project's content (a later write to x shows at z, as in the project);
// a new name u2 of an unchanged file goes; the diff lists nothing.
func TestLayerHardLinksDiscard(t *testing.T) {
	proj := t.TempDir()
	for _, p := range []string{"x", "u"} {
		if err := os.WriteFile(filepath.Join(proj, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(proj, "x"), filepath.Join(proj, "z")); err != nil {
		t.Fatal(err)
	}
	l := layerFor(t, proj)
	m := l.Merged()
	appendTo(t, filepath.Join(m, "x"), "more\n")
	if err := os.Link(filepath.Join(m, "u"), filepath.Join(m, "u2")); err != nil {
		t.Fatal(err)
	}
	res, err := l.Discard(nil)
	if err != nil || len(res.Refused) != 0 || !reflect.DeepEqual(res.Applied, []string{"u2", "x", "z"}) {
		t.Fatalf("discard: %+v %v, want u2, x, z applied", res, err)
	}
	if _, err := os.Lstat(filepath.Join(m, "u2")); !os.IsNotExist(err) {
		t.Fatalf("u2 in the session after the discard: %v, want ENOENT", err)
	}
	xi, xn := inode(t, filepath.Join(m, "x"))
	zi, zn := inode(t, filepath.Join(m, "z"))
	if xi != zi || xn != 2 || zn != 2 {
		t.Fatalf("x and z in the session after the discard: inodes %d, %d, links %d, %d; want one file of 2 links", xi, zi, xn, zn)
	}
	if b, err := os.ReadFile(filepath.Join(m, "z")); err != nil || string(b) != "x\n" {
		t.Fatalf("z in the session after the discard: %q %v, want the project's", b, err)
	}
	if cs, err := l.Diff(false); err != nil || len(cs) != 0 {
		t.Fatalf("diff after the discard: %+v %v, want nothing", cs, err)
	}
	appendTo(t, filepath.Join(m, "x"), "again\n")
	if b, err := os.ReadFile(filepath.Join(m, "z")); err != nil || string(b) != "x\nagain\n" {
		t.Fatalf("z after a write to x: %q %v, want x's new content", b, err)
	}
}

// TestLayerFileRename: a file the session renamed (mv) unchanged is listed
// as renamed from its old path, which is listed as deleted too, and
// committed as a rename: the project's file keeps its inode and its other
// names (v3 and the project's v2). A file renamed and then changed (e2),
// is an addition and a deletion; so is a rename committed without its old
// path (x2: a copy, x stays until it is committed).
func TestLayerFileRename(t *testing.T) {
	proj := t.TempDir()
	for _, p := range []string{"w", "v", "e", "x", "sub/y"} {
		if err := os.MkdirAll(filepath.Join(proj, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proj, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(proj, "v"), filepath.Join(proj, "v2")); err != nil {
		t.Fatal(err)
	}
	ino := map[string]uint64{}
	for _, p := range []string{"w", "v", "x", "sub/y"} {
		ino[p], _ = inode(t, filepath.Join(proj, p))
	}
	l := layerFor(t, proj)
	m := l.Merged()
	for from, to := range map[string]string{"w": "w2", "v": "v3", "e": "e2", "x": "x2", "sub/y": "y2"} {
		if err := os.Rename(filepath.Join(m, from), filepath.Join(m, to)); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(t, filepath.Join(m, "e2"), "more\n")
	changes, err := l.Diff(false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range changes {
		got[c.Path] = c.Kind + " " + c.Type + " " + c.From + " links=" + strings.Join(c.Links, ",")
	}
	want := map[string]string{
		"w2": "renamed file w links=", "w": "deleted file  links=",
		"v3": "renamed file v links=v2", "v": "deleted file  links=",
		"e2": "added file  links=", "e": "deleted file  links=",
		"x2": "renamed file x links=", "x": "deleted file  links=",
		"y2": "renamed file sub/y links=", "sub/y": "deleted file  links=",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff:\n%v\nwant\n%v", got, want)
	}
	// x2 alone: a copy.
	res, err := l.Commit([]string{"x2"}, false, allowAll)
	if err != nil || len(res.Refused)+len(res.Conflicts) != 0 || !reflect.DeepEqual(res.Applied, []string{"x2"}) {
		t.Fatalf("commit x2: %+v %v", res, err)
	}
	if i, _ := inode(t, filepath.Join(proj, "x2")); i == ino["x"] {
		t.Errorf("x2 committed alone is x's inode %d, want a copy", i)
	}
	if _, err := os.Stat(filepath.Join(proj, "x")); err != nil {
		t.Errorf("x after committing x2 alone: %v, want it there", err)
	}
	res, err = l.Commit(nil, false, allowAll)
	if err != nil || len(res.Refused)+len(res.Conflicts) != 0 || len(res.Applied) != len(want)-1 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	for to, from := range map[string]string{"w2": "w", "v3": "v", "v2": "v", "y2": "sub/y"} {
		if i, _ := inode(t, filepath.Join(proj, to)); i != ino[from] {
			t.Errorf("%s in the project: inode %d, want %s's %d (renamed)", to, i, from, ino[from])
		}
	}
	for _, p := range []string{"w", "v", "e", "x", "sub/y"} {
		if _, err := os.Lstat(filepath.Join(proj, p)); !os.IsNotExist(err) {
			t.Errorf("%s in the project after the commit: %v, want ENOENT", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(proj, "e2")); err != nil || string(b) != "e\nmore\n" {
		t.Errorf("e2 in the project: %q %v", b, err)
	}
	if cs, err := l.Diff(false); err != nil || len(cs) != 0 {
		t.Fatalf("diff after the commit: %+v %v, want nothing", cs, err)
	}
}

// TestLayerHardLinksDiscardTree: a directory the session removed whole
// (rm -rf d) holding names of one file (d/x, d/y) comes back from a
// discard with its names linked again (one inode), and a diff lists
// nothing. Before, the tree was copied entry by entry without the links:
// d/x and d/y came back as two files, silently. A name of that file
// outside the tree (e), which the discard does not touch, stays the
// project's own object in the session: it is not linked to the copy.
func TestLayerHardLinksDiscardTree(t *testing.T) {
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "d", "x"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d/y", "e"} {
		if err := os.Link(filepath.Join(proj, "d", "x"), filepath.Join(proj, p)); err != nil {
			t.Fatal(err)
		}
	}
	l := layerFor(t, proj)
	m := l.Merged()
	if err := os.RemoveAll(filepath.Join(m, "d")); err != nil {
		t.Fatal(err)
	}
	res, err := l.Discard(nil)
	if err != nil || len(res.Refused) != 0 || !reflect.DeepEqual(res.Applied, []string{"d"}) {
		t.Fatalf("discard: %+v %v, want d applied", res, err)
	}
	xi, xn := inode(t, filepath.Join(m, "d", "x"))
	yi, yn := inode(t, filepath.Join(m, "d", "y"))
	if xi != yi || xn != 2 || yn != 2 {
		t.Fatalf("d/x, d/y after the discard: inodes %d %d, links %d %d; want one file of 2 links", xi, yi, xn, yn)
	}
	if cs, err := l.Diff(false); err != nil || len(cs) != 0 {
		t.Fatalf("diff after the discard: %+v %v, want nothing", cs, err)
	}
}
