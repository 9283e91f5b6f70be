package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/mounts/client"
	"github.com/wsfs/wsfs/policy"
)

func init() { registerCommand(newSessionCmd) }

// newSessionCmd returns the `wsfs session` verb group, the daemon's client.
func newSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, list, show, remove and steer sessions of a running `wsfs serve`",
		Long: `Client verbs of the wsfs daemon (wsfs serve), over its Unix socket.

A refusal by the daemon is printed as one line "wsfs: <message>" on stderr (and,
with --json, as {"error":{"code","message"}} on stdout, with the daemon's stable
code: invalid, not_found, exists, busy, origin_gone, root_changed, failed, forbidden, ...).
Exit codes: 0 ok, 2 bad input (codes invalid and too_large, bad flags), 1 any
other failure (including an unreachable daemon).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errUsage("session: missing subcommand (create, list, show, rm, policy, cwd, resolve, events, sync, diff, commit, discard, checkpoint, checkpoints or rollback)")
		},
	}
	cmd.PersistentFlags().String("socket", client.DefaultSocket(), "the daemon's Unix socket")
	cmd.AddCommand(newSessionCreateCmd(), newSessionListCmd(), newSessionShowCmd(), newSessionRmCmd(),
		newSessionPolicyCmd(), newSessionCwdCmd(), newSessionResolveCmd(), newSessionEventsCmd(), newSessionSyncCmd(),
		newSessionDiffCmd(), newSessionCommitCmd(), newSessionDiscardCmd(),
		newSessionCheckpointCmd(), newSessionCheckpointsCmd(), newSessionRollbackCmd())
	return cmd
}

// newSessionSyncCmd returns `wsfs session sync`.
func newSessionSyncCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sync ID...",
		Short: "Wait until every host change made so far is visible in sessions",
		Long: `Return once every change made on the host before the call (files written by
the host's own tools, an IDE, a git checkout outside the mount) is visible
through each session's mount, host view and jail views (POST
/v1/sessions/{id}/sync). The mount learns of host changes asynchronously (a
moment later, usually well under a second); a host that writes files itself
and then hands their paths to a tool in the session runs this in between.
Prints "synced ID" for each (--json: {"session":ID}). Stops at the first
failure.`,
		Args: minArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := checkID("session sync", id); err != nil {
					return err
				}
			}
			c := daemonClient(cmd)
			defer c.Close()
			for _, id := range args {
				if err := c.Sync(cmd.Context(), id); err != nil {
					return apiFailure(cmd, err)
				}
				if jsonOutput(cmd) {
					writeJSON(cmd.OutOrStdout(), api.Synced{Session: id})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "synced %s\n", id)
				}
			}
			return nil
		},
	}
}

// daemonClient returns a client of the socket named by cmd's --socket flag.
func daemonClient(cmd *cobra.Command) *client.Client {
	socket, _ := cmd.Flags().GetString("socket")
	if socket == "" {
		socket = client.DefaultSocket()
	}
	return client.New(socket)
}

// apiFailure reports err, an error from the daemon or from reaching it, and
// returns the reportedError that gives its exit code: one line "wsfs: ..."
// on stderr, and with --json {"error":{"code","message"}} on stdout with the
// daemon's code ("unreachable" when the daemon could not be reached).
// Exit code 2 for bad input (invalid, too_large), 1 otherwise.
func apiFailure(cmd *cobra.Command, err error) error {
	msg := firstLine(err.Error())
	code := string(api.CodeOf(err))
	if _, ok := err.(*api.Error); !ok {
		code = "unreachable"
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			msg += " (is `wsfs serve` running? its socket: --socket or $WSFS_SOCKET)"
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: %s\n", msg)
	if jsonOutput(cmd) {
		// The errno the daemon's answer carries (api.ErrorObject.Errno),
		// as the API gives it.
		writeJSON(cmd.OutOrStdout(), map[string]any{"error": errorObject{Code: code, Message: msg, Errno: identity.ErrnoName(err)}})
	}
	switch api.CodeOf(err) {
	case api.CodeInvalid, api.CodeTooLarge:
		if code != "unreachable" && !deniedByPermission(err) {
			return &reportedError{code: exitUsage}
		}
	}
	return &reportedError{code: exitFailure}
}

// deniedByPermission reports whether a refusal carries EACCES or EPERM (the
// session's policy, the host view's rules or the host's permissions said
// no): the input was well-formed, so it exits as a runtime failure (1),
// not as a usage error, though the API's code is "invalid".
func deniedByPermission(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// checkID refuses a malformed session id argument before asking the daemon.
func checkID(what, id string) error {
	if err := mounts.ValidID(id); err != nil {
		return errUsage("%s: %s", what, err)
	}
	return nil
}

// newSessionCreateCmd returns `wsfs session create`.
func newSessionCreateCmd() *cobra.Command {
	var root, mountpoint, mode, symlinks, parent, cwd, policyFile, usersFlag string
	var addRoots, protect, allowWrite []string
	var layer bool
	cmd := &cobra.Command{
		Use:   "create ID --root DIR [--mountpoint DIR] [--mode M] [--add-root PATH=ro|rw|none]... [--protect SUBPATH]... [--symlinks MODE] [--parent ID | --cwd DIR] [--policy FILE] [--allow-write DIR]... [--users UID[,UID...]]",
		Short: "Create and mount a session",
		Long: `Create session ID: mount the physical root of --root (symlinks and ".."
resolved as the kernel does) at --mountpoint (default <mount-base>/ID), with the
policy built from --policy FILE (JSON or YAML) as a base and --mode, --add-root
and --protect overriding or adding to it. The working directory starts at the
mount root, at the --parent session's current directory, or at --cwd (relative
to the mount root). With --parent, the policy and symlink mode not given here
are the parent's, and the new session may not be granted more than the parent.
--layer runs the session on a copy-on-write layer (session diff, commit,
discard); a sub-session of a layered session runs on its parent's layer
(--layer with --parent is refused).
--users lists the uids besides root that may use the session's mounts (made
allow_other; every other uid gets EACCES, logged; objects belong to their
creator); its jails may run as one of them (exec --confine --user UID).
Prints one line (session, physical root, mountpoint, mode, cwd); with --json
the session object (see "session show").`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := checkID("session create", id); err != nil {
				return err
			}
			var spec policy.Spec
			if policyFile != "" {
				var err error
				if spec, err = loadPolicySpec(policyFile); err != nil {
					return err
				}
			}
			if root == "" {
				root = spec.Primary
			}
			if root == "" {
				return errUsage("session create: --root: missing DIR")
			}
			rootAbs, err := baseDir(root)
			if err != nil {
				return err
			}
			spec.Primary = ""
			patch, err := policyPatch(cmd, mode, addRoots, protect)
			if err != nil {
				return err
			}
			spec = spec.Apply(patch)
			sl := fusefs.SymlinkMode("")
			if symlinks != "" {
				if sl, err = fusefs.ParseSymlinkMode(symlinks); err != nil {
					return errUsage("--symlinks: %s", err)
				}
			}
			if parent != "" && cwd != "" {
				return errUsage("session create: --parent and --cwd: give at most one")
			}
			if parent != "" {
				if err := checkID("--parent", parent); err != nil {
					return err
				}
			}
			mp := mountpoint
			if mp != "" {
				if mp, err = baseDir(mp); err != nil {
					return err
				}
			}
			var aw []string
			for _, w := range allowWrite {
				a, err := baseDir(w)
				if err != nil {
					return err
				}
				aw = append(aw, a)
			}
			users, err := fusefs.ParseUsers(usersFlag)
			if err != nil {
				return errUsage("--%s", err)
			}
			c := daemonClient(cmd)
			defer c.Close()
			p := mounts.APIPolicy(spec)
			s, err := c.Create(cmd.Context(), api.CreateRequest{
				ID: id, Root: rootAbs, Mountpoint: mp, Policy: &p,
				Symlinks: string(sl), Parent: parent, Cwd: cwd, AllowWrite: aw, Users: users, Layer: layer,
			})
			var ae *api.Error
			if errors.As(err, &ae) && strings.Contains(ae.Message, ": allow_write ") {
				// The API's field is the CLI's flag: name the flag.
				err = &api.Error{Code: ae.Code, Message: strings.Replace(ae.Message, ": allow_write ", ": --allow-write ", 1), Err: err}
			}
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), s)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "session %s: %s mounted at %s (%s), cwd %s\n", s.ID, s.Root, s.Mountpoint, s.Mode, s.Cwd)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&root, "root", "", "project directory (default: the policy file's primary)")
	fl.StringVar(&mountpoint, "mountpoint", "", "where to mount (default: <mount-base>/ID)")
	fl.StringVar(&mode, "mode", "", "sandbox mode: read-only, workspace-write (default), full-access")
	fl.StringArrayVar(&addRoots, "add-root", nil, "additional root PATH=ro|rw|none (repeatable)")
	fl.StringArrayVar(&protect, "protect", nil, protectHelp)
	fl.StringVar(&symlinks, "symlinks", "", "symlink mode: contain (default, or the parent's), follow")
	fl.StringVar(&parent, "parent", "", "start in this session's current directory, with its policy (narrowed by the flags above)")
	fl.StringVar(&cwd, "cwd", "", "start in this directory (relative to the mount root, or absolute)")
	fl.StringVar(&policyFile, "policy", "", "policy file (JSON or YAML) as a base")
	fl.StringArrayVar(&allowWrite, "allow-write", nil, "a directory the session's jails (exec --confine) may write directly, e.g. a build cache (repeatable)")
	fl.StringVar(&usersFlag, "users", "", "uids besides root that may use the session's mounts, comma-separated (allow_other; others get EACCES)")
	fl.BoolVar(&layer, "layer", false, "run on a copy-on-write layer: the project changes only at `session commit` (see `session diff`, `session discard`)")
	return cmd
}

// The session verbs' one output convention: text for people by default
// (one line for a verb that changes something, "field: value" lines for
// show, a table for list), the API's JSON object on one line with --json.

// printSession prints s for `session show`: one line of JSON with --json,
// else one "field: value" line per field that is set.
func printSession(cmd *cobra.Command, s api.Session) {
	if jsonOutput(cmd) {
		writeJSON(cmd.OutOrStdout(), s)
		return
	}
	w := cmd.OutOrStdout()
	field := func(name, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s: %s\n", name, v)
		}
	}
	field("id", s.ID)
	field("state", s.State)
	field("error", s.Error)
	field("origin", s.Origin)
	field("root", s.Root)
	field("mountpoint", s.Mountpoint)
	field("policy", policyText(s.Policy))
	field("symlinks", s.Symlinks)
	field("parent", s.Parent)
	field("cwd", s.Cwd)
	field("cwd_physical", s.CwdPhysical)
	field("tmpdir", s.TmpDir)
	field("allow_write", strings.Join(s.AllowWrite, " "))
	field("layer", s.Layer)
	field("layer_of", s.LayerOf)
	field("transport", s.Transport)
	if len(s.Users) > 0 {
		field("users", strings.Trim(fmt.Sprint(s.Users), "[]"))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		field("label "+k, s.Labels[k])
	}
	field("created", s.Created.Format(time.RFC3339Nano))
}

// policyText is a policy on one line: the mode, each additional root as
// PATH=ACCESS, the outside when set, the protected subpaths.
func policyText(p api.Policy) string {
	parts := []string{p.Mode}
	for _, r := range p.Additional {
		parts = append(parts, r.Path+"="+r.Access)
	}
	if p.Outside != "" {
		parts = append(parts, "outside="+p.Outside)
	}
	if len(p.Protected) > 0 {
		parts = append(parts, "protected "+strings.Join(p.Protected, ","))
	}
	if len(p.ProtectedOutside) > 0 {
		parts = append(parts, "protected outside "+strings.Join(p.ProtectedOutside, ","))
	}
	if len(p.ProtectedRepos) > 0 {
		parts = append(parts, "protected repositories "+strings.Join(p.ProtectedRepos, ","))
	}
	return strings.Join(parts, ", ")
}

// newSessionListCmd returns `wsfs session list`.
func newSessionListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sessions",
		Long: `List the daemon's sessions as a table (ID, STATE, MODE, MOUNTPOINT, CWD,
