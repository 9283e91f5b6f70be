package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/confine"
	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/mounts/client"
	"github.com/wsfs/wsfs/policy"
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
	var id, confineMode, userFlag string
	var allowWrite, envFlags []string
	cmd := &cobra.Command{
		Use:   "exec --session ID [--confine[=best-effort]] [--allow-write DIR]... [--user UID] [--env NAME[=VALUE]]... -- CMD [ARGS...]",
		Short: "Run a command in a session's working directory inside its mount",
		Long: `Run CMD in session ID's current working directory inside its mount, or for a
directory outside the root inside its host view (asked from the daemon,
validated: a vanished directory recovers to the mount root), with
WSFS_SESSION (the id), WSFS_ROOT (the mountpoint) and TMPDIR (the session's
private temp directory) in its environment. A CMD
with a slash (./run.sh, bin/tool) is found relative to that directory, as a
shell started there would find it; a bare name is looked up in $PATH. wsfs
replaces itself with CMD, so CMD's exit status is the exit status.

FUSE sees only what goes through the mount: an absolute path elsewhere, or
".." above the mount root, never reaches it. --confine therefore runs CMD in a
jail built by bubblewrap (the bwrap binary, Debian package bubblewrap):

  allowed   reading the host's "/" (read-only); at the session root's
            physical path, the session's jail view (a second mount of the
            root the daemon makes with the first jail, same policy, showing
            links as stored, so git sees them unchanged; so "pwd -P" is the
            physical path, and absolute paths into the root, gitdir: lines
            and absolute links go through the policy: protected subpaths
            EACCES, read-only places EROFS); an additional root's path shows its
            host view directory (from the host view's twin with links as
            stored, made with the jail view; a view that is missing, unmounted
            from outside say, refuses the jail: 126, never a direct bind of
            the root); a working directory outside the roots (session cwd
            --cd) shows its host view directory at its own path (its
            writes decided by the policy); writing directly in the session's private temp
            directory (TMPDIR), in each --allow-write DIR and in the
            session's allow_write directories (session create
            --allow-write); the network; the caller's terminal.
  refused   every other write, metadata changes included (chmod, chown,
            setxattr, utimes: EROFS); seeing none roots, the daemon's state
            and socket directories, the mount base and other sessions (empty
            read-only directories; of the mount base only the session's own
            host view at <mount-base>/@host/ID is shown, from its twin with
            links as stored, since escaping link texts point there); other processes (own PID namespace and
            /proc: no other environ, maps, cmdline; no signals out);
            capabilities (all dropped, the bounding set too; no_new_privs);
            mount events of the host (the jail's mounts are private);
            other FUSE mounts (other sessions', any FUSE file system the
            jail does not use: not in its namespace at all, so their
            unmount never waits for the jail); Unix sockets (socket(AF_UNIX): EACCES, so the
            daemon cannot be asked to widen the policy), io_uring (ENOSYS)
            and TIOCSTI/TIOCLINUX (EPERM), by a seccomp filter (amd64,
            arm64); descriptors other than stdio; stdio that is a
            directory outside FUSE or a file in the backing root.
  second    Landlock, one ruleset: write only in the views, TMPDIR, the
  layer     --allow-write directories and the terminal devices; renames and
            links between them work.

The jail's environment is not the caller's: only PATH, HOME, USER,
LOGNAME, SHELL, TERM, COLORTERM, LANG, LANGUAGE, TZ and every LC_* pass,
besides WSFS_SESSION, WSFS_ROOT, PWD and TMPDIR (so tokens, cloud keys and
agent sockets in the caller's environment stay out); --env NAME passes the
caller's NAME too (nothing when it is unset), --env NAME=VALUE sets it.
The four the jail sets itself (WSFS_SESSION, WSFS_ROOT, PWD, TMPDIR) cannot
be given with --env (exit code 2). Without --confine the command gets the caller's whole environment.

--user UID runs the jail as UID (its group from the user database, or the
same number; no supplementary groups): only with --confine, as root, and only
a uid the session serves (session create --users).

WSFS_ROOT is the root's physical path in the jail (the mountpoint is hidden),
TMPDIR the session's temp directory. Fallbacks: without bwrap, --confine fails
(install bubblewrap; "wsfs doctor" checks it) and --confine=best-effort
applies the second layer alone (no mount namespace: the backing store stays
readable by its path, metadata changes outside the mount are not refused,
/proc is the host's); a layer the kernel lacks (Landlock before Linux 5.19, a
seccomp filter on another architecture) fails --confine and is skipped with a
warning by --confine=best-effort.

Exit codes: CMD's own; 127 when CMD cannot be found or executed; 126 when the
jail cannot be completed inside (a missing layer, a working directory not on
FUSE, a refused descriptor), and without --confine when the working directory
is not on FUSE (the session's mount went away); 2 bad usage; 1 when the daemon refuses or the
jail cannot be built.`,
		Args: minArgs(1, "CMD after --"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd, id, confineMode, userFlag, allowWrite, envFlags, args)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.StringVar(&id, "session", "", "session id (required)")
	fl.StringVar(&confineMode, "confine", confineNone, "run in the jail: strict (the default of a bare --confine) or best-effort")
	fl.Lookup("confine").NoOptDefVal = confineStrict
	fl.StringArrayVar(&allowWrite, "allow-write", nil, "with --confine: a directory writable directly in the jail (repeatable), e.g. \"$(go env GOCACHE)\"")
	fl.StringArrayVar(&envFlags, "env", nil, "with --confine: pass the caller's NAME, or set NAME=VALUE, in the jail's environment (repeatable; the default passes only PATH, HOME, USER, LOGNAME, SHELL, TERM, COLORTERM, LANG, LANGUAGE, TZ, LC_*; WSFS_SESSION, WSFS_ROOT, PWD, TMPDIR are the jail's own and refused)")
	fl.StringVar(&userFlag, "user", "", "with --confine: run the jail as this uid, one the session serves (session create --users)")
	fl.String("socket", client.DefaultSocket(), "the daemon's Unix socket")
	return cmd
}

