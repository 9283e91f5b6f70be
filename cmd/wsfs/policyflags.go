package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/policy"
)

// applyPolicyFlags applies the policy flags every verb that builds a policy
// shares (`wsfs mount`, `wsfs session create`) to spec, in this order:
// --mode when given on cmd, each --add-root (a flag overrides the file's
// access for the same root, see mergeRoot), each --protect (added to the
// file's list, or to policy.DefaultProtected when the file has none). Every
// error is a usage error naming the flag and the value.
func applyPolicyFlags(cmd *cobra.Command, spec *policy.Spec, mode string, addRoots, protect []string) error {
	if cmd.Flags().Changed("mode") {
		m, err := parseMode(mode)
		if err != nil {
			return err
		}
		spec.Mode = m
	}
	for _, ar := range addRoots {
		r, err := parseAddRoot(ar)
		if err != nil {
			return err
		}
		spec.Additional = mergeRoot(spec.Additional, r)
	}
	if len(protect) > 0 {
		if spec.Protected == nil {
			spec.Protected = append([]string(nil), policy.DefaultProtected...)
		}
		for _, p := range protect {
			if p == "" || filepath.IsAbs(p) {
				return errUsage("--protect %q: must be a non-empty path relative to each root", p)
			}
			spec.Protected = append(spec.Protected, p)
		}
	}
	return nil
}
