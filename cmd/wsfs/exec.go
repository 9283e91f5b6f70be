package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/client"
)

func init() { registerCommand(newExecCmd) }

// The --confine values.
const (
	confineNone       = ""
	confineStrict     = "strict"
	confineBestEffort = "best-effort"
)

// exitNotFound is the exit code when the command cannot be found or
// executed, as shells use it.
const exitNotFound = 127

// newExecCmd returns the `wsfs exec` verb.
func newExecCmd() *cobra.Command {
	var id, confine string
	cmd := &cobra.Command{
		Use:   "exec --session ID [--confine[=best-effort]] -- CMD [ARGS...]",
		Short: "Run a command in a session's working directory inside its mount",
		Long: `Run CMD in session ID's current working directory inside its mount (asked from
the daemon, validated: a vanished directory recovers to the mount root), with
WSFS_SESSION (the id) and WSFS_ROOT (the mountpoint) in its environment. wsfs
replaces itself with CMD, so CMD's exit status is the exit status.

FUSE sees only what goes through the mount: an absolute path elsewhere, or
".." above the mount root, never reaches it. --confine therefore also puts the
process tree under Landlock before CMD starts: writable only the mountpoint,
the session's private temp directory (exported as TMPDIR) and /dev/null;
readable (and executable) everything else, so a write anywhere else — the
backing directory by its physical path included — fails with EACCES. On a
kernel without Landlock (ABI 2, Linux 5.19, is needed) --confine fails;
--confine=best-effort then runs the command with what the kernel has (or
unconfined, with a warning).

Exit codes: CMD's own; 127 when CMD cannot be found or executed; 2 bad usage;
1 when the daemon refuses or confinement fails.`,
		Args: minArgs(1, "CMD after --"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd, id, confine, args)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.StringVar(&id, "session", "", "session id (required)")
	fl.StringVar(&confine, "confine", confineNone, "apply Landlock: strict (the default of a bare --confine) or best-effort")
	fl.Lookup("confine").NoOptDefVal = confineStrict
	fl.String("socket", client.DefaultSocket(), "the daemon's Unix socket")
	return cmd
}

// runExec asks the daemon for the session's directory, confines the process
// when asked, and replaces it with the command.
func runExec(cmd *cobra.Command, id, confine string, args []string) error {
	if id == "" {
		return errUsage("exec: --session: missing ID")
	}
	if err := checkID("exec --session", id); err != nil {
		return err
	}
	switch confine {
	case confineNone, confineStrict, confineBestEffort:
	default:
		return errUsage("exec: --confine=%s: want --confine or --confine=best-effort", confine)
	}
	c := daemonClient(cmd)
	wd, err := c.Cwd(cmd.Context(), id)
	if err != nil {
		return apiFailure(cmd, err)
	}
	s, err := c.Get(cmd.Context(), id)
	if err != nil {
		return apiFailure(cmd, err)
	}
	c.Close()

	env := setEnv(os.Environ(), "WSFS_SESSION", id)
	env = setEnv(env, "WSFS_ROOT", s.Mountpoint)
	env = setEnv(env, "PWD", wd.Path)
	if confine != confineNone {
		env = setEnv(env, "TMPDIR", s.TmpDir)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: exec %s: %s\n", args[0], firstLine(err.Error()))
		return &reportedError{code: exitNotFound}
	}
	if err := os.Chdir(wd.Path); err != nil {
		return fmt.Errorf("exec: session %s: working directory %s: %w", id, wd.Path, err)
	}
	if confine != confineNone {
		if err := applyConfinement(confine, s.Mountpoint, s.TmpDir, cmd.ErrOrStderr()); err != nil {
			return err
		}
	}
	if confine != confineNone {
		// Descriptors inherited from the caller would outlive the
		// confinement (a file opened for write before it): only stdio
		// reach a confined command.
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
			return fmt.Errorf("exec: close inherited descriptors: %w", err)
		}
	}
	err = syscall.Exec(path, args, env)
	fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: exec %s: %s\n", path, firstLine(err.Error()))
	return &reportedError{code: exitNotFound}
}

// setEnv returns env with key set to value (replacing every earlier value).
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// landlockABI returns the kernel's Landlock ABI version, 0 when Landlock is
// unsupported or disabled (landlock_create_ruleset(2) with
// LANDLOCK_CREATE_RULESET_VERSION).
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// minLandlockABI is the Landlock ABI strict confinement needs: 2 handles
// renames and links across directories (LANDLOCK_ACCESS_FS_REFER), without
// which the mount's own renames would fail.
const minLandlockABI = 2

// resolveUnixABI is the Landlock ABI that restricts connect(2) to named Unix
// sockets (LANDLOCK_ACCESS_FS_RESOLVE_UNIX).
const resolveUnixABI = 9

// applyConfinement restricts this process (every thread, and every process
// it execs) with Landlock: read and execute everywhere, write only in
// mountpoint and tmpDir (renames between them included) and to /dev/null.
// The rights go-landlock knows up to ABI 9 are handled (truncate, ioctl on
// devices, connecting to named Unix sockets), downgraded to what the kernel
// has; from ABI 6 signals and abstract Unix sockets are scoped to the
// confined processes. Below ABI 9 a seccomp filter refuses socket(AF_UNIX),
// so the daemon's socket (whose peers are only checked by uid) stays out of
// reach: a confined process could otherwise widen its own policy.
//
// Not covered, by Landlock's design: changes of metadata (chmod, chown,
// utimes, xattrs) outside the mount, and descriptors the caller opened
// before (they are closed at exec, below).
func applyConfinement(mode, mountpoint, tmpDir string, warn interface{ Write([]byte) (int, error) }) error {
	abi := landlockABI()
	rw := landlock.RWDirs(mountpoint, tmpDir)
	cfg := landlock.V9.BestEffort()
	switch {
	case abi >= minLandlockABI:
		rw = rw.WithRefer()
	case mode == confineStrict:
		return fmt.Errorf("exec --confine: the kernel's Landlock ABI is %d, %d or newer is needed (Linux 5.19+, lsm=landlock); use --confine=best-effort to run with less", abi, minLandlockABI)
	case abi == 0:
		fmt.Fprintf(warn, "wsfs: warning: exec --confine=best-effort: the kernel has no Landlock; running unconfined\n")
		return nil
	default:
		fmt.Fprintf(warn, "wsfs: warning: exec --confine=best-effort: Landlock ABI %d: renames across directories are refused (EXDEV)\n", abi)
		cfg = landlock.V1
	}
	err := cfg.RestrictPaths(
		landlock.RODirs("/"),
		rw,
		landlock.RWFiles("/dev/null"),
	)
	if err != nil {
		return fmt.Errorf("exec --confine: landlock: %s", firstLine(err.Error()))
	}
	if abi >= 6 {
		if err := landlock.V6.BestEffort().RestrictScoped(); err != nil {
			return fmt.Errorf("exec --confine: landlock scopes: %s", firstLine(err.Error()))
		}
	}
	if abi < resolveUnixABI {
		if err := denyUnixSockets(); err != nil {
			if mode == confineStrict {
				return fmt.Errorf("exec --confine: Unix sockets cannot be refused (Landlock ABI %d < %d): %s; use --confine=best-effort to run with less", abi, resolveUnixABI, firstLine(err.Error()))
			}
			fmt.Fprintf(warn, "wsfs: warning: exec --confine=best-effort: Unix sockets stay reachable: %s\n", firstLine(err.Error()))
		}
	}
	return nil
}