// runExec asks the daemon for the session's directory, and replaces this
// process with the command, in the jail when asked.
func runExec(cmd *cobra.Command, id, confineMode, userFlag string, allowWrite, envFlags, args []string) error {
	if id == "" {
		return errUsage("exec: --session: missing ID")
	}
	if err := checkID("exec --session", id); err != nil {
		return err
	}
	switch confineMode {
	case confineNone, confineStrict, confineBestEffort:
	default:
		return errUsage("exec: --confine=%s: want --confine or --confine=best-effort", confineMode)
	}
	if confineMode == confineNone && len(allowWrite) > 0 {
		return errUsage("exec: --allow-write: only with --confine")
	}
	if confineMode == confineNone && len(envFlags) > 0 {
		return errUsage("exec: --env: only with --confine (without it the command gets the whole environment)")
	}
	environ := os.Environ()
	if confineMode != confineNone {
		var err error
		if environ, err = confine.JailEnv(environ, envFlags); err != nil {
			return errUsage("exec: %v", err)
		}
	}
	var jailUser *confine.User
	if userFlag != "" {
		if confineMode == confineNone {
			return errUsage("exec: --user: only with --confine")
		}
		u, err := strconv.ParseUint(userFlag, 10, 32)
		if err != nil {
			return errUsage("exec: --user %q: not a uid (a decimal number)", userFlag)
		}
		jailUser = &confine.User{Uid: uint32(u), Gid: primaryGroup(uint32(u))}
	}
	var writable []string
	for _, w := range allowWrite {
		c, err := canonicalArg("--allow-write", w)
		if err != nil {
			return err
		}
		writable = append(writable, c)
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
	var others []api.Session
	var health api.Health
	if confineMode != confineNone {
		if others, err = c.List(cmd.Context()); err != nil {
			return apiFailure(cmd, err)
		}
		if health, err = c.Health(cmd.Context()); err != nil {
			return apiFailure(cmd, err)
		}
	}
	// The jail hides the socket's directory by its absolute, physical path
	// (a relative --socket is the caller's, resolved against its cwd).
	socketDir := filepath.Dir(c.Socket())
	if a, err := filepath.Abs(socketDir); err == nil {
		socketDir = a
	}
	if p, err := identity.Canonical(socketDir); err == nil {
		socketDir = p
	}
	defer c.Close()
	if jailUser != nil && jailUser.Uid != 0 && !slices.Contains(s.Users, jailUser.Uid) {
		return notServed(id, jailUser.Uid, s.Users)
	}

	env := setEnv(environ, "WSFS_SESSION", id)
	env = setEnv(env, "WSFS_ROOT", s.Mountpoint)
	env = setEnv(env, "PWD", wd.Path)
	env = setEnv(env, "TMPDIR", s.TmpDir)
	if confineMode == confineNone {
		c.Close()
		// Into the session's directory first: a relative command
		// (./run.sh, bin/tool) is found there, as a shell started there
		// would find it, not in the caller's directory.
		if err := os.Chdir(wd.Path); err != nil {
			return fmt.Errorf("exec: session %s: working directory %s: %w", id, wd.Path, err)
		}
		if err := onFUSE(id, wd.Path); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: %v\n", err)
			return &reportedError{code: confine.ExitConfineFailed}
		}
		path, err := exec.LookPath(args[0])
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: exec %s: %s\n", args[0], lookPathText(args[0], wd.Path, err))
			return &reportedError{code: exitNotFound}
		}
		err = syscall.Exec(path, args, env)
		fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: exec %s: %s\n", path, firstLine(err.Error()))
		return &reportedError{code: exitNotFound}
	}

	for _, w := range writable {
		if err := checkAllowWrite(w, s, others, health, socketDir); err != nil {
			return err
		}
	}
	for _, w := range s.AllowWrite {
		if !slices.Contains(writable, w) {
			writable = append(writable, w)
		}
	}
	spec, err := jailSpec(s, wd, others, health, socketDir, writable)
	if err != nil {
		return jailRefused(cmd, err)
	}
	spec.Args, spec.BestEffort, spec.User = args, confineMode == confineBestEffort, jailUser
	if _, err := spec.BwrapPath(); err != nil {
		msg := strings.TrimPrefix(firstLine(err.Error()), "confine: ")
		if confineMode == confineStrict || jailUser != nil {
			return fmt.Errorf("exec --confine: %s; --confine=best-effort falls back to Landlock alone", msg)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: warning: exec --confine=best-effort: %s; falling back to Landlock alone (no mount namespace)\n", msg)
		spec.Env, spec.Cwd = env, wd.Path
		c.Close()
		return execFailure(cmd, confine.ExecLandlockOnly(spec))
	}
	env = setEnv(env, "WSFS_ROOT", s.Root)
	env = setEnv(env, "PWD", wd.Physical)
	spec.Env, spec.Cwd = env, wd.Physical
	// The daemon holds a pidfd on this process, which becomes bwrap: it
	// ends the jail before it unmounts, removes or restarts the session.
	if _, err := c.AddJail(cmd.Context(), id); err != nil {
		return apiFailure(cmd, err)
	}
	// A session created from now on is hidden by the daemon in this jail
	// once it is built; one created since the first list is hidden by
	// bwrap: list again.
	if again, err := c.List(cmd.Context()); err != nil {
		return apiFailure(cmd, err)
	} else if len(again) != len(others) || !slices.EqualFunc(again, others, func(a, b api.Session) bool { return a.ID == b.ID && a.Root == b.Root }) {
		for _, w := range writable {
			if err := checkAllowWrite(w, s, again, health, socketDir); err != nil {
				return err
			}
		}
		later, err := jailSpec(s, wd, again, health, socketDir, writable)
		if err != nil {
			return jailRefused(cmd, err)
		}
		spec.Hidden = later.Hidden
	}
	c.Close()
	if health.MountBase != "" {
		// The daemon mounted the session's jail views with AddJail: the
		// root and the host, links as stored.
		for _, v := range [][2]string{
			{s.Mountpoint, mounts.JailViewPath(health.MountBase, id)},
			{filepath.Join(health.MountBase, "@host", id), mounts.JailHostViewPath(health.MountBase, id)},
		} {
			if !useJailView(&spec, v[0], v[1]) && s.Symlinks != api.SymlinksFollow {
				return jailRefused(cmd, fmt.Errorf("the session's jail view %s is not mounted (links as stored); the jail shows %s only through it", v[1], v[0]))
			}
		}
	}
	return execFailure(cmd, spec.Exec())
}

