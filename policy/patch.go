package policy

import (
	"slices"

	"github.com/wsfs/wsfs/identity"
)

// Patch changes some fields of a Spec, leaving the others as they are. It is
// what `wsfs session policy ID --mode M --add-root P=A --protect S` and the
// daemon's PATCH /v1/sessions/{id}/policy carry.
type Patch struct {
	// Mode replaces the mode when not empty.
	Mode Mode `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Additional roots are added; one naming the same physical directory as
	// an existing root (the same path, or a spelling with the same
	// canonical path) replaces that root's access instead.
	Additional []Root `json:"additional,omitempty" yaml:"additional,omitempty"`
	// Protected subpaths are added to the list in force (to
	// DefaultProtected when the spec has none set); duplicates are dropped.
	Protected []string `json:"protected,omitempty" yaml:"protected,omitempty"`
}

// Empty reports whether p changes nothing.
func (p Patch) Empty() bool {
	return p.Mode == "" && len(p.Additional) == 0 && len(p.Protected) == 0
}

// CheckLimits refuses a patch that alone is over a count limit of Spec
// (MaxAdditional, MaxProtected), as Compile would refuse the patched spec
// and with the same message, before any merging: Apply's cost grows with
// the patch (MergeRoot compares each added root with the others).
func (p Patch) CheckLimits() error {
	return CheckCounts(len(p.Additional), 0, len(p.Protected))
}

// Apply returns s with p applied; s itself is not modified. Apply does not
// check the result: Compile does.
func (s Spec) Apply(p Patch) Spec {
	out := s
	if p.Mode != "" {
		out.Mode = p.Mode
	}
	out.Additional = slices.Clone(s.Additional)
	for _, r := range p.Additional {
		out.Additional = MergeRoot(out.Additional, r)
	}
	if len(p.Protected) > 0 {
		prot := s.Protected
		if prot == nil {
			prot = DefaultProtected
		}
		out.Protected = slices.Clone(prot)
		have := make(map[string]bool, len(prot)+len(p.Protected))
		for _, sub := range prot {
			have[sub] = true
		}
		for _, sub := range p.Protected {
			if !have[sub] {
				have[sub] = true
				out.Protected = append(out.Protected, sub)
			}
		}
	}
	return out
}

// MergeRoot returns roots with r added, or, when a root names the same
// directory (the same path, or one whose canonical path is r.Path), with
// that root replaced by r. roots itself is not modified. r.Path should be
// canonical (identity.Canonical) for the second comparison to apply.
func MergeRoot(roots []Root, r Root) []Root {
	out := slices.Clone(roots)
	for i, have := range out {
		if have.Path == r.Path {
			out[i].Access = r.Access
			return out
		}
		if c, err := identity.Canonical(have.Path); err == nil && c == r.Path {
			out[i] = r
			return out
		}
	}
	return append(out, r)
}
