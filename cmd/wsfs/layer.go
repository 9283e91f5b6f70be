package main

// `wsfs session diff`, `commit`, `discard`, `checkpoint`, `checkpoints` and
// `rollback`: the verbs of a session on a copy-on-write layer (session
// create --layer); `wsfs layer diff`, `commit` and `discard`: those of the
// layer of a single mount (wsfs mount --layer DIR).

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// newSessionDiffCmd returns `wsfs session diff`.
func newSessionDiffCmd() *cobra.Command {
	var stat bool
	cmd := &cobra.Command{
		Use:   "diff ID [PATH...]",
		Short: "Show what a layered session changed",
		Long: `List what session ID (created with --layer) changed in its layer, compared
with the project, under each PATH (relative to the root, or absolute inside the
root or the mountpoint; every change when none), parents before their children
(GET /v1/sessions/{id}/diff). One line per path: a letter (A added, D deleted,
M modified, T type changed, R renamed directory or file), the path, its type,
what a modification changed (content, target, mode, owner, xattr), "from OLD"
for a renamed path, "linked with P,Q" for a file of several names in the
session (its hard links; a commit makes them one file in the project too) and
"CONFLICT: ..." when the host changed the path since the session's first write
there; then, unless --stat, the unified diff of each
modified, added or deleted text file (these two against /dev/null; at most
16 MiB of diffs, the last one may end past it). --json prints the API's object (with the diffs).`,
		Args: minArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session diff", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			res, err := c.Diff(cmd.Context(), args[0], args[1:], !stat)
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), res)
				return nil
			}
			printChanges(cmd.OutOrStdout(), res.Changes, !stat)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "the list of paths only, no unified diffs")
	return cmd
}

// kindLetter is the one-letter code of a change kind.
var kindLetter = map[string]string{
	"added": "A", "deleted": "D", "modified": "M", "type_changed": "T", "renamed": "R",
}

// printChanges prints one line per change, then with text the diffs.
func printChanges(w io.Writer, cs []api.Change, text bool) {
	for _, c := range cs {
		line := kindLetter[c.Kind] + " " + c.Path + " (" + c.Type
		if len(c.Fields) > 0 {
			line += ": " + strings.Join(c.Fields, ",")
		}
		line += ")"
		if c.From != "" {
			line += " from " + c.From
		}
		if len(c.Links) > 0 {
			line += " linked with " + strings.Join(c.Links, ",")
		}
		if c.Conflict != "" {
			line += " CONFLICT: " + c.Conflict
		}
		fmt.Fprintln(w, line)
	}
	if !text {
		return
	}
	for _, c := range cs {
		if c.Diff != "" {
			io.WriteString(w, c.Diff)
		}
	}
}

// printLayerResult prints a commit's or discard's result: one line per
// path applied ("verb PATH"), one per path left ("left PATH: reason").
func printLayerResult(w io.Writer, verb string, r api.LayerResult) {
	for _, p := range r.Applied {
		fmt.Fprintf(w, "%s %s\n", verb, p)
	}
	for _, p := range r.Conflicts {
		fmt.Fprintf(w, "conflict %s: %s\n", p.Path, p.Reason)
	}
	for _, p := range r.Refused {
		fmt.Fprintf(w, "refused %s: %s\n", p.Path, p.Reason)
	}
}

// newSessionCommitCmd returns `wsfs session commit`.
func newSessionCommitCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "commit ID [PATH...]",
		Short: "Apply a layered session's changes to the project",
		Long: `Apply what session ID (created with --layer) changed under each PATH (every
change when none) to the project (POST /v1/sessions/{id}/commit): parents
first, each path through the session's policy in force now, each file written
beside its target and renamed over it. A path the host changed since the
session's first write there is a conflict: left in the layer unless --force,
which overwrites the host's change. The session's hard links are committed
as hard links, a file it renamed unchanged as a rename (with its old path).
In a session with --users the commit acts with those users' rights, not
root's. Prints "committed PATH" per path applied, "conflict PATH: why" and
"refused PATH: why" per path left in the layer (what lies below a directory
left is left too). Exit code 1 when a path was left, 0 otherwise.`,
		Args: minArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session commit", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			res, err := c.Commit(cmd.Context(), args[0], args[1:], force)
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), res)
			} else {
				printLayerResult(cmd.OutOrStdout(), "committed", res)
			}
			if len(res.Refused)+len(res.Conflicts) > 0 {
				return &reportedError{code: exitFailure}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "commit paths in conflict too, overwriting the host's change")
	return cmd
}