ROOT), or with --json as {"sessions":[...]}.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := daemonClient(cmd)
			defer c.Close()
			list, err := c.List(cmd.Context())
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				if list == nil {
					list = []api.Session{}
				}
				writeJSON(cmd.OutOrStdout(), api.SessionList{Sessions: list})
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tMODE\tMOUNTPOINT\tCWD\tROOT")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, s.Mode, s.Mountpoint, s.Cwd, s.Root)
			}
			return tw.Flush()
		},
	}
}

// newSessionShowCmd returns `wsfs session show`.
func newSessionShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Print a session",
		Long: `Print session ID, one "field: value" line each: id, state ("mounted" or
"failed"), error, origin (the root as given), root (physical), mountpoint,
policy (mode, additional roots, protected subpaths), symlinks, parent, cwd (as
last set: the path processes use, inside the mount or, outside the root,
inside the session's host view), cwd_physical, tmpdir, allow_write, users,
labels, created. With --json the API's session object on one line.`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session show", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			s, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return apiFailure(cmd, err)
			}
			printSession(cmd, s)
			return nil
		},
	}
}

// newSessionRmCmd returns `wsfs session rm`.
func newSessionRmCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm ID... [--force]",
		Short: "Unmount and remove sessions",
		Long: `Unmount each session, remove the mountpoint the daemon made, and delete its
record, event log and temp directory. A busy mount is refused (code busy, the
message names the processes holding it) unless --force, which detaches it
lazily. A layered session is refused (code busy), --force or not, while
sub-sessions run on its layer: remove them first. Prints "removed ID" for each (--json: {"id":ID,"removed":true}).
Stops at the first failure.`,
		Args: minArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := checkID("session rm", id); err != nil {
					return err
				}
			}
			c := daemonClient(cmd)
			defer c.Close()
			for _, id := range args {
				if err := c.Remove(cmd.Context(), id, force); err != nil {
					var ae *api.Error
					if errors.As(err, &ae) && ae.Code == api.CodeBusy && strings.Contains(ae.Message, " is busy") {
						// The API's message names no spelling of force
						// (a query parameter there, a flag here). Only
						// for a busy mount (fusefs.BusyError's words):
						// a layer its sub-sessions serve is busy too,
						// and --force does not change that.
						err = &api.Error{Code: ae.Code, Message: ae.Message + " (use --force to detach lazily)", Err: err}
					}
					return apiFailure(cmd, err)
				}
				if jsonOutput(cmd) {
					writeJSON(cmd.OutOrStdout(), map[string]any{"id": id, "removed": true})
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", id)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "detach a busy mount lazily")
	return cmd
}

// newSessionPolicyCmd returns `wsfs session policy`.
func newSessionPolicyCmd() *cobra.Command {
	var file, mode string
	var addRoots, protect []string
	cmd := &cobra.Command{
		Use:   "policy ID [--policy FILE] [--mode M] [--add-root PATH=ro|rw|none]... [--protect SUBPATH]...",
		Short: "Change a session's policy, live",
		Long: `Change session ID's policy, live: every process's next operation in the mount
(already running ones included) sees the new policy, in either direction (a
read-only session can be widened: mounts are never kernel read-only).

With --policy FILE (JSON or YAML; primary may be left out, it is the
session's root) the whole policy is replaced by FILE with the flags below
applied to it. Without a file the flags change the policy in force:
--mode replaces the mode, --add-root adds a root or changes the access of
one naming the same directory, --protect adds a protected subpath. A policy
that does not compile is refused and the old one stays in force. Prints one
line (session, the policy in force); with --json the session object.`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session policy", args[0]); err != nil {
				return err
			}
			patch, err := policyPatch(cmd, mode, addRoots, protect)
			if err != nil {
				return err
			}
			if file == "" && patch.Empty() {
				return errUsage("session policy: give --policy FILE, --mode, --add-root or --protect")
			}
			c := daemonClient(cmd)
			defer c.Close()
			var s api.Session
			if file != "" {
				spec, lerr := loadPolicySpec(file)
				if lerr != nil {
					return lerr
				}
				s, err = c.SetPolicy(cmd.Context(), args[0], mounts.APIPolicy(spec.Apply(patch)))
			} else {
				s, err = c.PatchPolicy(cmd.Context(), args[0], mounts.APIPatch(patch))
			}
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), s)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "session %s: policy %s\n", s.ID, policyText(s.Policy))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&file, "policy", "", "policy file (JSON or YAML) replacing the whole policy")
	fl.StringVar(&mode, "mode", "", "sandbox mode: read-only, workspace-write, full-access")
	fl.StringArrayVar(&addRoots, "add-root", nil, "add a root PATH=ro|rw|none, or change its access (repeatable)")
	fl.StringArrayVar(&protect, "protect", nil, "protect SUBPATH of each writable root, in addition to the list in force (repeatable)")
	return cmd
}

