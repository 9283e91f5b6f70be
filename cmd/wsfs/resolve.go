package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/resolver"
)

func init() { registerCommand(newResolveCmd) }

// resolveResult is one line of `wsfs resolve --json`: either Display and Key,
// or Error.
type resolveResult struct {
	Path    string     `json:"path"`
	Cwd     string     `json:"cwd"`
	Display string     `json:"display,omitempty"`
	Key     string     `json:"key,omitempty"`
	Error   *pathError `json:"error,omitempty"`
}

// pathError is the JSON form of a per-path failure.
type pathError struct {
	// Errno is the errno's name ("ELOOP", "ENOTDIR"), empty when the failure
	// carries none.
	Errno   string `json:"errno,omitempty"`
	Message string `json:"message"`
}

// newPathError returns the JSON form of err.
func newPathError(err error) *pathError {
	return &pathError{Errno: identity.ErrnoName(err), Message: firstLine(err.Error())}
}

// newResolveCmd returns the `wsfs resolve` verb.
func newResolveCmd() *cobra.Command {
	var cwd string
	cmd := &cobra.Command{
		Use:   "resolve [--cwd DIR] PATH...",
		Short: "Print the display path and the physical key of each PATH",
		Long: `Resolve each PATH the way the kernel walks it and print one line per path:
the display path (as spelled, joined to the base) and the key (the canonical
physical path, or for a path that does not exist yet the canonical path of its
nearest existing ancestor plus the missing rest), separated by a tab.

A relative PATH is taken against --cwd, or the current directory. With --json,
each path gives one JSON object per line: {"path","cwd","display","key"}, or
{"path","cwd","error":{"errno","message"}}. Exit code 1 if any path failed.`,
		Args: minArgs(1, "PATH argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for i, p := range args {
				if p == "" {
					return errUsage("resolve: PATH argument %d is blank", i+1)
				}
			}
			base, err := baseDir(cwd)
			if err != nil {
				return err
			}
			r := resolver.Resolver{Default: base}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			asJSON := jsonOutput(cmd)
			failed := false
			for _, p := range args {
				t, err := r.Resolve(cmd.Context(), p, resolver.Options{})
				if err != nil {
					failed = true
					if asJSON {
						writeJSON(out, resolveResult{Path: p, Cwd: base, Error: newPathError(err)})
					} else {
						fmt.Fprintf(errOut, "wsfs: %s\n", firstLine(err.Error()))
					}
					continue
				}
				if asJSON {
					writeJSON(out, resolveResult{Path: p, Cwd: base, Display: t.Display, Key: t.Key})
				} else {
					fmt.Fprintf(out, "%s\t%s\n", t.Display, t.Key)
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "base directory for relative paths (default: the current directory)")
	return cmd
}

// baseDir returns the base directory for relative paths: dir when given
// (made absolute against the working directory without cleaning, so that a
// ".." in it keeps its physical meaning), else the working directory. This is
// the one place the CLI decides a default base.
func baseDir(dir string) (string, error) {
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("current directory: %w", err)
	}
	if dir == "" {
		return wd, nil
	}
	// Getwd is "/" at the root: join without doubling the separator.
	return strings.TrimSuffix(wd, string(filepath.Separator)) + string(filepath.Separator) + dir, nil
}