// newSessionDiscardCmd returns `wsfs session discard`.
func newSessionDiscardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "discard ID [PATH...]",
		Short: "Undo a layered session's changes in its layer",
		Long: `Undo what session ID (created with --layer) changed under each PATH (every
change when none), in its layer (POST /v1/sessions/{id}/discard): what it
added is removed, what it changed or deleted is copied back from the project.
The project is not touched. Prints "discarded PATH" per path undone and
"refused PATH: why" per path that could not be; exit code 1 when one could
not.`,
		Args: minArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session discard", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			res, err := c.Discard(cmd.Context(), args[0], args[1:])
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), res)
			} else {
				printLayerResult(cmd.OutOrStdout(), "discarded", res)
			}
			if len(res.Refused) > 0 {
				return &reportedError{code: exitFailure}
			}
			return nil
		},
	}
}

// newSessionCheckpointCmd returns `wsfs session checkpoint`.
func newSessionCheckpointCmd() *cobra.Command {
	var del bool
	cmd := &cobra.Command{
		Use:   "checkpoint ID NAME",
		Short: "Take (or with --delete remove) a checkpoint of a layered session",
		Long: `Take checkpoint NAME of session ID (created with --layer): a copy of what the
session changed so far (its layer, every attribute included) and of its
baseline, kept in the daemon's state until removed (--delete, or with the
session) and across daemon restarts (POST /v1/sessions/{id}/checkpoints).
The session runs on meanwhile. NAME is 1 to 64 of A-Z a-z 0-9 . _ - and does
not start with '.'. Prints "checkpoint NAME: FILES objects, BYTES bytes"
(--json: the API's object). With --delete, removes checkpoint NAME instead
(DELETE /v1/sessions/{id}/checkpoints/{name}) and prints "removed NAME".
See session rollback and session checkpoints.`,
		Args: exactArgs(2, "session ID and checkpoint NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session checkpoint", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			if del {
				if err := c.DeleteCheckpoint(cmd.Context(), args[0], args[1]); err != nil {
					return apiFailure(cmd, err)
				}
				if jsonOutput(cmd) {
					writeJSON(cmd.OutOrStdout(), map[string]string{"session": args[0], "removed": args[1]})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[1])
				}
				return nil
			}
			ck, err := c.Checkpoint(cmd.Context(), args[0], args[1])
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), ck)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s: %d objects, %d bytes\n", ck.Name, ck.Files, ck.Bytes)
			return nil
		},
	}
	cmd.Flags().BoolVar(&del, "delete", false, "remove checkpoint NAME instead of taking it")
	return cmd
}

// newSessionCheckpointsCmd returns `wsfs session checkpoints`.
func newSessionCheckpointsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints ID",
		Short: "List a layered session's checkpoints",
		Long: `List the checkpoints of session ID (created with --layer), oldest first, as a
table (NAME, CREATED, OBJECTS, BYTES), or with --json as
{"session","checkpoints":[...]} (GET /v1/sessions/{id}/checkpoints).`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session checkpoints", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			cs, err := c.Checkpoints(cmd.Context(), args[0])
			if err != nil {
				return apiFailure(cmd, err)
			}
			if cs == nil {
				cs = []api.Checkpoint{}
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), api.CheckpointList{Session: args[0], Checkpoints: cs})
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tOBJECTS\tBYTES")
			for _, ck := range cs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", ck.Name, ck.Created.Format(time.RFC3339), ck.Files, ck.Bytes)
			}
			return tw.Flush()
		},
	}
}

