package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/identity"
)

// atLimits returns a spec at every count limit: MaxAdditional additional
// roots (existing directories, the first writable of them read-write, the
// others read-only),
// MaxTemp temp entries and MaxProtected protected subpaths, two of them
// MaxPathBytes long.
func atLimits(b *testing.B, writable int) Spec {
	root, err := identity.Canonical(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	proj := filepath.Join(root, "proj")
	spec := Spec{Primary: proj}
	for i := 0; i < MaxAdditional; i++ {
		p := filepath.Join(root, fmt.Sprintf("extra%d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		access := AccessReadOnly
		if i < writable {
			access = AccessReadWrite
		}
		spec.Additional = append(spec.Additional, Root{Path: p, Access: access})
	}
	for i := 0; i < MaxTemp; i++ {
		p := filepath.Join(root, fmt.Sprintf("tmp%d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		spec.Temp = append(spec.Temp, p)
	}
	if err := os.MkdirAll(proj, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < MaxProtected-2; i++ {
		spec.Protected = append(spec.Protected, fmt.Sprintf("d%d/sub%d/.env", i%97, i))
	}
	long := strings.Repeat("x/", MaxPathBytes/2-1) + "y" // 4,095 bytes
	spec.Protected = append(spec.Protected, long, long[:len(long)-1]+"z")
	return spec
}

// BenchmarkCompileAtLimits: a policy at every count limit compiles under
// the 100 ms issue 20 item 8 asks for: MaxProtected entries in one
// writable root, and in MaxProtectedPlaces/MaxProtected writable roots
// (the product's bound; about 12 and 50 ms on a 2-CPU EPYC VM).
func BenchmarkCompileAtLimits(b *testing.B) {
	for _, w := range []int{0, MaxProtectedPlaces/MaxProtected - 1} {
		b.Run(fmt.Sprintf("writable=%d", w+1), func(b *testing.B) { benchCompile(b, atLimits(b, w)) })
	}
}

func benchCompile(b *testing.B, spec Spec) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(spec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPatchOverLimits: a patch of 100,000 protected subpaths (the
// issue's 40 s case) is refused before it is merged (Patch.CheckLimits,
// which the daemon's PatchPolicy calls first), with the error naming the
// field and the limit, in well under the 10 ms issue 20 item 8 asks for.
func BenchmarkPatchOverLimits(b *testing.B) {
	p := Patch{}
	for i := 0; i < 100000; i++ {
		p.Protected = append(p.Protected, fmt.Sprintf("p%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		err := p.CheckLimits()
		if err == nil || err.Error() != "policy: protected: 100000 entries, at most 1024" {
			b.Fatalf("check: %v", err)
		}
	}
}
