package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts"
)

// Exit codes of every verb.
const (
	exitOK      = 0 // success
	exitFailure = 1 // a runtime failure (or, for per-path verbs, any path failed)
	exitUsage   = 2 // bad usage or bad input: flags, arguments, input files
)

// usageError is an error caused by bad usage or bad input (an unknown flag, a
// missing argument, a malformed policy file, an unknown mode). run maps it to
// exit code 2. Every verb reports bad input with errUsage or asUsage.
type usageError struct{ err error }

// Error returns the message.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *usageError) Unwrap() error { return e.err }

// errUsage returns a usage error (exit code 2) with a formatted one-line
// message. Like fmt.Errorf, %w wraps an error.
func errUsage(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// asUsage marks err as a usage error (exit code 2); nil stays nil.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &usageError{err: err}
}

// isUsage reports whether err is (or wraps) a usage error.
func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

// reportedError is returned by a verb that has already reported its failures
// itself (per-path lines on stderr, or error objects in its --json output):
// run exits with code and prints nothing more.
type reportedError struct{ code int }

// Error describes the failure; run never prints it.
func (e *reportedError) Error() string { return fmt.Sprintf("failed (exit %d)", e.code) }

// errReported is the reportedError of a verb where at least one item failed.
var errReported error = &reportedError{code: exitFailure}

// run executes the wsfs command line args with the process's standard
// streams and returns the exit code.
func run(args []string) int { return runWith(args, os.Stdout, os.Stderr) }

// runWith executes the wsfs command line args, writing output to stdout and
// errors to stderr, and returns the exit code: 0 ok, 1 runtime failure, 2 bad
// usage or input. A failure is printed as one line "wsfs: <message>" on
// stderr; with --json the same error is also printed on stdout as
// {"error":{"code":...,"message":...}}.
func runWith(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is runWith with a context: cancelling ctx stops a long-running
// verb (wsfs mount unmounts and returns) as SIGINT would.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(strings.NewReader(""))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return asUsage(err) })

	// An error returned before a verb's RunE started (unknown command, flag
	// parsing, argument validation) is a usage error: mark entry into RunE.
	entered := false
	wrapRunE(root, &entered)

	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Usage()
		return exitUsage
	}

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var rep *reportedError
	if errors.As(err, &rep) {
		return rep.code
	}
	if !entered {
		err = asUsage(err)
	}
	code := exitCode(err)
	msg := withSuggestions(err.Error())
	fmt.Fprintf(stderr, "wsfs: %s\n", msg)
	if cmd == nil {
		cmd = root
	}
	if jsonOutput(cmd) || argsWantJSON(args) {
		writeJSON(stdout, map[string]any{"error": errorObject{Code: errorCode(err), Message: msg}})
	}
	return code
}

// wrapRunE wraps the RunE of c and its subcommands so that *entered is set
// once a verb's own code runs.
func wrapRunE(c *cobra.Command, entered *bool) {
	if c.RunE != nil {
		inner := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*entered = true
			return inner(cmd, args)
		}
	} else if c.Run != nil {
		inner := c.Run
		c.Run = func(cmd *cobra.Command, args []string) {
			*entered = true
			inner(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub, entered)
	}
}

// errorObject is the JSON form of an error: {"code":..., "message":...}.
type errorObject struct {
	// Code is one of the daemon API's error codes (mounts.Code): "invalid"
	// for bad usage or input (exit code 2), "busy" for a busy mount, the code
	// of a *mounts.Error, else "internal".
	Code    string `json:"code"`
	Message string `json:"message"`
	// Errno is the errno's name when the failure is one ("ELOOP",
	// "ENOTDIR", "EACCES"), as in `wsfs resolve --json`.
	Errno string `json:"errno,omitempty"`
}

// errorCode classifies err for errorObject.Code.
func errorCode(err error) string {
	if isUsage(err) {
		return string(mounts.CodeInvalid)
	}
	var busy *fusefs.BusyError
	if errors.As(err, &busy) {
		return string(mounts.CodeBusy)
	}
	return string(mounts.CodeOf(err))
}

// exitCode returns the exit code for a verb's error: 2 for bad usage or
// input (a usageError, or a *mounts.Error with code "invalid"), else 1.
func exitCode(err error) int {
	if isUsage(err) || mounts.CodeOf(err) == mounts.CodeInvalid {
		return exitUsage
	}
	return exitFailure
}

// firstLine returns the first non-blank line of s, dropping the rest
// (cobra's "unknown command" error, for one, carries suggestions on further
// lines).
// withSuggestions is firstLine of a cobra error, with the suggestions cobra
// puts on the lines after an unknown command ("\n\nDid you mean
// this?\n\tsession\n") kept on the one line: `unknown command "sesion"
// for "wsfs"; did you mean session?`.
func withSuggestions(s string) string {
	head, rest, ok := strings.Cut(s, "\n\nDid you mean this?\n")
	if !ok {
		return firstLine(s)
	}
	var names []string
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return firstLine(head)
	}
	return firstLine(head) + "; did you mean " + strings.Join(names, " or ") + "?"
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return strings.TrimSpace(s)
}

// jsonOutput reports whether --json was given to cmd (the flag is persistent
// on the root command, so every verb has it).
func jsonOutput(cmd *cobra.Command) bool {
	v, err := cmd.Flags().GetBool("json")
	return err == nil && v
}

// argsWantJSON reports whether --json appears among args before "--"; used
// when flag parsing itself failed, so the parsed value is not available.
func argsWantJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// writeJSON writes v to w as one line of JSON. Paths are printed as is: no
// HTML escaping of <, > and &.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// noArgs is cobra.NoArgs with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		// A verb group (session): a mistyped verb, as cobra says it for
		// the root command.
		msg := fmt.Sprintf("%s: unknown subcommand %q", verbName(cmd), args[0])
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return errUsage("%s", msg)
	}
	return errUsage("%s: unexpected argument %q", verbName(cmd), args[0])
}

// minArgs is cobra.MinimumNArgs with a usage error naming what is missing:
// names[i] names argument i, and only the names of arguments not given are
// listed ("missing PATH" when the ID was given).
func minArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			missing := names
			if len(args) < len(names) {
				missing = names[len(args):]
			}
			return errUsage("%s: missing %s", verbName(cmd), strings.Join(missing, " and "))
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs with a usage error naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return errUsage("%s: missing %s", verbName(cmd), what)
		case len(args) > n:
			return errUsage("%s: unexpected argument %q", verbName(cmd), args[n])
		}
		return nil
	}
}

// verbName is the command's path without the program name ("session cwd"),
// since every error line already starts with "wsfs: ".
func verbName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}
