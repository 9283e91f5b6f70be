package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/policy"
)

func init() {
	registerCommand(newMountCmd)
	registerCommand(newUnmountCmd)
}

// mountFlags are the flags of `wsfs mount`.
type mountFlags struct {
	root, mountpoint, session, mode, symlinks, policyFile string
	hostView, fuseTransport, layer                        string
	addRoots, protect                                     []string
	allowOther, nonEmpty, debug, force, noPassthrough     bool
	entryTimeout, attrTimeout                             time.Duration
}

// mountResult is the output of `wsfs mount --json` once the mount is served.
type mountResult struct {
	Root       string `json:"root"`
	Mountpoint string `json:"mountpoint"`
	Session    string `json:"session"`
	Mode       string `json:"mode"`
	HostView   string `json:"host_view"`
}

// newMountCmd returns the `wsfs mount` verb.
func newMountCmd() *cobra.Command { return newMountCmdWith(new(mountFlags)) }

// newMountCmdWith returns the `wsfs mount` verb with its flags parsed into f.
func newMountCmdWith(f *mountFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mount --root DIR --mountpoint DIR [flags]",
		Short: "Serve a project directory through FUSE in the foreground",
		Long: `Mount the physical root of DIR (symlinks and ".." resolved as the kernel does)
at the mountpoint and serve it in the foreground until SIGINT or SIGTERM, then
unmount. Every write through the mount is checked against the session's policy:
the --policy FILE as a base (JSON or YAML), with --root, --mode, --add-root and
--protect overriding or adding to it.

Links are links: a symlink whose target is outside the root is shown with a
text into the host view, a second FUSE mount (--host-view, default the sibling
<mountpoint>@host) that shows the host's "/" with the same policy, so that
following the link is decided at the target's physical path. wsfs mount
creates the host view directory when missing and removes it at the end; both
mounts go up and down together.

When the mount is busy at shutdown, the processes holding it are printed and
the mount keeps being served; with --force it is detached lazily instead.

Refused (exit code 2): a missing root, a root that is not a directory, a
mountpoint inside the root or a root inside the mountpoint, a non-empty
mountpoint without --nonempty, an unknown mode, access or symlink mode.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, _ := transportFlag(f.fuseTransport) // a bad value is refused by runMount
			fusefs.TuneProcs(mode)
			return runMount(cmd.Context(), cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.root, "root", "", "project directory to serve (default: the policy file's primary)")
	fl.StringVar(&f.mountpoint, "mountpoint", "", "existing directory to mount on (required)")
	fl.StringVar(&f.session, "session", "", "session id for logs, [A-Za-z0-9._-]{1,64}")
	fl.StringVar(&f.mode, "mode", "", "sandbox mode: read-only, workspace-write (default), full-access")
	fl.StringArrayVar(&f.addRoots, "add-root", nil, "additional root PATH=ro|rw|none (repeatable)")
	fl.StringArrayVar(&f.protect, "protect", nil, protectHelp)
	fl.StringVar(&f.symlinks, "symlinks", "contain", "symlink mode: contain, follow")
	fl.StringVar(&f.hostView, "host-view", "", "host view mountpoint, absolute (default: <mountpoint>@host)")
	fl.StringVar(&f.policyFile, "policy", "", "policy FILE (JSON or YAML) used as the base")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let other users use the mount (allow_other,default_permissions)")
	fl.BoolVar(&f.nonEmpty, "nonempty", false, "allow a non-empty mountpoint")
	fl.StringVar(&f.layer, "layer", "", "serve the root on a copy-on-write layer kept in DIR (made when missing; kept at the end): the root on disk does not change until wsfs layer commit --layer DIR")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request to stderr")
	fl.BoolVar(&f.noPassthrough, "no-passthrough", false, "serve every read and write in the server, even as root (no FUSE passthrough; for measurements)")
	fl.BoolVar(&f.force, "force", false, "at shutdown, detach the mount lazily even when it is busy")
	fl.DurationVar(&f.entryTimeout, "entry-timeout", 0, fmt.Sprintf("kernel entry cache timeout (0: %v while host changes are watched, else %v)", fusefs.DefaultWatchedTimeout, fusefs.DefaultTimeout))
	addTransportFlag(fl, &f.fuseTransport)
	fl.DurationVar(&f.attrTimeout, "attr-timeout", 0, fmt.Sprintf("kernel attribute cache timeout (0: %v while host changes are watched, else %v)", fusefs.DefaultWatchedTimeout, fusefs.DefaultTimeout))
	return cmd
}

// runMount builds the policy and the fusefs.Config from f, mounts, and serves
// until a signal (or ctx) asks it to stop, or the mount goes away.
func runMount(ctx context.Context, cmd *cobra.Command, f *mountFlags) error {
	cfg, err := mountConfig(cmd, f)
	if err != nil {
		return err
	}
	if f.debug {
		cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	}

	// Catch the stop signals before mounting: a signal that killed the
	// process between mount and serve would leave a dead mount behind.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var layer *mounts.Layer
	if f.layer != "" {
		if layer, err = openMountLayer(cfg, f.layer); err != nil {
			return err
		}
		defer layer.Close()
		cfg = layer.Config(cfg)
	}
	hv, err := mountHostView(cfg, f.allowOther)
	if err != nil {
		return err
	}
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		hv.stop()
		return err
	}
	pair := &mountPair{srv: srv, hv: hv}

	out := cmd.OutOrStdout()
	if jsonOutput(cmd) {
		writeJSON(out, mountResult{Root: srv.Root(), Mountpoint: srv.Mountpoint(), Session: cfg.Session, Mode: string(cfg.Policy.Mode()), HostView: cfg.HostView})
	} else {
		fmt.Fprintf(out, "mounted %s at %s (host view %s)\n", srv.Root(), srv.Mountpoint(), cfg.HostView)
	}
	if err := serveUntilStopped(ctx, pair, f.force, sigs, cmd.ErrOrStderr()); err != nil {
		return err
	}
	hv.stop()
	if !jsonOutput(cmd) {
		fmt.Fprintf(out, "unmounted %s\n", srv.Mountpoint())
	}
	return nil
}

// openMountLayer opens (making it when missing) the layer directory dir of
// --layer for the mount cfg describes: absolute, outside the root and the
// mountpoint, made for this root (or new), not in use by a `wsfs layer`
// verb; and records the mount's mountpoint and policy in it
// (mounts.Layer.RecordMount).
func openMountLayer(cfg fusefs.Config, dir string) (*mounts.Layer, error) {
	if !filepath.IsAbs(dir) {
		return nil, errUsage("--layer %q: must be an absolute path", dir)
	}
	root, err := identity.Canonical(cfg.Root)
	if err != nil {
		return nil, errUsage("--root %q: %s", cfg.Root, identity.ErrnoText(err))
	}
	mp := filepath.Clean(cfg.Mountpoint)
	if identity.Within(filepath.Clean(dir), mp) || identity.Within(mp, filepath.Clean(dir)) {
		return nil, errUsage("--layer %q: overlaps the mountpoint %s", dir, mp)
	}
	l, err := mounts.OpenLayer(filepath.Clean(dir), root)
	if err != nil {
		return nil, errUsage("--%v", err)
	}
	// What `wsfs layer commit` applies: this mount's policy (the layer's
	// baseline and changes are this mount's from now on).
	if c, err := identity.Canonical(mp); err == nil {
		mp = c
	}
	if err := l.RecordMount(mp, cfg.Policy.Spec()); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// hostViewMount is the host view wsfs mount serves next to the session.
type hostViewMount struct {
	srv     *fusefs.Server
	dir     string
	created bool // the directory was made here, and is removed at the end
	once    sync.Once
}

// mountHostView makes (when missing) and mounts the host view at
// cfg.HostView for the session cfg describes. On error nothing is left.
func mountHostView(cfg fusefs.Config, allowOther bool) (*hostViewMount, error) {
	h := &hostViewMount{dir: cfg.HostView}
	// A dead host view of an earlier wsfs mount of this session (killed,
	// its mountpoint unmounted by hand) is cleared, as wsfs unmount and a
	// restarted daemon clear theirs; a live one is left to refuse below.
	if probeMount(cfg.HostView) == unix.ENOTCONN {
		if err := fusefs.Unmount(cfg.HostView, false); err != nil {
			return nil, fmt.Errorf("--host-view %s: clearing the dead host view of an earlier wsfs mount: %v", cfg.HostView, err)
		}
	}
	if err := os.Mkdir(cfg.HostView, 0o755); err == nil {
		h.created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, errUsage("--host-view %s: %s", cfg.HostView, identity.ErrnoText(err))
	}
	srv, err := fusefs.MountHostView(fusefs.HostViewConfig{
		Mountpoint: cfg.HostView,
		Policy:     cfg.Policy,
		Links:      map[string]string{cfg.Root: cfg.Mountpoint, cfg.Mountpoint: cfg.Mountpoint},
		AllowOther: allowOther,
		Logger:     cfg.Logger,
		Session:    cfg.Session,
		Debug:      cfg.Debug,
		Transport:  cfg.Transport,
	})
	if err != nil {
		if h.created {
			os.Remove(cfg.HostView)
		}
		return nil, asUsage(err)
	}
	h.srv = srv
	return h, nil
}

// stop unmounts the host view (lazily: the session mount is gone, and a
// process still inside it sees ENOTCONN afterwards) and removes the
// directory made for it.
func (h *hostViewMount) stop() {
	h.once.Do(func() {
		if err := h.srv.Unmount(false); err != nil {
			_ = h.srv.Unmount(true)
		}
		if h.created {
			os.Remove(h.dir)
		}
	})
}

// mountPair is the session mount and its host view, up and down together:
// serveUntilStopped unmounts both, and when either goes away (unmounted
// from outside) the other follows.
type mountPair struct {
	srv  *fusefs.Server
	hv   *hostViewMount
	once sync.Once
}

func (p *mountPair) Mountpoint() string { return p.srv.Mountpoint() }

func (p *mountPair) Unmount(force bool) error {
	if err := p.srv.Unmount(force); err != nil {
		return err
	}
	p.hv.stop()
	return nil
}

func (p *mountPair) Wait() {
	p.once.Do(func() {
		go func() {
			p.hv.srv.Wait()
			// The host view went away: the session's escaping links would
			// lead nowhere; take the session down too.
			_ = p.srv.Unmount(true)
		}()
	})
	p.srv.Wait()
}

// mountServer is the part of *fusefs.Server that serveUntilStopped uses.
type mountServer interface {
	Mountpoint() string
	Unmount(force bool) error
	Wait()
}

// serveUntilStopped waits until a signal arrives on sigs or ctx is done, then
// unmounts srv. A busy mount is reported on errOut and served on, unless
// force, which detaches it lazily and serves the remaining holders until they
// let go or another signal arrives. It returns when the mount is gone,
// including when someone else unmounted it.
func serveUntilStopped(ctx context.Context, srv mountServer, force bool, sigs <-chan os.Signal, errOut io.Writer) error {
	gone := make(chan struct{})
	go func() {
		srv.Wait()
		close(gone)
	}()

	stop := ctx.Done()
	for {
		select {
		case <-gone:
			return nil
		case <-sigs:
		case <-stop:
			stop = nil // ask once per cancellation; signals can ask again
		}
		err := srv.Unmount(force)
		var busy *fusefs.BusyError
		if errors.As(err, &busy) {
			fmt.Fprintf(errOut, "wsfs: %s; still serving (stop the holders, or unmount with --force)\n", firstLine(err.Error()))
			continue
		}
		if err != nil {
			return err
		}
		select {
		case <-gone:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		// Lazily detached with holders left: serve them until they let go;
		// another signal stops serving (they then get ENOTCONN).
		fmt.Fprintf(errOut, "wsfs: %s detached; serving its remaining users until they let go (signal again to stop now)\n", srv.Mountpoint())
		select {
		case <-gone:
		case <-sigs:
		case <-ctx.Done():
		}
		return nil
	}
}

// mountConfig checks the flags and builds the fusefs.Config, compiled policy
// included. Every error is a usage error (exit code 2).
func mountConfig(cmd *cobra.Command, f *mountFlags) (fusefs.Config, error) {
	var spec policy.Spec
	if f.policyFile != "" {
		var err error
		if spec, err = loadPolicySpec(f.policyFile); err != nil {
			return fusefs.Config{}, err
		}
	}
	if f.session != "" {
		if err := checkID("--session", f.session); err != nil {
			return fusefs.Config{}, err
		}
	}

	root := f.root
	if root == "" {
		root = spec.Primary
	}
	if root == "" {
		return fusefs.Config{}, errUsage("--root: missing DIR")
	}
	if f.mountpoint == "" {
		return fusefs.Config{}, errUsage("--mountpoint: missing DIR")
	}
	rootAbs, err := baseDir(root)
	if err != nil {
		return fusefs.Config{}, err
	}
	mpAbs, err := baseDir(f.mountpoint)
	if err != nil {
		return fusefs.Config{}, err
	}
	// fusefs.Mount checks the same again; checking first makes every refusal
	// of the root or the mountpoint bad input (exit code 2), and gives the
	// canonical root the policy needs.
	canonRoot, mountpoint, err := fusefs.CheckMount(rootAbs, mpAbs, f.nonEmpty)
	if err != nil {
		return fusefs.Config{}, asUsage(err)
	}
	spec.Primary = canonRoot

	patch, err := policyPatch(cmd, f.mode, f.addRoots, f.protect)
	if err != nil {
		return fusefs.Config{}, err
	}
	spec = spec.Apply(patch)
	pol, err := policy.Compile(spec)
	if err != nil {
		return fusefs.Config{}, asUsage(err)
	}

	hostView := f.hostView
	if hostView == "" {
		hostView = mountpoint + "@host"
	}
	if !filepath.IsAbs(hostView) {
		return fusefs.Config{}, errUsage("--host-view %q: must be absolute", hostView)
	}
	hostView = filepath.Clean(hostView)
	if identity.Within(hostView, canonRoot) || identity.Within(hostView, mountpoint) || identity.Within(mountpoint, hostView) || identity.Within(canonRoot, hostView) {
		return fusefs.Config{}, errUsage("--host-view %q: must be outside the root %q and the mountpoint %q", hostView, canonRoot, mountpoint)
	}

	symlinks, err := fusefs.ParseSymlinkMode(f.symlinks)
	if err != nil {
		return fusefs.Config{}, errUsage("--symlinks: %s", err)
	}
	if f.entryTimeout < 0 {
		return fusefs.Config{}, errUsage("--entry-timeout %s: must not be negative", f.entryTimeout)
	}
	if f.attrTimeout < 0 {
		return fusefs.Config{}, errUsage("--attr-timeout %s: must not be negative", f.attrTimeout)
	}
	mode, err := transportFlag(f.fuseTransport)
	if err != nil {
		return fusefs.Config{}, err
	}
	return fusefs.Config{
		Root:          canonRoot,
		Mountpoint:    mountpoint,
		Policy:        pol,
		Symlinks:      symlinks,
		HostView:      hostView,
		AllowOther:    f.allowOther,
		NonEmpty:      f.nonEmpty,
		Debug:         f.debug,
		NoPassthrough: f.noPassthrough,
		Session:       f.session,
		EntryTimeout:  f.entryTimeout,
		AttrTimeout:   f.attrTimeout,
		Transport:     mode,
	}, nil
}

// canonicalArg returns the canonical physical path of the directory argument
// dir given with flag; a path that cannot be resolved is a usage error naming
// the flag and the path.
func canonicalArg(flag, dir string) (string, error) {
	abs, err := baseDir(dir)
	if err != nil {
		return "", err
	}
	c, err := identity.Canonical(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", errUsage("%s %s: %w", flag, dir, err)
	}
	return c, nil
}

// parseMode returns the policy mode named s ("" is workspace-write).
func parseMode(s string) (policy.Mode, error) {
	m, err := policy.ParseMode(s)
	if err != nil {
		return "", errUsage("--mode %q: unknown mode (want %s, %s or %s)", s,
			policy.ModeReadOnly, policy.ModeWorkspaceWrite, policy.ModeFullAccess)
	}
	return m, nil
}

// accessShort maps the short --add-root access spellings to policy access
// levels; the long names (read-only, read-write, none) are accepted too.
var accessShort = map[string]policy.Access{"ro": policy.AccessReadOnly, "rw": policy.AccessReadWrite}

// parseAddRoot parses an --add-root value PATH=ACCESS (ACCESS ro, rw, none,
// read-only or read-write) into a root with a canonical path.
func parseAddRoot(v string) (policy.Root, error) {
	i := strings.LastIndexByte(v, '=')
	if i < 0 {
		return policy.Root{}, errUsage("--add-root %q: want PATH=ro|rw|none", v)
	}
	path, accessName := v[:i], v[i+1:]
	access, ok := accessShort[accessName]
	if !ok {
		var err error
		if access, err = policy.ParseAccess(accessName); err != nil {
			return policy.Root{}, errUsage("--add-root %q: unknown access %q (want ro, rw or none)", v, accessName)
		}
	}
	if path == "" {
		return policy.Root{}, errUsage("--add-root %q: missing PATH", v)
	}
	canon, err := canonicalArg("--add-root", path)
	if err != nil {
		return policy.Root{}, err
	}
	return policy.Root{Path: canon, Access: access}, nil
}

// newUnmountCmd returns the `wsfs unmount` verb.
func newUnmountCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "unmount [--force] MOUNTPOINT",
		Short: "Unmount a wsfs mount (a dead one too)",
		Long: `Unmount the wsfs mount at MOUNTPOINT from outside its server. A dead mount
(its server gone: "Transport endpoint is not connected") is cleared too, with
its host view at MOUNTPOINT@host (the directory too, when empty). A busy
mount is refused with the processes holding it; --force detaches it lazily.`,
		Args: exactArgs(1, "MOUNTPOINT argument"),
		RunE: func(cmd *cobra.Command, args []string) error {
			mp := args[0]
			if mp == "" {
				return errUsage("unmount: MOUNTPOINT is blank")
			}
			// Not lstat(2): on the mountpoint of a kept connection whose
			// daemon is down it is a GETATTR nobody answers (the caller
			// would wait in D state for the next daemon). statx(2) with
			// AT_STATX_DONT_SYNC is answered from the kernel's cache.
			var stx unix.Statx_t
			if err := unix.Statx(unix.AT_FDCWD, mp, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC|unix.AT_NO_AUTOMOUNT, 0, &stx); err == unix.ENOENT {
				return errUsage("unmount %q: does not exist", mp)
			}
			// The mount table names mount points by their physical path: a
			// relative MOUNTPOINT, or one reached through a symlinked
			// directory, is looked up by it. Only the parent is walked: the
			// mount itself may be dead (ENOTCONN) or busy.
			abs, err := baseDir(mp)
			if err != nil {
				return err
			}
			abs = filepath.Clean(abs)
			if parent, perr := identity.Canonical(filepath.Dir(abs)); perr == nil {
				abs = filepath.Join(parent, filepath.Base(abs))
			}
			mp = abs
			if err := fusefs.Unmount(mp, force); err != nil {
				var nm *fusefs.NotMountError
				if errors.As(err, &nm) {
					return asUsage(err) // bad input: exit 2
				}
				return err
			}
			// The mount's server takes its host view down too, but only
			// after this returns; a caller that removes the directory next
			// must not find the host's "/" in it.
			hv, err := fusefs.UnmountSiblingHostView(mp)
			if err != nil {
				return err
			}
			if hv != "" {
				// wsfs mount removes the directory it made for the host view
				// when it stops; one that was killed cannot. An empty one
				// goes (os.Remove refuses anything else).
				os.Remove(hv)
			}
			if jsonOutput(cmd) {
				writeJSON(cmd.OutOrStdout(), map[string]string{"unmounted": mp})
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "unmounted %s\n", mp)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "detach the mount lazily even when it is busy")
	return cmd
}
