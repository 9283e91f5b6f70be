package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/identity"
)

// fuzzDirs are the directories of the fuzz tree; roots, temp entries and
// paths are built from them.
var fuzzDirs = []string{"p", "p/x", "p/x/y", "p/.git", "p/.git/hooks", "q", "q/z", "r"}

// fuzzComponents are what a fuzzed path is made of: the tree's names, a
// missing one, and the shapes Decide must refuse.
var fuzzComponents = []string{"p", "x", "y", ".git", "hooks", "q", "z", "r", "new", ".", "..", ""}

var fuzzProtect = []string{".git", ".git/hooks", "x", "x/y", "new/deep", "z"}

// fuzzSpec builds a spec over root from fuzz bytes: the mode, up to three
// additional roots with their access, the temp list, protected entries.
func fuzzSpec(root string, in []byte) Spec {
	at := func(i int) int {
		if i < len(in) {
			return int(in[i])
		}
		return 0
	}
	modes := []Mode{ModeWorkspaceWrite, ModeReadOnly, ModeFullAccess, ""}
	accesses := []Access{AccessReadOnly, AccessReadWrite, AccessNone}
	s := Spec{Mode: modes[at(0)%len(modes)], Primary: filepath.Join(root, fuzzDirs[at(1)%len(fuzzDirs)])}
	for i := 0; i < at(2)%4; i++ {
		s.Additional = append(s.Additional, Root{
			Path:   filepath.Join(root, fuzzDirs[at(3+2*i)%len(fuzzDirs)]),
			Access: accesses[at(4+2*i)%len(accesses)],
		})
	}
	switch at(9) % 3 {
	case 0:
		s.Temp = []string{}
	case 1:
		s.Temp = []string{filepath.Join(root, fuzzDirs[at(10)%len(fuzzDirs)])}
	} // else nil: the default temp area
	if n := at(11) % 4; n > 0 {
		s.Protected = []string{}
		for i := 0; i < n; i++ {
			s.Protected = append(s.Protected, fuzzProtect[at(12+i)%len(fuzzProtect)])
		}
	}
	return s
}

// FuzzDecide compiles fuzzed specs over a fixed tree and decides fuzzed
// paths: no panic; both lookups (root scan and ancestor index) agree; a
// decision is well formed (an allow has no errno, a refusal one of EROFS,
// EACCES, EPERM; a rule always); what may be written may be read; a compiled
// spec survives a JSON round trip into the same decisions.
func FuzzDecide(f *testing.F) {
	root, err := identity.Canonical(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range fuzzDirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	f.Add([]byte{0, 0, 1, 5, 2, 0, 0, 0, 0, 0, 0, 0}, []byte{0, 1, 2}, byte(1), false)
	f.Add([]byte{1, 0, 3, 5, 1, 7, 2, 1, 0, 1, 6, 2, 0, 1}, []byte{0, 3, 4, 8}, byte(9), true)
	f.Add([]byte{2, 1, 2, 0, 2, 6, 1, 0, 0, 2, 0, 3, 0, 3, 4}, []byte{0, 1, 10, 10, 5}, byte(4), false)
	f.Add([]byte{0, 0, 0}, []byte{0, 3}, byte(7), false)
	f.Fuzz(func(t *testing.T, specIn, pathIn []byte, opIn byte, abs bool) {
		spec := fuzzSpec(root, specIn)
		p, err := Compile(spec)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Compile(%+v): a multi-line error %q", spec, err)
			}
			return
		}
		parts := make([]string, 0, len(pathIn))
		for _, b := range pathIn[:min(len(pathIn), 12)] {
			parts = append(parts, fuzzComponents[int(b)%len(fuzzComponents)])
		}
		path := strings.Join(parts, "/")
		if abs || len(path) == 0 || path[0] != '.' {
			path = root + "/" + path
		}
		op := Op(int(opIn) % int(numOps))

		d := p.Decide(op, path)
		gs := p.prot.cur.Load()
		for _, ancestor := range []bool{false, true} {
			if len(path) > 0 && path[0] == '/' && canonical(strings.TrimSuffix(path, "/")) && path != "/" {
				c := strings.TrimSuffix(path, "/")
				a1, g1, above1 := p.lookupScan(gs, c, ancestor)
				a2, g2, above2 := p.lookupIndex(gs, c, ancestor)
				if a1 != a2 || g1 != g2 || above1 != above2 {
					t.Fatalf("lookup %q (ancestors %v) under %+v: scan (%v, %v, %v), index (%v, %v, %v)", c, ancestor, spec, a1.path, g1, above1, a2.path, g2, above2)
				}
			}
		}
		switch {
		case d.Rule == "":
			t.Fatalf("%v %q: no rule in %+v", op, path, d)
		case d.Allow && d.Errno != 0:
			t.Fatalf("%v %q: allowed with errno %v", op, path, d.Errno)
		case !d.Allow && d.Errno != syscall.EROFS && d.Errno != syscall.EACCES && d.Errno != syscall.EPERM:
			t.Fatalf("%v %q: refused with errno %v", op, path, d.Errno)
		}
		if w := p.Decide(OpWrite, path); w.Allow && !p.Decide(OpRead, path).Allow {
			t.Fatalf("%q: writable but not readable under %+v", path, spec)
		}

		data, err := json.Marshal(p.Spec())
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseJSON(data)
		if err != nil {
			t.Fatalf("the compiled spec %s does not parse back: %v", data, err)
		}
		p2, err := Compile(back)
		if err != nil {
			t.Fatalf("the compiled spec %s does not compile again: %v", data, err)
		}
		if d2 := p2.Decide(op, path); d != d2 {
			t.Fatalf("%v %q: %+v, after a JSON round trip %+v", op, path, d, d2)
		}
	})
}

// quoted matches a Go-quoted (%q) string in an error message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// FuzzParseSpec feeds arbitrary bytes to the policy file parsers: no panic,
// every error one line in user terms (no Go type, no YAML tag), and what
// parses survives a JSON round trip.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		`{"mode": "read-only", "primary": "/w", "additional": [{"path": "/x", "access": "rw"}], "temp": [], "protected": [".git"]}`,
		"mode: read-only\nprimary: /w\nadditional:\n  - {path: /x, access: none}\ntemp: [/tmp]\n",
		"primary: [a]\n", "- 1\n", "a: &x [1]\nb: *x\n", `{"temp": "x"}`, "", "~", "primary: /w\n---\nx: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, parse := range map[string]func([]byte) (Spec, error){"json": ParseJSON, "yaml": ParseYAML} {
			s, err := parse(data)
			if err != nil {
				msg := err.Error()
				// Quoted parts are the user's own text (a field named
				// "0!!" is theirs to name), not the parser's terms.
				bare := quoted.ReplaceAllString(msg, `""`)
				if strings.Contains(msg, "\n") || strings.Contains(bare, "policy.") || strings.Contains(bare, "!!") || strings.Contains(bare, "Go ") {
					t.Fatalf("%s %q: error not one line in user terms: %q", name, data, msg)
				}
				continue
			}
			out, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseJSON(out)
			if err != nil {
				t.Fatalf("%s %q parsed to %s, which does not parse back: %v", name, data, out, err)
			}
			if again, _ := json.Marshal(back); string(again) != string(out) {
				t.Fatalf("%s %q: %s, after a round trip %s", name, data, out, again)
			}
		}
	})
}
