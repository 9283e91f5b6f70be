package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkDecideAtRepo is a create in a directory of a repository's
// worktree: the repository rule's walk up and cached config.
func BenchmarkDecideAtRepo(b *testing.B) {
	root := b.TempDir()
	for _, d := range []string{"/proj/.git/hooks", "/proj/bench-cd"} {
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(root+"/proj/.git/config", []byte("[core]\n\tbare = false\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(root+"/proj/.git/HEAD", []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := Compile(Spec{Primary: root + "/proj", Temp: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = p.DecideAt(OpCreate, fmt.Sprintf("%s/proj/bench-cd/f%d", root, i&1023), Object{})
		i++
	}
}

// BenchmarkGitTops is the repository-top walk above a write at several
// depths below the test's temporary directory (a repository at its top),
// for gitTops, for one lstat(2) per ancestor (gitTopsByPath) and for the
// descriptor walk from / (walkTops), which gitTops combines (below
// gitTopsPathLevels). Names are 8 bytes; the depth counts the levels below
// the temporary directory.
func BenchmarkGitTops(b *testing.B) {
	byDescriptor := func(dir string) []gitTop {
		fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		return walkTops(fd, dir, 0, nil)
	}
	root := b.TempDir()
	if err := os.Mkdir(root+"/.git", 0o755); err != nil {
		b.Fatal(err)
	}
	dir := root
	for _, depth := range []int{1, 4, 16, 64, 256} {
		for lvl := len(strings.Split(strings.TrimPrefix(dir, root), "/")) - 1; lvl < depth; lvl++ {
			dir += fmt.Sprintf("/dir%04d", lvl)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for _, f := range []struct {
			name string
			fn   func(string) []gitTop
		}{{"gitTops", gitTops}, {"byPath", gitTopsByPath}, {"byDescriptor", byDescriptor}} {
			b.Run(fmt.Sprintf("depth%d/%s", depth, f.name), func(b *testing.B) {
				for b.Loop() {
					if ts := f.fn(dir); len(ts) == 0 || ts[len(ts)-1].dir != root {
						b.Fatalf("%s(%s) = %v: the repository at the top not found", f.name, dir, ts)
					}
				}
			})
		}
	}
}