// newSessionRollbackCmd returns `wsfs session rollback`.
func newSessionRollbackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback ID NAME",
		Short: "Make a layered session's view what it was at a checkpoint",
		Long: `Make what session ID (created with --layer) sees what it saw when checkpoint
NAME was taken, over the project as it is now, and its baseline the
checkpoint's (POST /v1/sessions/{id}/rollback). Its processes run on: the
kernel's caches of the session's mounts are dropped, so each one's next
operation sees the checkpoint's tree; one whose working directory the
checkpoint lacks gets ENOENT there, as after an rm -rf. Paths equal in both
are not touched. The checkpoint stays (roll back to it again, or remove it
with session checkpoint --delete). Prints "restored PATH" per path changed,
"refused PATH: why" per path that could not be; exit code 1 when one could
not.`,
		Args: exactArgs(2, "session ID and checkpoint NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session rollback", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			res, err := c.Rollback(cmd.Context(), args[0], args[1])
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), res)
			} else {
				printLayerResult(cmd.OutOrStdout(), "restored", api.LayerResult{Applied: res.Applied, Refused: res.Refused})
			}
			if len(res.Refused) > 0 {
				return &reportedError{code: exitFailure}
			}
			return nil
		},
	}
}

func init() { registerCommand(newLayerCmd) }

// newLayerCmd returns `wsfs layer`: the verbs of the layer of a single
// mount (wsfs mount --layer DIR), which has no daemon API.
func newLayerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "layer diff|commit|discard --layer DIR [PATH...]",
		Short: "Diff, commit or discard the layer of wsfs mount --layer DIR",
		Long: `The verbs of a layer directory that wsfs mount --layer DIR served, run while
no mount serves it (a layer in use is refused: the mount keeps the layer's
baseline and its kernel caches in memory; stop the mount first). They are the
session verbs (session diff, commit, discard) on the same layer code: DIR's
layer.json names the project the layer was made for (it must still be that
directory) and the policy of the last wsfs mount that served it, through
which a commit applies each path, as a session's commit applies its
session's. PATH is relative to the project, or absolute inside the project or
the last mountpoint; none means every change. Needs root (the layer is the
kernel's overlayfs, mounted at DIR/merged while a verb runs). A daemon
session's layer (<state-dir>/layers/ID) is refused: its session's verbs
reach it.`,
	}
	cmd.AddCommand(newLayerDiffCmd(), newLayerCommitCmd(), newLayerDiscardCmd())
	return cmd
}

// layerDirChanges is `wsfs layer diff --json`'s object.
type layerDirChanges struct {
	Layer   string       `json:"layer"`
	Changes []api.Change `json:"changes"`
}

// layerDirResult is `wsfs layer commit|discard --json`'s object.
type layerDirResult struct {
	Layer     string          `json:"layer"`
	Applied   []string        `json:"applied"`
	Refused   []api.PathError `json:"refused,omitempty"`
	Conflicts []api.PathError `json:"conflicts,omitempty"`
}

// withLayerDir opens --layer DIR (mounts.OpenLayerDir), resolves the
// PATH arguments against its project and last mountpoint, runs f, and
// closes the layer. A layer in use is a runtime failure (exit 1); any
// other refusal is bad input (exit 2).
func withLayerDir(dir string, paths []string, f func(l *mounts.Layer, info mounts.LayerInfo, rels []string) error) error {
	if dir == "" {
		return errUsage("--layer: required (the directory wsfs mount --layer was given)")
	}
	l, info, err := mounts.OpenLayerDir(dir)
	if err != nil {
		if mounts.CodeOf(err) == mounts.CodeBusy {
			return err
		}
		return errUsage("%v", err)
	}
	defer l.Close()
	rels, err := mounts.LayerPaths(info.Lower, info.Mountpoint, paths)
	if err != nil {
		return errUsage("layer %q: %v", dir, err)
	}
	return f(l, info, rels)
}

