package identity

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fuzzNames are the components a fuzz input's bytes pick from: the names of
// fuzzTree, one that never exists, ".", ".." and the empty component ("//").
var fuzzNames = []string{"a", "b", "c", "f", "l1", "l2", "l3", "l4", "l5", "zz", ".", "..", ""}

// fuzzTree makes a fixed tree with each kind of link the walk treats
// differently: relative, absolute, chained, a loop, one through a file, one
// with ".." after a link.
func fuzzTree(f *testing.F) string {
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{"a/b"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for _, p := range []string{"f", "a/b/c"} {
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"l1":     "a/b",
		"l2":     "l2",
		"l4":     "f/x",
		"l5":     root + "/a",
		"a/l3":   "../l1/..",
		"a/b/l1": "../../l5",
		"a/b/l2": "c",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			f.Fatal(err)
		}
	}
	return root
}

// fuzzPath turns fuzz bytes into a path: one component per byte, from
// fuzzNames; the high bit of the first byte makes it absolute (in the
// tree), of the last a trailing "/".
func fuzzPath(root string, in []byte) string {
	if len(in) > 24 {
		in = in[:24]
	}
	parts := make([]string, len(in))
	for i, b := range in {
		parts[i] = fuzzNames[int(b&0x7f)%len(fuzzNames)]
	}
	p := strings.Join(parts, "/")
	if len(in) > 0 && in[len(in)-1]&0x80 != 0 {
		p += "/"
	}
	if p == "" {
		p = "."
	}
	if len(in) > 0 && in[0]&0x80 != 0 {
		p = root + "/" + p
	}
	return p
}

// FuzzCanonical compares Canonical and TargetKey with the kernel's own walk
// (open(O_PATH) and /proc/self/fd) on paths through fuzzTree, relative ones
// from inside it: the same canonical path, or the same errno.
func FuzzCanonical(f *testing.F) {
	root := fuzzTree(f)
	f.Chdir(root)
	for _, seed := range [][]byte{
		{0}, {4, 11, 1}, {0x80 | 4, 11, 0}, {5, 0}, {6, 1}, {7}, {0, 8, 11, 11}, {0, 1, 4, 11, 11, 0x80 | 3},
		{11, 11, 11, 11, 11, 11, 11, 11, 11, 11}, {9, 11}, {12, 12, 0}, {3, 11},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p := fuzzPath(root, in)
		want, werr := kernelCanonical(p)
		got, err := Canonical(p)
		if werr != 0 {
			if gerr := pathErrno(t, err); gerr != werr {
				t.Fatalf("Canonical(%q): errno %v, the kernel says %v", p, gerr, werr)
			}
		} else if err != nil || got != want {
			t.Fatalf("Canonical(%q) = %q, %v; the kernel reaches %q", p, got, err, want)
		}
		key, kerr := TargetKey(p)
		switch {
		case werr == 0 && (kerr != nil || key != want):
			t.Fatalf("TargetKey(%q) = %q, %v; the kernel reaches %q", p, key, kerr, want)
		case werr != 0 && werr != syscall.ENOENT:
			if gerr := pathErrno(t, kerr); gerr != werr {
				t.Fatalf("TargetKey(%q): errno %v, the kernel says %v", p, gerr, werr)
			}
		case werr == syscall.ENOENT && kerr == nil && !filepath.IsAbs(key):
			t.Fatalf("TargetKey(%q) = %q: not absolute", p, key)
		}
	})
}
