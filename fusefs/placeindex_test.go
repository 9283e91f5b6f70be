package fusefs

import "testing"

// TestPlaceIndex: a place held by another owner hides itself and what lies
// below it, not its ancestors or its owner's view; a place held by two
// owners stays hidden from the first until both remove it; Conflict names
// the innermost place a path lies in, or the first place it contains.
func TestPlaceIndex(t *testing.T) {
	x := NewPlaceIndex()
	if err := x.Add("a", "rel/path"); err == nil || err.Error() != `hidden place "rel/path": must be an absolute path` {
		t.Fatalf("Add relative: %v", err)
	}
	if err := x.Add("a", "/w/a", "/m/a"); err != nil {
		t.Fatal(err)
	}
	if err := x.Add("b", "/w/b/", "/w/a/in"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p, except string
		want      int
	}{
		{"/w/a/x", "b", len("/w/a")},
		{"/w/a/in/x", "b", len("/w/a")},
		{"/w/a/x", "a", -1},
		{"/w/a/in/x", "a", len("/w/a/in")},
		{"/w", "b", -1},
		{"/w/b", "a", len("/w/b")},
		{"/w/bb", "a", -1},
	} {
		if got := x.innermostLen(c.p, c.except); got != c.want {
			t.Errorf("innermostLen(%q, %q) = %d, want %d", c.p, c.except, got, c.want)
		}
	}
	for _, c := range []struct {
		dir, except string
		want        bool
	}{
		{"/w", "a", true}, {"/w", "c", true}, {"/w/a", "a", true}, {"/w/a", "b", false}, {"/m", "a", false}, {"/m", "b", true}, {"/", "a", true},
	} {
		if got := x.hasUnder(c.dir, c.except); got != c.want {
			t.Errorf("hasUnder(%q, %q) = %v, want %v", c.dir, c.except, got, c.want)
		}
	}
	if place, owner, rel, ok := x.Conflict("/w/a/in/deep", "c"); !ok || place != "/w/a/in" || owner != "b" || rel != "lies in" {
		t.Errorf("Conflict(/w/a/in/deep, c) = %q %q %q %v", place, owner, rel, ok)
	}
	if place, owner, rel, ok := x.Conflict("/w", "c"); !ok || place != "/w/a" || owner != "a" || rel != "contains" {
		t.Errorf("Conflict(/w, c) = %q %q %q %v", place, owner, rel, ok)
	}
	if _, _, _, ok := x.Conflict("/m", "a"); ok {
		t.Errorf("Conflict(/m, a): found one; a's own place only")
	}
	if err := x.Add("c", "/w/a"); err != nil {
		t.Fatal(err)
	}
	x.Remove("a")
	if got := x.innermostLen("/w/a/x", "b"); got != len("/w/a") {
		t.Errorf("after a's remove, c still holds /w/a: innermostLen = %d", got)
	}
	if x.hasUnder("/m", "b") {
		t.Errorf("after a's remove: /m/a still hidden")
	}
	x.Remove("b")
	x.Remove("c")
	x.Remove("never")
	if len(x.holders) != 0 || len(x.below) != 0 || len(x.owned) != 0 {
		t.Errorf("after every remove: holders %v below %v owned %v, want empty", x.holders, x.below, x.owned)
	}
}
