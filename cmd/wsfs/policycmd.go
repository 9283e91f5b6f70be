package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/resolver"
)

func init() { registerCommand(newPolicyCmd) }

// newPolicyCmd returns the `wsfs policy` verb group: check and show.
func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check and show sandbox policies",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errUsage("policy: missing subcommand (check or show)")
		},
	}
	cmd.AddCommand(newPolicyCheckCmd(), newPolicyShowCmd())
	return cmd
}

// loadPolicy reads and compiles the policy file path. Every failure is bad
// input (exit code 2) and names the file.
func loadPolicy(path string) (*policy.Policy, error) {
	spec, err := loadPolicySpec(path)
	if err != nil {
		return nil, err
	}
	p, err := policy.Compile(spec)
	if err != nil {
		return nil, errUsage("policy file %s: %s", path, strings.TrimPrefix(firstLine(err.Error()), "policy: "))
	}
	return p, nil
}

// loadPolicySpec reads the policy file path (JSON or YAML with the
// policy.Spec field names). Every failure is bad input (exit code 2) and
// names the file.
func loadPolicySpec(path string) (policy.Spec, error) {
	if path == "" {
		return policy.Spec{}, errUsage("--policy: missing FILE")
	}
	spec, err := policy.LoadFile(path)
	if err != nil {
		// One form for every policy file error, as loadPolicy's:
		// "policy file X: line 2: unknown field ...".
		msg := strings.TrimPrefix(firstLine(err.Error()), "policy: "+path+": ")
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, "yaml: "), "json: ")
		return policy.Spec{}, errUsage("policy file %s: %s", path, msg)
	}
	return spec, nil
}

// checkResult is one line of `wsfs policy check --json`.
type checkResult struct {
	Path  string     `json:"path"`
	Key   string     `json:"key,omitempty"`
	Op    string     `json:"op"`
	Allow *bool      `json:"allow,omitempty"`
	Errno *string    `json:"errno,omitempty"`
	Rule  string     `json:"rule,omitempty"`
	Error *pathError `json:"error,omitempty"`
}

// newPolicyCheckCmd returns the `wsfs policy check` verb.
func newPolicyCheckCmd() *cobra.Command {
	var file, opName string
	cmd := &cobra.Command{
		Use:   "check --policy FILE [--op OP] PATH...",
		Short: "Print the policy's decision for an operation on each PATH",
		Long: `Compile the policy FILE and print its decision for --op on each PATH, one line
per path: the path, allow or deny, the errno a denial gives (- when allowed)
and the rule that decided, separated by tabs.

Each PATH is first resolved to its physical key (as 'wsfs resolve' does, relative
to the current directory), so a symlink or a second spelling is checked as the
object it reaches. OP is one of: ` + strings.Join(policy.Ops(), ", ") + `.
With --json, one object per line: {"path","key","op","allow","errno","rule"}
(errno "" when allowed), or {"path","op","error":{"errno","message"}} for a
path that cannot be resolved (exit code 1). A denial is not a failure: the exit
code is 0 when every path was checked.`,
		Args: minArgs(1, "PATH argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, ok := policy.ParseOp(opName)
			if !ok {
				return errUsage("--op %q: unknown operation (one of %s)", opName, strings.Join(policy.Ops(), ", "))
			}
			for i, p := range args {
				if p == "" {
					return errUsage("policy check: PATH argument %d is blank", i+1)
				}
			}
			pol, err := loadPolicy(file)
			if err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("current directory: %w", err)
			}
			r := resolver.Resolver{Default: wd}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			asJSON := jsonOutput(cmd)
			failed := false
			for _, p := range args {
				t, err := r.Resolve(cmd.Context(), p, resolver.Options{})
				if err != nil {
					failed = true
					if asJSON {
						writeJSON(out, checkResult{Path: p, Op: op.String(), Error: newPathError(err)})
					} else {
						fmt.Fprintf(errOut, "wsfs: policy check: %s\n", firstLine(err.Error()))
					}
					continue
				}
				d := pol.Decide(op, t.Key)
				errno := ""
				if !d.Allow {
					errno = identity.ErrnoName(d.Errno)
				}
				if asJSON {
					allow := d.Allow
					writeJSON(out, checkResult{Path: p, Key: t.Key, Op: op.String(), Allow: &allow, Errno: &errno, Rule: d.Rule})
					continue
				}
				verdict, errnoText := "allow", "-"
				if !d.Allow {
					verdict, errnoText = "deny", errno
				}
				fmt.Fprintf(out, "%s\t%s\t%s\t%s\n", p, verdict, errnoText, d.Rule)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "policy", "", "policy FILE, JSON or YAML (required)")
	cmd.Flags().StringVar(&opName, "op", "write", "operation to check: "+strings.Join(policy.Ops(), ", "))
	return cmd
}

// shownSpec is policy.Spec as `wsfs policy show` prints it: every field
// present, empty lists included, so the output read back as a policy file is
// the same policy (an absent temp or protected list would mean the defaults);
// outside is left out when empty (the mode decides), as a policy file
// leaves it out.
type shownSpec struct {
	Mode       policy.Mode   `json:"mode" yaml:"mode"`
	Primary    string        `json:"primary" yaml:"primary"`
	Additional []policy.Root `json:"additional" yaml:"additional"`
	Temp       []string      `json:"temp" yaml:"temp"`
	Protected  []string      `json:"protected" yaml:"protected"`
	Outside    policy.Access `json:"outside,omitempty" yaml:"outside,omitempty"`
}

// newShownSpec returns s with nil lists made empty.
func newShownSpec(s policy.Spec) shownSpec {
	orEmpty := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	add := s.Additional
	if add == nil {
		add = []policy.Root{}
	}
	return shownSpec{Mode: s.Mode, Primary: s.Primary, Additional: add, Temp: orEmpty(s.Temp), Protected: orEmpty(s.Protected), Outside: s.Outside}
}

// newPolicyShowCmd returns the `wsfs policy show` verb.
func newPolicyShowCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "show --policy FILE",
		Short: "Print the compiled policy: canonical roots, defaults filled in",
		Long: `Compile the policy FILE and print it as YAML (as JSON on one line with
--json): the mode, the canonical primary root, the additional roots, the temp
area and the protected subpaths, with every default filled in, and outside
when it is none, so the output is itself a policy file for the same policy.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pol, err := loadPolicy(file)
			if err != nil {
				return err
			}
			spec := newShownSpec(pol.Spec())
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), spec)
				return nil
			}
			enc := yaml.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent(2)
			if err := enc.Encode(spec); err != nil {
				return err
			}
			return enc.Close()
		},
	}
	cmd.Flags().StringVar(&file, "policy", "", "policy FILE, JSON or YAML (required)")
	return cmd
}
