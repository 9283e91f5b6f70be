package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/client"
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
	var socket, stateDir, mountBase, logLevel string
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH] [--state-dir DIR] [--mount-base DIR]",
		Short: "Run the session daemon: many session mounts behind a Unix-socket JSON API",
		Long: `Run the wsfs daemon in the foreground. It mounts every session recorded in
the state directory again (clearing dead mounts first), then answers the JSON
API (docs/api.md) on the Unix socket, created with mode 0600; requests from
another uid are refused (403).

Logs go to stderr; the line "msg=serving" says the socket answers.

SIGTERM or SIGINT: stop accepting, finish the requests in flight, unmount every
session (records stay, so the next start mounts them again), remove the
socket, exit 0.

Defaults: --socket $WSFS_SOCKET, $XDG_RUNTIME_DIR/wsfs/wsfs.sock or
/run/wsfs/wsfs.sock; --state-dir /var/lib/wsfs (root) or
$XDG_STATE_HOME/wsfs; --mount-base the socket's directory + /mnt.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, socket, stateDir, mountBase, logLevel)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&socket, "socket", client.DefaultSocket(), "Unix socket to listen on")
	fl.StringVar(&stateDir, "state-dir", defaultStateDir(), "directory of session records and event logs")
	fl.StringVar(&mountBase, "mount-base", "", "parent directory of default mountpoints (default: the socket's directory + /mnt)")
	fl.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// runServe runs the daemon until SIGTERM or SIGINT.
func runServe(cmd *cobra.Command, socket, stateDir, mountBase, logLevel string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return errUsage("--log-level %q: want debug, info, warn or error", logLevel)
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	for _, p := range []*string{&socket, &stateDir, &mountBase} {
		if *p == "" {
			continue
		}
		abs, err := baseDir(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if mountBase == "" {
		mountBase = defaultMountBase(socket)
	}

	// Catch the stop signals before anything is mounted.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	defer startHeapProfiler(logger)()

	m, err := mounts.New(mounts.Config{StateDir: stateDir, MountBase: mountBase, Logger: logger,
		Hidden: []string{socket}}) // the socket: hidden from every host view
	if err != nil {
		return serveInputErr(err)
	}
	l, err := mounts.Listen(socket)
	if err != nil {
		m.Close(context.Background())
		return serveInputErr(err)
	}
	defer os.Remove(socket)

	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	go func() {
		select {
		case sig := <-sigs:
			logger.Info("stopping", "signal", sig.String())
			cancel()
		case <-ctx.Done():
		}
	}()

	if err := m.Recover(ctx); err != nil {
		logger.Error("recover", "err", err)
	}
	logger.Info("serving", "socket", socket, "state_dir", m.StateDir(), "mount_base", m.MountBase(), "sessions", m.Len())
	api := mounts.NewAPI(m, logger)
	serveErr := api.Serve(ctx, l)
	l.Close()
	closeErr := m.Close(context.Background())
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		return fmt.Errorf("serve %s: %w", socket, serveErr)
	}
	if closeErr != nil {
		return fmt.Errorf("unmount sessions: %s", firstLine(closeErr.Error()))
	}
	logger.Info("stopped")
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
