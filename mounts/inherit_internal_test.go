package mounts

import (
	"reflect"
	"testing"

	"github.com/wsfs/wsfs/policy"
)

// What a child keeps of its parent outside its writable roots: the
// parent's writable roots that are not the child's own, one nested below
// the child's root included (the policy never protects a repository below
// a root by identity); the protected places under the parent's writable
// roots only (none under a read-only one), those under a child's root it
// only reads included.
func TestOutsideOfParent(t *testing.T) {
	ps := policy.Spec{Mode: policy.ModeFullAccess, Primary: "/w/proj", Protected: []string{"f"},
		Additional: []policy.Root{{Path: "/w/a", Access: policy.AccessReadWrite}, {Path: "/w/ro", Access: policy.AccessReadOnly}}}
	for _, c := range []struct {
		child         []string
		repos, places []string
	}{
		{[]string{"/w"}, []string{"/w/proj", "/w/a"}, nil},
		{[]string{"/w/proj"}, []string{"/w/a"}, []string{"/w/a/f"}},
		{[]string{"/w/proj/d"}, []string{"/w/proj", "/w/a"}, []string{"/w/proj/f", "/w/a/f"}},
	} {
		if got := outsideRepos(ps, c.child); !reflect.DeepEqual(got, c.repos) {
			t.Errorf("outsideRepos(child %v) = %v, want %v", c.child, got, c.repos)
		}
		if got := outsideProtected(ps, c.child); !reflect.DeepEqual(got, c.places) {
			t.Errorf("outsideProtected(child %v) = %v, want %v", c.child, got, c.places)
		}
	}
}
