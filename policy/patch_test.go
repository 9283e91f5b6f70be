package policy

import (
	"reflect"
	"testing"
)

func TestSpecApply(t *testing.T) {
	dir := t.TempDir()
	base := Spec{Mode: ModeReadOnly, Primary: dir, Additional: []Root{{Path: "/a", Access: AccessNone}}}
	got := base.Apply(Patch{
		Mode:       ModeWorkspaceWrite,
		Additional: []Root{{Path: "/a", Access: AccessReadWrite}, {Path: "/b", Access: AccessReadOnly}},
		Protected:  []string{".env", ".git/hooks"},
	})
	want := Spec{Mode: ModeWorkspaceWrite, Primary: dir,
		Additional: []Root{{Path: "/a", Access: AccessReadWrite}, {Path: "/b", Access: AccessReadOnly}},
		Protected:  []string{".env", ".git/hooks"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Apply:\n got %+v\nwant %+v", got, want)
	}
	if base.Additional[0].Access != AccessNone || base.Protected != nil {
		t.Errorf("Apply modified its receiver: %+v", base)
	}
	if got := base.Apply(Patch{}); !reflect.DeepEqual(got, base) {
		t.Errorf("Apply(empty) = %+v, want %+v", got, base)
	}
	if !(Patch{}).Empty() || (Patch{Protected: []string{"x"}}).Empty() {
		t.Error("Patch.Empty wrong")
	}
	// An explicit empty protected list stays the base for additions.
	none := Spec{Primary: dir, Protected: []string{}}
	if got := none.Apply(Patch{Protected: []string{".env"}}).Protected; !reflect.DeepEqual(got, []string{".env"}) {
		t.Errorf("Apply to an empty protected list = %v, want [.env]", got)
	}
}
