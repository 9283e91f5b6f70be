package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/policy"
)

// protectHelp is the --protect flag's help, shared by the verbs that build
// a policy: git's names need no flag (policy.GitNames, the repository rule).
var protectHelp = "protect SUBPATH of each writable root (e.g. .env; git's " + strings.Join(policy.GitNames, ", ") +
	" in every git directory are always protected) (repeatable)"

// policyPatch reads the policy flags every verb that builds or changes a
// policy shares (`wsfs mount`, `wsfs session create`, `wsfs session
// policy`) into a policy.Patch: --mode when given on cmd, each --add-root
// (canonical path; one naming a root already there changes its access, see
// policy.MergeRoot; two flags naming the same directory are refused), each --protect (a non-empty path relative to each
// root). Apply it with policy.Spec.Apply. Every error is a usage error
// naming the flag and the value.
func policyPatch(cmd *cobra.Command, mode string, addRoots, protect []string) (policy.Patch, error) {
	var patch policy.Patch
	if cmd.Flags().Changed("mode") {
		m, err := parseMode(mode)
		if err != nil {
			return policy.Patch{}, err
		}
		patch.Mode = m
	}
	given := map[string]string{} // canonical path -> the flag value that named it
	for _, ar := range addRoots {
		r, err := parseAddRoot(ar)
		if err != nil {
			return policy.Patch{}, err
		}
		// As in a policy file: a root given twice is refused, not merged
		// (the last flag would silently win, e.g. none then rw).
		if first, ok := given[r.Path]; ok {
			return policy.Patch{}, errUsage("--add-root %q: the same directory as --add-root %q (%s): explicit roots must not overlap", ar, first, r.Path)
		}
		given[r.Path] = ar
		patch.Additional = append(patch.Additional, r)
	}
	for _, p := range protect {
		if p == "" || filepath.IsAbs(p) {
			return policy.Patch{}, errUsage("--protect %q: must be a non-empty path relative to each root", p)
		}
		patch.Protected = append(patch.Protected, p)
	}
	return patch, nil
}
