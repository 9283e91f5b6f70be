package policy

import (
	"fmt"
	"os"
	"testing"
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