// onFUSE refuses to start a command of session id in the working directory
// dir (the process's, entered already) unless it is on FUSE (the session's
// mount or host view): a mountpoint whose mount went away shows the bare
// directory on disk, which no policy guards. As in the jail (confine's
// helper), the check is statfs(2) of ".", the directory entered.
func onFUSE(id, dir string) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(".", &sfs); err != nil {
		return fmt.Errorf("exec: session %s: working directory %s: statfs: %v", id, dir, err)
	}
	if sfs.Type != confine.FuseSuperMagic {
		return fmt.Errorf("exec: session %s: working directory %s is not on FUSE (statfs type %#x): the session's mount is gone", id, dir, sfs.Type)
	}
	return nil
}

// useJailView moves every view source of spec inside from (the session
// mount, or its host view, which present escaping links as texts into the
// host view) to the same place in its jail view to (links as stored,
// mounted by the daemon with the first jail). Without a FUSE mount at to
// (the session shows links as stored already, or it could not be mounted,
// or it was unmounted from outside) spec stays as it is and it returns
// false when a view needed it.
func useJailView(spec *confine.Spec, from, to string) bool {
	var sfs unix.Statfs_t
	mounted := unix.Statfs(to, &sfs) == nil && sfs.Type == confine.FuseSuperMagic
	for i, v := range spec.Views {
		if identity.Within(v.Source, from) {
			if !mounted {
				return false
			}
			spec.Views[i].Source = to + v.Source[len(from):]
		}
	}
	return true
}

