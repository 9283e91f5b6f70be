package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOpenAPIJSON checks that the embedded document converts to JSON with
// the same top-level shape.
func TestOpenAPIJSON(t *testing.T) {
	b, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" || doc["paths"] == nil || doc["components"] == nil {
		t.Fatalf("OpenAPIJSON: openapi %v, paths or components missing", doc["openapi"])
	}
	if _, err := jsonable(map[any]any{200: "x"}); err == nil {
		t.Error("a mapping key that is not a string was accepted")
	}
}

// TestDesignNamesEveryPackage keeps design.md next to the code: every Go
// package of the module is named in it, and README links it (not the
// DESIGN.md that is not in the repository).
func TestDesignNamesEveryPackage(t *testing.T) {
	design, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "github.com/wsfs/wsfs/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, "github.com/wsfs/wsfs/")
		if rel == "github.com/wsfs/wsfs" || strings.HasPrefix(rel, "hack/") {
			continue
		}
		if !strings.Contains(string(design), "`"+rel+"`") {
			t.Errorf("docs/design.md does not name package %s", rel)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "(docs/design.md)") {
		t.Error("README.md does not link docs/design.md")
	}
	if strings.Contains(string(readme), "DESIGN.md") {
		t.Error("README.md still names DESIGN.md, which is not in the repository")
	}
}