// newLayerDiffCmd returns `wsfs layer diff`.
func newLayerDiffCmd() *cobra.Command {
	var dir string
	var stat bool
	cmd := &cobra.Command{
		Use:   "diff --layer DIR [PATH...] [--stat]",
		Short: "Show what the layer of wsfs mount --layer DIR changed",
		Long: `List what the layer DIR changed, compared with its project, under each PATH
(every change when none), as session diff lists it: one line per path (A, D,
M, T, R, the path, its type, what changed, CONFLICT: ...), then, unless --stat,
the unified diff of each modified, added or deleted text file. --json:
{"layer","changes"}.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLayerDir(dir, args, func(l *mounts.Layer, info mounts.LayerInfo, rels []string) error {
				cs, err := l.DiffPaths(cmd.Context(), rels, !stat)
				if err != nil {
					return err
				}
				if jsonOutput(cmd) {
					writeJSON(cmd.OutOrStdout(), layerDirChanges{Layer: dir, Changes: cs})
					return nil
				}
				printChanges(cmd.OutOrStdout(), cs, !stat)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&dir, "layer", "", "the layer directory wsfs mount --layer served (required)")
	cmd.Flags().BoolVar(&stat, "stat", false, "the list of paths only, no unified diffs")
	return cmd
}

// newLayerCommitCmd returns `wsfs layer commit`.
func newLayerCommitCmd() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "commit --layer DIR [PATH...] [--force]",
		Short: "Apply the changes of the layer of wsfs mount --layer DIR to its project",
		Long: `Apply what the layer DIR changed under each PATH (every change when none) to
its project, as session commit does: parents first, each path through the
policy of the last wsfs mount that served the layer (recorded in
DIR/layer.json), each file written beside its target and renamed over it. A
path the host changed since the mount's first write there is a conflict,
left in the layer unless --force. Prints "committed PATH", "conflict PATH:
why", "refused PATH: why"; exit code 1 when a path was left.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLayerDir(dir, args, func(l *mounts.Layer, info mounts.LayerInfo, rels []string) error {
				pol, err := policy.Compile(*info.Policy)
				if err != nil {
					return errUsage("layer %q: the recorded policy: %v", dir, err)
				}
				res, err := l.CommitPaths(rels, force, pol)
				if err != nil {
					return err
				}
				return printLayerDirResult(cmd, dir, "committed", res)
			})
		},
	}
	cmd.Flags().StringVar(&dir, "layer", "", "the layer directory wsfs mount --layer served (required)")
	cmd.Flags().BoolVar(&force, "force", false, "commit paths in conflict too, overwriting the host's change")
	return cmd
}

// newLayerDiscardCmd returns `wsfs layer discard`.
func newLayerDiscardCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "discard --layer DIR [PATH...]",
		Short: "Undo the changes of the layer of wsfs mount --layer DIR",
		Long: `Undo what the layer DIR changed under each PATH (every change when none), in
the layer, as session discard does: what it added is removed, what it changed
or deleted is copied back from the project. The project is not touched.
Prints "discarded PATH" and "refused PATH: why"; exit code 1 when a path
could not be undone.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLayerDir(dir, args, func(l *mounts.Layer, info mounts.LayerInfo, rels []string) error {
				res, err := l.DiscardPaths(rels)
				if err != nil {
					return err
				}
				return printLayerDirResult(cmd, dir, "discarded", res)
			})
		},
	}
	cmd.Flags().StringVar(&dir, "layer", "", "the layer directory wsfs mount --layer served (required)")
	return cmd
}

// printLayerDirResult prints a commit's or discard's result of the layer
// dir (printLayerResult; --json: layerDirResult) and returns the exit
// status: 1 when a path was left.
func printLayerDirResult(cmd *cobra.Command, dir, verb string, res api.LayerResult) error {
	if jsonOutput(cmd) {
		writeJSON(cmd.OutOrStdout(), layerDirResult{Layer: dir, Applied: res.Applied, Refused: res.Refused, Conflicts: res.Conflicts})
	} else {
		printLayerResult(cmd.OutOrStdout(), verb, res)
	}
	if len(res.Refused)+len(res.Conflicts) > 0 {
		return &reportedError{code: exitFailure}
	}
	return nil
}
