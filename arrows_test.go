// The import arrows of DESIGN.md ("Packages"), checked on the real graph.
package wsfs_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/wsfs/wsfs"

// arrows are the documented dependencies between the module's packages
// (module-relative), DESIGN.md: `cmd → (csi →) mounts → fusefs → policy →
// identity`, `fusefs → transport` (the FUSE connection, Round 4), `resolver → identity`, `mounts/client → mounts/api`, `cmd →
// confine`, with the edges of its table (mounts uses resolver and the wire
// types of mounts/api; cmd uses the client and the resolver). A package may
// import what these arrows reach, directly or through others: the arrows
// layer the packages, and a downward import past a layer (csi naming
// policy.Spec, mounts asking identity for a canonical path) is not a wrong
// arrow, where re-exporting identity from fusefs to avoid it would be a
// second copy of each name. confine may use identity (the bottom of the
// graph, path rules only) for the one copy of identity.Within. A package
// missing here is refused until it is placed.
var arrows = map[string][]string{
	"identity":      nil,
	"policy":        {"identity"},
	"resolver":      {"identity"},
	"fusefs":        {"policy", "identity", "transport"},
	"transport":     nil,
	"mounts":        {"fusefs", "resolver", "mounts/api", "docs"},
	"docs":          nil,
	"mounts/api":    nil,
	"mounts/client": {"mounts/api"},
	"confine":       {"identity"},
	"csi":           {"mounts"},
	"cmd/wsfs":      {"csi", "mounts", "mounts/client", "resolver", "confine"},
}

// top are the module's tops: commands and hack/ tools may import any
// package of the module; nothing may import them.
func top(pkg string) bool {
	return pkg == "cmd" || strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "hack/")
}

// reach returns the packages pkg may import: what the arrows reach from it.
func reach(pkg string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, q := range arrows[p] {
			if !out[q] {
				out[q] = true
				walk(q)
			}
		}
	}
	walk(pkg)
	return out
}

type listed struct {
	ImportPath string
	Imports    []string
}

// packages returns the module's packages (module-relative; "" for the
// module root) and their non-test imports inside the module, from `go list`.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", "./...")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list: %v\n%s", err, ee.Stderr)
	}
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel, ok := inModule(p.ImportPath)
		if !ok {
			continue
		}
		var imps []string
		for _, imp := range p.Imports {
			if r, ok := inModule(imp); ok {
				imps = append(imps, r)
			}
		}
		pkgs[rel] = imps
	}
	return pkgs
}

// inModule returns path relative to the module, and whether it is in it.
func inModule(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// TestImportArrows fails on an import the arrows do not allow, on a package
// not placed in them, and on an arrow into cmd/ or hack/.
func TestImportArrows(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not in PATH")
	}
	pkgs := packages(t)
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	if !slices.Contains(names, "identity") || !slices.Contains(names, "mounts") {
		t.Fatalf("go list found %v: not the wsfs module?", names)
	}
	for _, pkg := range names {
		imps := pkgs[pkg]
		if pkg == "" {
			continue // this test's own package: it imports nothing of the module
		}
		for _, imp := range imps {
			if top(imp) {
				t.Errorf("%s imports %s: nothing may import a command or a hack/ tool", pkg, imp)
			}
		}
		if top(pkg) {
			continue
		}
		if _, ok := arrows[pkg]; !ok {
			t.Errorf("package %s is not placed in the import arrows: add it to arrows in arrows_test.go and to DESIGN.md's table", pkg)
			continue
		}
		allowed := reach(pkg)
		for _, imp := range imps {
			if !allowed[imp] {
				t.Errorf("%s imports %s: a wrong arrow (%s may import %s)", pkg, imp, pkg, list(allowed))
			}
		}
	}
}

// TestArrowsAcyclic: the table itself points one way.
func TestArrowsAcyclic(t *testing.T) {
	for pkg := range arrows {
		if reach(pkg)[pkg] {
			t.Errorf("the arrows from %s lead back to it", pkg)
		}
		for _, q := range arrows[pkg] {
			if _, ok := arrows[q]; !ok {
				t.Errorf("%s → %s: %s is not in the table", pkg, q, q)
			}
		}
	}
}

func list(set map[string]bool) string {
	if len(set) == 0 {
		return "nothing of the module"
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