// jailRefused reports a jail that cannot be built as asked: exit 126, as
// the jail's own refusals (confine.ExitConfineFailed).
func jailRefused(cmd *cobra.Command, err error) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: exec --confine: %s\n", firstLine(err.Error()))
	return &reportedError{code: confine.ExitConfineFailed}
}

// execFailure reports a failed confined exec: 127 when the command could
// not be run, 126 for a refused descriptor (as the jail's helper stage
// refuses one), else the error.
func execFailure(cmd *cobra.Command, err error) error {
	var ee *confine.ExecError
	if errors.As(err, &ee) {
		fmt.Fprintf(cmd.ErrOrStderr(), "wsfs: %s\n", firstLine(err.Error()))
		return &reportedError{code: exitNotFound}
	}
	var rd *confine.RefusedDescriptorError
	if errors.As(err, &rd) {
		return jailRefused(cmd, errors.New(strings.TrimPrefix(err.Error(), "confine: ")))
	}
	return fmt.Errorf("exec --confine: %s", firstLine(strings.TrimPrefix(err.Error(), "confine: ")))
}

// jailSpec returns the jail of session s (without Args, Env and Cwd): the
// session's mount at its physical root; each additional root with access
// through its host view directory (an error when s has no host view
// mounted: a root is never bound directly, without its policy); the temp
// directory writable directly when the policy lets the session write it
// (read-only otherwise: a read-only session), each writable directly; none roots, the
// daemon's state, socket and mount base directories and every other
// session's root, mountpoint and temp directory hidden (but those inside
// this session's views, which its policy decides). A working directory
// outside every view (the session may go wherever it may read) is shown at
// its own path through the host view, so the jail starts on FUSE there and
// the policy decides its writes.
func jailSpec(s api.Session, wd api.WorkDir, others []api.Session, h api.Health, socketDir string, writable []string) (confine.Spec, error) {
	spec := confine.Spec{
		Views:    []confine.View{{Path: s.Root, Source: s.Mountpoint}},
		Writable: append([]string{s.TmpDir}, writable...),
		Backing:  []string{s.Root},
	}
	hostView := ""
	if h.MountBase != "" {
		hv := filepath.Join(h.MountBase, "@host", s.ID)
		var sfs unix.Statfs_t
		if unix.Statfs(hv, &sfs) == nil && sfs.Type == confine.FuseSuperMagic {
			hostView = hv
		}
	}
	pol, _ := policy.Compile(mounts.PolicySpec(&s.Policy))
	if pol == nil || !pol.Decide(policy.OpCreate, filepath.Join(s.TmpDir, "x")).Allow {
		// The policy decides the temp directory, as through the host view:
		// a read-only session's jail sees it read-only (EROFS).
		spec.ReadOnly = append(spec.ReadOnly, s.TmpDir)
	}
	if hostView != "" {
		// The mount presents escaping links as texts into the host view:
		// it stays at its own path in the jail (inside the hidden mount
		// base), so they resolve there too.
		spec.Views = append(spec.Views, confine.View{Path: hostView, Source: hostView})
	}
	var hide []string
	for _, r := range s.Policy.Additional {
		switch {
		case r.Access == api.AccessNone:
			hide = append(hide, r.Path)
		case hostView != "":
			spec.Views = append(spec.Views, confine.View{Path: r.Path, Source: fusefs.InHostView(hostView, r.Path)})
		default:
			return confine.Spec{}, fmt.Errorf("additional root %s: the session's host view %s is not mounted; the jail shows a root only through its view", r.Path, filepath.Join(h.MountBase, "@host", s.ID))
		}
	}
	if cwd := wd.Physical; hostView != "" && filepath.IsAbs(cwd) && cwd != "/" && !slices.ContainsFunc(spec.Views, func(v confine.View) bool { return identity.Within(cwd, v.Path) }) {
		// A directly writable directory that overlaps it and that the
		// policy lets the session write anyway (its temp directory) is
		// reached through the view instead, the larger of the two.
		view, keep := cwd, spec.Writable[:0:0]
		for _, w := range spec.Writable {
			if (identity.Within(w, view) || identity.Within(view, w)) && pol != nil && pol.Decide(policy.OpCreate, w).Allow {
				if identity.Within(view, w) {
					view = w
				}
				continue
			}
			keep = append(keep, w)
		}
		spec.Writable = keep
		spec.Views = append(spec.Views, confine.View{Path: view, Source: fusefs.InHostView(hostView, view)})
	}
	hide = append(hide, jailHidden(s, others, h, socketDir)...)
	for _, p := range hide {
		if p == "" || p == "/" || slices.Contains(spec.Hidden, p) {
			continue
		}
		inView := false
		for _, v := range spec.Views {
			// A view of "/" (an additional root "/") exempts nothing.
			if v.Path != "/" && identity.Within(p, v.Path) {
				inView = true
			}
		}
		if !inView {
			spec.Hidden = append(spec.Hidden, p)
		}
	}
	return spec, nil
}

