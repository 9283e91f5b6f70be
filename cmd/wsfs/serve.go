package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/client"
	"github.com/wsfs/wsfs/transport"
)

func init() { registerCommand(newServeCmd) }

// defaultStateDir is the daemon's state directory when --state-dir is not
// given: /var/lib/wsfs as root, else $XDG_STATE_HOME/wsfs or
// ~/.local/state/wsfs.
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/wsfs"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "wsfs")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "wsfs")
}

// defaultMountBase is the parent of default mountpoints when --mount-base
// is not given: the socket's directory + "/mnt".
func defaultMountBase(socket string) string {
	return filepath.Join(filepath.Dir(socket), "mnt")
}

// newServeCmd returns the `wsfs serve` verb.
func newServeCmd() *cobra.Command {
	var socket, stateDir, mountBase, logLevel, fuseTransport, metricsAddr string
	var keep, takeover bool
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH] [--state-dir DIR] [--mount-base DIR] [--metrics-address ADDR]",
		Short: "Run the session daemon: many session mounts behind a Unix-socket JSON API",
		Long: `Run the wsfs daemon in the foreground. It mounts every session recorded in
the state directory again (clearing dead mounts first), then answers the JSON
API (docs/api.md) on the Unix socket, created with mode 0600; requests from
another uid are refused (403).

Logs go to stderr; the line "msg=serving" says the socket answers.

Sessions outlive the daemon (as root, unless --keep-connections=false):
every session's FUSE connections are kept by systemd's file descriptor store
when run as a service with FileDescriptorStoreMax= (hack/systemd), otherwise
by a small holder process this command starts (descriptors only; it lives on
after the daemon). After a crash (kill -9, OOM) the next start serves the
kept connections on: processes in the mounts see a pause, never an error.
Starting a second daemon on the same state directory takes over from the
running one (an upgrade): the running one stops at a request boundary and
exits 0 once the new one is ready, the new one serves on; if the new one
fails before it serves, the running one serves on (--takeover=false
refuses instead).

--metrics-address HOST:PORT or unix:///PATH (mode 0600) also serves GET
/metrics (the metrics of GET /v1/metrics) there, without the socket's peer
check, for a Prometheus that cannot reach the 0600 API socket.

A refused start (a live socket, a state directory in use, a bad path)
leaves no directory or file behind.

SIGTERM: stop accepting, finish the requests in flight, detach: the sessions'
connections, their jails and the API socket stay kept for the next start
(clients that connect meanwhile wait in the socket's backlog; without
keeping: unmount every session). SIGINT is the full stop: unmount every session (records stay, so
the next start mounts them again), end the holder and remove the mount base
when empty (the default one, or one this start made). Either removes the
socket and exits 0.

Defaults: --socket $WSFS_SOCKET, $XDG_RUNTIME_DIR/wsfs/wsfs.sock or
/run/wsfs/wsfs.sock; --state-dir /var/lib/wsfs (root) or
$XDG_STATE_HOME/wsfs; --mount-base the socket's directory + /mnt. Each of
the three must be an absolute path (exit code 2 otherwise).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, serveFlags{socket, stateDir, mountBase, logLevel, fuseTransport, metricsAddr, keep, takeover})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&socket, "socket", client.DefaultSocket(), "Unix socket to listen on")
	fl.StringVar(&stateDir, "state-dir", defaultStateDir(), "directory of session records and event logs")
	fl.StringVar(&mountBase, "mount-base", "", "parent directory of default mountpoints (default: the socket's directory + /mnt)")
	fl.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.BoolVar(&keep, "keep-connections", os.Geteuid() == 0, "keep the sessions' FUSE connections outside the daemon so they survive a restart or crash (needs root)")
	fl.BoolVar(&takeover, "takeover", true, "when a daemon already serves the state directory, take its sessions over instead of refusing")
	addTransportFlag(fl, &fuseTransport)
	fl.StringVar(&metricsAddr, "metrics-address", "", "also serve /metrics on HOST:PORT or unix:///PATH (default: off)")
	return cmd
}

// serveFlags are wsfs serve's flags.
type serveFlags struct {
	socket, stateDir, mountBase, logLevel, fuseTransport, metricsAddr string
	keep, takeover                                                    bool
}

// runServe runs the daemon until SIGTERM or SIGINT.
func runServe(cmd *cobra.Command, f serveFlags) error {
	socket, stateDir, mountBase, logLevel := f.socket, f.stateDir, f.mountBase, f.logLevel
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return errUsage("--log-level %q: want debug, info, warn or error", logLevel)
	}
	mode, err := transportFlag(f.fuseTransport)
	if err != nil {
		return err
	}
	ml, err := parseMetricsAddress(f.metricsAddr)
	if err != nil {
		return err
	}
	if err := absolutePathFlags(cmd, [][2]string{{"socket", socket}, {"state-dir", stateDir}, {"mount-base", mountBase}}); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	ownBase := mountBase == ""
	if ownBase {
		mountBase = defaultMountBase(socket)
	}

	// Catch the stop signals before anything is mounted.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	defer startHeapProfiler(logger)()

	if f.keep && os.Geteuid() != 0 {
		return errUsage("--keep-connections: needs root (open_by_handle_at(2) finds a session's files again after a restart)")
	}
	cfg := mounts.Config{StateDir: stateDir, MountBase: mountBase, Logger: logger,
		Hidden: []string{socket}, Takeover: f.takeover, FuseTransport: mode, // the socket: hidden from every host view
		OwnMountBase: ownBase,
		// Without a store, the jails of a daemon that dies are ended by
		// the reaper (mounts/jailreaper.go); with one they run on with
		// their kept views for the next daemon (mounts/jailkeep.go).
		JailReaper: func() (*mounts.JailReaper, error) {
			return mounts.StartJailReaper("/proc/self/exe", []string{selfPath(), "jail-reaper"})
		}}
	if f.keep {
		store, err := connectionStore(stateDir, logger)
		if err != nil {
			return err
		}
		cfg.Store = store
	}
	m, err := mounts.New(cfg)
	if err != nil {
		return serveInputErr(err)
	}
	// The socket a previous daemon kept (a takeover, a crash): clients
	// that connected meanwhile wait in its backlog (mounts/listenkeep.go).
	var l *net.UnixListener
	if cfg.Store != nil {
		if l, err = mounts.TakeListener(cfg.Store, socket); err != nil {
			logger.Debug("no kept API socket", "err", err)
		} else if l != nil {
			logger.Info("serving on the API socket the previous daemon kept", "socket", socket)
		}
	}
	// removeSocket says whether the socket file goes at the end: one this
	// start made, when it fails before serving; at the end unless it
	// stays for the next daemon (detached with the listener kept).
	removeSocket, listenerKept := false, false
	if l == nil {
		if l, err = mounts.Listen(socket); err != nil {
			m.Abandon() // a refused start leaves nothing behind
			return serveInputErr(err)
		}
		removeSocket = true
	}
	// Removed at the end only while it is still this daemon's: a successor
	// that took over may have made its own there already.
	var sockSt syscall.Stat_t
	syscall.Stat(socket, &sockSt)
	defer func() {
		var now syscall.Stat_t
		if removeSocket && syscall.Stat(socket, &now) == nil && now.Ino == sockSt.Ino && now.Dev == sockSt.Dev {
			os.Remove(socket)
		}
	}()
	api := mounts.NewAPI(m, logger)
	stopMetrics, err := ml.serve(mounts.MetricsHandler(api.Metrics), logger)
	if err == nil && cfg.Store != nil {
		if err = startStore(cfg.Store, logger); err != nil {
			stopMetrics()
		}
	}
	if err != nil {
		l.Close()
		m.Abandon()
		return err
	}
	defer func() { stopMetrics() }()
	if cfg.Store != nil {
		if err := mounts.KeepListener(cfg.Store, l, socket); err != nil {
			logger.Warn("API socket not kept: clients get ECONNREFUSED while no daemon runs", "err", err)
		} else {
			listenerKept = true
		}
	}

	// Everything that can fail is done: a predecessor waiting for this
	// start to serve (a takeover) exits now, and one whose successor
	// failed before this point serves on (mounts/handover.go).
	m.CommitTakeover()
	wake := make(chan os.Signal, 1)
	signal.Notify(wake, syscall.SIGUSR1)
	defer signal.Stop(wake)

	fullStop := false
	// serving returns a context for one round of serving, cancelled at
	// the first stop signal.
	serving := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(cmd.Context())
		go func() {
			select {
			case sig := <-sigs:
				fullStop = sig == syscall.SIGINT
				logger.Info("stopping", "signal", sig.String(), "full_stop", fullStop || cfg.Store == nil)
				cancel()
			case <-ctx.Done():
			}
		}()
		return ctx, cancel
	}
	ctx, cancel := serving()
	defer func() { cancel() }()
	if err := m.Recover(ctx); err != nil {
		logger.Error("recover", "err", err)
	}
	// A stop during Recover leaves sessions it did not reach to the next
	// daemon: no handover that could resume without them.
	recovered := ctx.Err() == nil
	logger.Info("serving", "socket", socket, "state_dir", m.StateDir(), "mount_base", m.MountBase(), "sessions", m.Len())
	var serveErr, closeErr error
	for {
		serveErr = api.Serve(ctx, l)
		l.Close()
		removeSocket = true
		if fullStop || cfg.Store == nil {
			closeErr = m.Close(context.Background())
			if cfg.Store != nil {
				mounts.ForgetListener(cfg.Store)
			}
			if h, ok := cfg.Store.(*transport.Holder); ok && closeErr == nil {
				// Nothing is kept any more: the holder has no work left.
				h.Exit()
			}
			break
		}
		if !recovered || serveErr != nil && !errors.Is(serveErr, context.Canceled) {
			closeErr = m.Detach(context.Background())
			removeSocket = closeErr != nil || !listenerKept
			break
		}
		// A successor may bind the metrics address meanwhile.
		stopMetrics()
		stopMetrics = func() {}
		done, err := m.Handover(wake)
		if done {
			closeErr = err
			removeSocket = closeErr != nil || !listenerKept
			break
		}
		// The successor failed before it served: serve on, on the same
		// socket (kept in the store; a client that connected meanwhile
		// waits in its backlog).
		if l, err = mounts.TakeListener(cfg.Store, socket); l == nil {
			logger.Info("resume: a new API socket", "socket", socket, "why", err)
			if l, err = mounts.Listen(socket); err != nil {
				closeErr = errors.Join(fmt.Errorf("resume: %w", err), m.Detach(context.Background()))
				break
			}
			if err := mounts.KeepListener(cfg.Store, l, socket); err != nil {
				logger.Warn("API socket not kept: clients get ECONNREFUSED while no daemon runs", "err", err)
			}
		}
		if stopMetrics, err = ml.serve(mounts.MetricsHandler(api.Metrics), logger); err != nil {
			logger.Warn("resume: metrics not served", "err", err)
			stopMetrics = func() {}
		}
		cancel()
		ctx, cancel = serving()
		logger.Info("serving again", "socket", socket, "sessions", m.Len())
	}
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		return fmt.Errorf("serve %s: %w", socket, serveErr)
	}
	if closeErr != nil {
		return fmt.Errorf("unmount sessions: %s", firstLine(closeErr.Error()))
	}
	logger.Info("stopped")
	return nil
}

// absolutePathFlags refuses, as a usage error, a relative path among the
// daemon's path flags ({name, value}; "" is not given): the daemon would
// otherwise place its socket, state and mounts in whatever directory it was
// started from. A relative $WSFS_SOCKET, --socket's default, is named as such.
func absolutePathFlags(cmd *cobra.Command, flags [][2]string) error {
	for _, f := range flags {
		name, v := f[0], f[1]
		if v == "" || filepath.IsAbs(v) {
			continue
		}
		if name == "socket" && !cmd.Flags().Changed(name) && os.Getenv("WSFS_SOCKET") == v {
			return errUsage("--socket: its default $WSFS_SOCKET %q is relative; give an absolute path", v)
		}
		return errUsage("--%s: %q is relative; give an absolute path", name, v)
	}
	return nil
}

// serveInputErr marks the daemon's start-up refusals of its flags (a
// relative path, a state directory in use, a live socket) as usage errors.
func serveInputErr(err error) error {
	switch mounts.CodeOf(err) {
	case mounts.CodeInvalid, mounts.CodeExists:
		return asUsage(err)
	}
	return err
}

// connectionStore returns where the daemon keeps its sessions' connections:
// systemd's file descriptor store when it runs as a service with a notify
// socket, else the holder process of stateDir (<stateDir>/holder.sock),
// which startStore starts once the daemon's start can no longer be refused.
func connectionStore(stateDir string, logger *slog.Logger) (transport.Store, error) {
	if s := transport.NewFDStore(); s != nil {
		logger.Info("connections kept in systemd's file descriptor store")
		return s, nil
	}
	return &transport.Holder{Socket: holderSocket(stateDir)}, nil
}

// startStore starts the holder of a Holder store when none answers at its
// socket (this executable's hidden `holder` verb, transport.SpawnHolder):
// /proc/self/exe is run, the binary this daemon runs even when an upgrade
// replaced its file, with the binary's path (os.Executable) as argv[0] so
// that ps shows "/usr/local/bin/wsfs holder".
func startStore(st transport.Store, logger *slog.Logger) error {
	h, ok := st.(*transport.Holder)
	if !ok {
		return nil
	}
	if _, err := transport.SpawnHolder(h.Socket, "/proc/self/exe", holderArgv(h.Socket)); err != nil {
		return fmt.Errorf("connection holder: %w", err)
	}
	pid, _ := h.Ping()
	logger.Info("connections kept by the holder process", "socket", h.Socket, "pid", pid)
	return nil
}

// holderArgv is the holder's argv: this binary's path (os.Executable;
// /proc/self/exe when it cannot be found), the hidden verb and its socket.
func holderArgv(socket string) []string {
	return []string{selfPath(), "holder", "--socket", socket}
}

// holderSocketOf returns the socket of a holder started with holderArgv,
// from its argv (/proc/PID/cmdline, argv[0] aside); ok is false for any
// other process.
func holderSocketOf(argv []string) (socket string, ok bool) {
	if len(argv) != 4 || argv[1] != "holder" || argv[2] != "--socket" {
		return "", false
	}
	return argv[3], true
}

// holderSocket is the socket of the holder process of stateDir.
func holderSocket(stateDir string) string { return filepath.Join(stateDir, "holder.sock") }

// selfPath is this binary's path for the argv[0] of the processes the
// daemon starts (os.Executable; /proc/self/exe when it cannot be found):
// ps shows it, though they run /proc/self/exe.
func selfPath() string {
	self, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	return self
}

func init() { registerCommand(newJailReaperCmd) }

// newJailReaperCmd returns the hidden `wsfs jail-reaper` verb: the process
// wsfs serve starts with its first jail, which ends the daemon's jails when
// the daemon dies (mounts.RunJailReaper, on descriptor 3).
func newJailReaperCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "jail-reaper",
		Short:  "End the daemon's jails when it dies (started by wsfs serve)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
			conn := os.NewFile(3, "jail-reaper")
			if conn == nil {
				return errors.New("jail-reaper: no descriptor 3: it is started by wsfs serve")
			}
			return mounts.RunJailReaper(conn)
		},
	}
}

func init() { registerCommand(newHolderCmd) }

// newHolderCmd returns the hidden `wsfs holder` verb: the holder process
// wsfs serve starts (transport.RunHolder).
func newHolderCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    "holder --socket PATH",
		Short:  "Keep the daemon's FUSE connections across its restarts (started by wsfs serve)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return errUsage("--socket: required")
			}
			signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
			return transport.RunHolder(socket, transport.HolderReady)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "Unix socket to listen on")
	return cmd
}