// newSessionCwdCmd returns `wsfs session cwd`.
func newSessionCwdCmd() *cobra.Command {
	var cd string
	cmd := &cobra.Command{
		Use:   "cwd ID [--cd PATH]",
		Short: "Print (or change) a session's working directory",
		Long: `Print session ID's working directory: the path processes use (inside the
mount, or inside the session's host view) and the physical path, separated by
a tab. With --cd, change it first: PATH is relative to the session's working
directory (walked from its physical path: ".." at the mount root is the
root's parent), absolute inside the mount or the host view, or an absolute host path, and must
be an existing directory the session may read, inside its roots or outside
them. Outside the root the directory is shown through the host view
(<mount-base>/@host/ID/PATH; inside exec --confine at its own path), so the
policy still decides every write there: a working directory is not a write
grant (outside the roots, EROFS in workspace-write). A none root, or a place
the host view hides (/tmp but the session's temp directory, the daemon's
state and mount base), is refused with errno EACCES.
A directory that vanished, or that the session may no longer read, recovers
to the mount root (a "recover" event); when the origin is gone too the
command fails (code origin_gone).
With --json: {"session","path","physical","changed","events"}.`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session cwd", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			var wd api.WorkDir
			var err error
			if cmd.Flags().Changed("cd") {
				wd, err = c.Chdir(cmd.Context(), args[0], cd)
			} else {
				wd, err = c.Cwd(cmd.Context(), args[0])
			}
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), wd)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", wd.Path, wd.Physical)
			return nil
		},
	}
	cmd.Flags().StringVar(&cd, "cd", "", "change to PATH first")
	return cmd
}