// jailHidden returns what session s's jail hides besides its none roots:
// the daemon's state, mount base and socket directories and every other
// session's root (but one at a system directory, mounts.SystemDir, shown
// read-only as the host has it), mountpoint and temp directory.
func jailHidden(s api.Session, others []api.Session, h api.Health, socketDir string) []string {
	hide := []string{h.StateDir, h.MountBase, socketDir}
	for _, o := range others {
		if o.ID == s.ID {
			continue
		}
		if !mounts.SystemDir(o.Root) {
			hide = append(hide, o.Root)
		}
		hide = append(hide, o.Mountpoint, o.TmpDir)
	}
	return hide
}

// checkAllowWrite refuses an --allow-write directory w of session s that
// lies in or contains a place its jail hides (jailHidden, its none roots;
// the socket directory only when w contains it):
// bound writable over the tmpfs hiding it, it would bypass the mounts'
// policy (session records, another session's mountpoint, a none root).
func checkAllowWrite(w string, s api.Session, others []api.Session, h api.Health, socketDir string) error {
	if mp, fstype, refused, err := fusefs.RefusedMount(w); err != nil {
		return fmt.Errorf("exec --confine: --allow-write %s: %v", w, err)
	} else if refused {
		return fmt.Errorf("exec --confine: --allow-write %s: lies in the %s mount at %s; a jail may not write directly in a pseudo file system or a FUSE mount", w, fstype, mp)
	}
	hide := jailHidden(s, others, h, socketDir)
	for _, r := range s.Policy.Additional {
		if r.Access == api.AccessNone {
			hide = append(hide, r.Path)
		}
	}
	for _, p := range hide {
		switch {
		case p == "":
		case identity.Within(w, p) && p != socketDir: // the socket alone is hidden there (seccomp refuses AF_UNIX)
			return fmt.Errorf("exec --confine: --allow-write %s: lies in %s, which the jail hides (a jail may not write there)", w, p)
		case identity.Within(p, w):
			return fmt.Errorf("exec --confine: --allow-write %s: contains %s, which the jail hides (a jail may not write there)", w, p)
		}
	}
	return nil
}

// notServed is exec --user's usage error for a uid session id does not
// serve: its users (as --users takes them) when it has any.
func notServed(id string, uid uint32, users []uint32) error {
	if len(users) == 0 {
		return errUsage("exec: --user %d: session %s does not serve uid %d (session create --users)", uid, id, uid)
	}
	list := make([]string, len(users))
	for i, u := range users {
		list[i] = strconv.FormatUint(uint64(u), 10)
	}
	return errUsage("exec: --user %d: session %s does not serve uid %d (its users: %s; session create --users)", uid, id, uid, strings.Join(list, ","))
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

// lookPathText says why exec.LookPath refused name, in the user's terms: a
// path is looked for in the session's working directory dir, a bare name in
// $PATH.
func lookPathText(name, dir string, err error) string {
	var why string
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
		why = "no such file"
	case errors.Is(err, fs.ErrPermission):
		why = "not executable (permission denied)"
	case errors.Is(err, exec.ErrDot):
		return "found only through a relative $PATH entry; name it as ./" + name
	default:
		why = firstLine(err.Error())
	}
	if strings.Contains(name, "/") {
		if filepath.IsAbs(name) {
			return why
		}
		return why + " in the session's working directory " + dir
	}
	return why + " in $PATH"
}

// primaryGroup returns uid's primary group (fusefs.UserCred: the user
// database's, or the same number without an entry there).
func primaryGroup(uid uint32) uint32 { return fusefs.UserCred(uid).Gid }
