package client

import (
	"context"
	"os"
	"os/exec"
	"strconv"
)

// ExecOptions are Command's options. The zero value runs the command
// confined, as the session's owner, with the wsfs binary from $WSFS_BIN or
// $PATH.
type ExecOptions struct {
	// Unconfined runs the command without the jail (wsfs exec without
	// --confine): in the session's working directory inside its mount,
	// but able to write anywhere its user can by any path outside it, and
	// seeing mountpoint paths (README, "The jail"). Not recommended.
	Unconfined bool
	// BestEffort is --confine=best-effort: Landlock alone when bwrap is
	// missing.
	BestEffort bool
	// User, when not 0, runs the jail as this uid (wsfs exec --user); the
	// session must list it (CreateRequest.Users).
	User uint32
	// AllowWrite are further directories the jail may write directly
	// (wsfs exec --allow-write), e.g. a build cache.
	AllowWrite []string
	// Env are further environment variables for the jail (wsfs exec
	// --env): "NAME" passes the caller's NAME, "NAME=VALUE" sets it. A
	// jail's environment holds only an allow-list of the caller's (PATH,
	// HOME, TERM, the locale...: confine.PassedEnv) besides these; the
	// unconfined command gets the whole of Cmd.Env. The names the jail
	// sets itself (confine.JailSetEnv) are refused (exit code 2).
	Env []string
	// Binary is the wsfs binary; "" is $WSFS_BIN, else "wsfs" in $PATH.
	Binary string
}

// Command returns the command that runs args in session id the way a tool
// should run there: `wsfs exec --socket SOCKET --session ID --confine --
// ARGS...`, which starts args[0] in the session's working directory (its
// physical path, inside the jail), with WSFS_SESSION, WSFS_ROOT and TMPDIR
// (the session's private temp directory) set, and paths meaning what they
// mean on the host (no mountpoint path gets recorded in what the tool
// writes). Stdin, stdout, stderr, Env (nil: this process's) and the rest
// are the caller's to set before Start, as for exec.CommandContext;
// cancelling ctx kills the jail. The exit status is args[0]'s, or 126 (the
// jail could not be completed) and 127 (args[0] not found), as wsfs exec
// documents.
func (c *Client) Command(ctx context.Context, id string, args []string, opt ExecOptions) *exec.Cmd {
	bin := opt.Binary
	if bin == "" {
		if bin = os.Getenv("WSFS_BIN"); bin == "" {
			bin = "wsfs"
		}
	}
	argv := []string{"exec", "--socket", c.socket, "--session", id}
	switch {
	case opt.Unconfined:
	case opt.BestEffort:
		argv = append(argv, "--confine=best-effort")
	default:
		argv = append(argv, "--confine")
	}
	if opt.User != 0 {
		argv = append(argv, "--user", strconv.FormatUint(uint64(opt.User), 10))
	}
	for _, w := range opt.AllowWrite {
		argv = append(argv, "--allow-write", w)
	}
	if !opt.Unconfined {
		for _, e := range opt.Env {
			argv = append(argv, "--env", e)
		}
	}
	argv = append(append(argv, "--"), args...)
	return exec.CommandContext(ctx, bin, argv...)
}