// newSessionResolveCmd returns `wsfs session resolve`.
func newSessionResolveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resolve ID PATH...",
		Short: "Resolve paths as a process in the session sees them",
		Long: `Resolve each PATH as a process in session ID would: relative to the session's
working directory, walked physically from its physical path as in the jail
(".." at the mount root is the root's parent, not the mount base). Prints one line
per path: the display path, the physical key, and the write decision
("write=allow", or the errno of the denial: "write=EROFS", "write=EACCES"),
with its rule in parentheses ("write=EACCES (protected:git:.git/hooks)"),
separated by tabs. With --json, one object per line: {"session","path","cwd","display",
"key","mount_path","read","write"}. Exit code 1 if any path failed.`,
		Args: minArgs(2, "session ID", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := checkID("session resolve", id); err != nil {
				return err
			}
			for i, p := range args[1:] {
				if strings.TrimSpace(p) == "" {
					return errUsage("session resolve: PATH argument %d is blank", i+1)
				}
			}
			c := daemonClient(cmd)
			defer c.Close()
			out := cmd.OutOrStdout()
			failed := false
			for _, p := range args[1:] {
				res, err := c.Resolve(cmd.Context(), id, p)
				if err != nil {
					var me *api.Error
					if e, ok := err.(*api.Error); ok && e.Code == api.CodeInvalid {
						me = e
					}
					if me == nil {
						return apiFailure(cmd, err)
					}
					failed = true
					if jsonOutput(cmd) {
						writeJSON(out, map[string]any{"session": id, "path": p, "error": errorObject{Code: string(me.Code), Message: me.Message, Errno: identity.ErrnoName(me)}})
					} else {
						fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: %s\n", firstLine(me.Message))
					}
					continue
				}
				if jsonOutput(cmd) {
					writeJSON(out, res)
					continue
				}
				fmt.Fprintf(out, "%s\t%s\t%s\n", res.Display, res.Key, decisionText("write", res.Write))
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
}

// decisionText renders a decision as "op=allow (rule)" or "op=ERRNO (rule)".
func decisionText(op string, d api.Decision) string {
	v := "allow"
	if !d.Allow {
		v = d.Errno
	}
	return fmt.Sprintf("%s=%s (%s)", op, v, d.Rule)
}

// newSessionEventsCmd returns `wsfs session events`.
func newSessionEventsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "events ID",
		Short: "Print a session's working-directory events",
		Long: `Print session ID's working-directory log, oldest first, as a table (SEQ,
TIME, TYPE, FROM, TO, REASON), or with --json as {"session","events":[...]}.
Types: "cd" (a change) and "recover" (the directory vanished; back to the
mount root).`,
		Args: exactArgs(1, "session ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkID("session events", args[0]); err != nil {
				return err
			}
			c := daemonClient(cmd)
			defer c.Close()
			events, err := c.Events(cmd.Context(), args[0])
			if err != nil {
				return apiFailure(cmd, err)
			}
			if jsonOutput(cmd) {
				if events == nil {
					events = []api.Event{}
				}
				writeJSON(cmd.OutOrStdout(), api.EventList{Session: args[0], Events: events})
				return nil
			}
			return printEvents(cmd.OutOrStdout(), events)
		},
	}
}

// printEvents prints events as a table.
func printEvents(w io.Writer, events []api.Event) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tFROM\tTO\tREASON")
	for _, e := range events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format("2006-01-02T15:04:05.000Z07:00"), e.Type, e.From, e.To, e.Reason)
	}
	return tw.Flush()
}
