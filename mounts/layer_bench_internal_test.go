package mounts

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchLayer makes a project of n files in 10 directories (owned by
// 65534, so a users session may change them) and its layer.
func benchLayer(b *testing.B, n int) (string, *Layer) {
	b.Helper()
	proj := filepath.Join(b.TempDir(), "proj")
	for i := range n {
		p := filepath.Join(proj, fmt.Sprintf("d%d/f%d", i%10, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	filepath.Walk(proj, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, nobodyUID, nobodyUID) })
	l, err := OpenLayer(filepath.Join(b.TempDir(), "layer"), proj)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Remove() })
	return proj, l
}

// BenchmarkLayerDiffCopyUps: the diff of a layer where the session
// chmodded 2,000 project files (2,000 copy-ups, each with its origin,
// which the hard-link detection decodes).
func BenchmarkLayerDiffCopyUps(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	_, l := benchLayer(b, 2000)
	filepath.Walk(l.Merged(), func(p string, fi os.FileInfo, _ error) error {
		if fi != nil && fi.Mode().IsRegular() {
			os.Chmod(p, 0o600)
		}
		return nil
	})
	b.ResetTimer()
	for range b.N {
		cs, err := l.Diff(false)
		if err != nil || len(cs) != 2000 {
			b.Fatalf("diff: %d changes, %v", len(cs), err)
		}
	}
}

// BenchmarkLayerCommitNew: a commit of 500 new files (50 per directory),
// with the daemon's rights and with a session user's (one thread switch
// per file).
func BenchmarkLayerCommitNew(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	for _, users := range [][]uint32{nil, {nobodyUID}} {
		b.Run(fmt.Sprintf("users=%v", users), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				_, l := benchLayer(b, 10)
				l.Users = users
				for i := range 500 {
					p := filepath.Join(l.Merged(), fmt.Sprintf("d%d/new%d", i%10, i))
					if err := os.WriteFile(p, []byte("new\n"), 0o644); err != nil {
						b.Fatal(err)
					}
					os.Lchown(p, nobodyUID, nobodyUID)
				}
				b.StartTimer()
				res, err := l.Commit(nil, false, allowAll)
				if err != nil || len(res.Applied) != 500 {
					b.Fatalf("commit: %d applied, %+v %v", len(res.Applied), res.Refused, err)
				}
			}
		})
	}
}
