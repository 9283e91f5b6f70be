package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/wsfs/wsfs/csi"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/transport"
)

func init() { registerCommand(newCSICmd) }

// csiFlags are the flags of `wsfs csi`.
type csiFlags struct {
	endpoint, nodeID, stateDir, mountBase, allowedRoots string
	driverName, metricsAddr, logLevel, fuseTransport    string
	apiSocket                                           string
	keep                                                bool
}

// newCSICmd returns the `wsfs csi` verb.
func newCSICmd() *cobra.Command {
	var f csiFlags
	cmd := &cobra.Command{
		Use:   "csi --endpoint unix:///csi/csi.sock --node-id NODE --state-dir DIR --mount-base DIR --allowed-roots DIR[,DIR...]",
		Short: "Run the Kubernetes CSI node plugin: one wsfs session per ephemeral inline volume",
		Long: `Run the CSI Identity and Node services on a Unix socket (no Controller:
volumes are ephemeral inline csi: volumes). NodePublishVolume creates a
session from the volume's attributes (root, mode, addRoots, protect, symlinks,
session, users, layer; root and every additional root under --allowed-roots) and
bind-mounts its mount at the pod's target path; NodeUnpublishVolume unmounts
it and removes the session.

On start the plugin mounts every session recorded in --state-dir again and
binds each published volume at its target again (a dead bind left by a killed
plugin is replaced), then answers Probe ready once FUSE works. The line
"msg=serving" on stderr says the socket answers.

SIGTERM or SIGINT: stop answering, unbind the targets and unmount the sessions
(records stay; the next start serves them again), exit 0.

--keep-connections (root): the sessions' FUSE connections are kept outside
the plugin (a holder process, as wsfs serve keeps them), so a plugin restart
or a DaemonSet rollout is a pause for the pods, never a dead mount: after a
kill -9 the next start serves them on, and SIGTERM stops without unbinding
or unmounting (SIGINT is then the full stop above).

--metrics-address HOST:PORT or unix:///PATH serves GET /metrics (the daemon's
metrics and the CSI calls).

--api-socket PATH also answers the daemon API (wsfs serve's, docs/api.md) on
a Unix socket (mode 0600, only the plugin's uid): the operator's way to a
volume's session, e.g. a layered volume's (attribute layer=true) diff and
commit: wsfs session diff SESSION --socket PATH. Off by default.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCSI(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint (unix:///PATH)")
	fl.StringVar(&f.nodeID, "node-id", "", "node id reported to kubelet (the node name; required)")
	fl.StringVar(&f.stateDir, "state-dir", "/var/lib/wsfs-csi", "directory of session records")
	fl.StringVar(&f.mountBase, "mount-base", "/var/lib/wsfs-csi-mnt", "parent directory of the session mounts")
	fl.StringVar(&f.allowedRoots, "allowed-roots", "", "comma-separated directories volumes may serve (required)")
	fl.StringVar(&f.driverName, "driver-name", csi.DefaultDriverName, "CSI driver name")
	fl.StringVar(&f.metricsAddr, "metrics-address", "", "serve /metrics on HOST:PORT or unix:///PATH (default: off)")
	fl.StringVar(&f.apiSocket, "api-socket", "", "also answer the daemon API on this Unix socket, mode 0600 (default: off)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.BoolVar(&f.keep, "keep-connections", false, "keep the sessions' FUSE connections outside the plugin so that pods' volumes survive its restart (needs root)")
	addTransportFlag(fl, &f.fuseTransport)
	return cmd
}

// runCSI runs the plugin until SIGTERM or SIGINT.
func runCSI(cmd *cobra.Command, f csiFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return errUsage("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	mode, err := transportFlag(f.fuseTransport)
	if err != nil {
		return err
	}
	if f.nodeID == "" {
		return errUsage("--node-id: required (the Kubernetes node name)")
	}
	sock, err := csi.ParseEndpoint(f.endpoint)
	if err != nil {
		return errUsage("--endpoint: %v", err)
	}
	var roots []string
	for _, r := range strings.Split(f.allowedRoots, ",") {
		if r = strings.TrimSpace(r); r != "" {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return errUsage("--allowed-roots: at least one directory is required")
	}
	ml, err := parseMetricsAddress(f.metricsAddr)
	if err != nil {
		return err
	}
	if f.apiSocket != "" && !filepath.IsAbs(f.apiSocket) {
		return errUsage("--api-socket %q: must be an absolute path", f.apiSocket)
	}
	for _, p := range []*string{&f.stateDir, &f.mountBase} {
		if *p, err = baseDir(*p); err != nil {
			return err
		}
	}
	// Checked before the state directory and the mount base are made.
	if err := csi.CheckApart(roots, f.stateDir, f.mountBase); err != nil {
		return errUsage("--allowed-roots: %v", err)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	mcfg := mounts.Config{StateDir: f.stateDir, MountBase: f.mountBase, Logger: logger, FuseTransport: mode}
	if f.keep {
		if os.Geteuid() != 0 {
			return errUsage("--keep-connections: needs root (open_by_handle_at(2) finds a session's files again after a restart)")
		}
		if mcfg.Store, err = connectionStore(f.stateDir, logger); err != nil {
			return err
		}
	}
	m, err := mounts.New(mcfg)
	if err != nil {
		return serveInputErr(err)
	}
	p, err := csi.New(csi.Config{DriverName: f.driverName, Version: buildVersion(), NodeID: f.nodeID, AllowedRoots: roots, Manager: m, Logger: logger})
	if err != nil {
		m.Close(context.Background())
		return errUsage("--allowed-roots: %v", err)
	}
	l, err := mounts.Listen(sock)
	if err != nil {
		m.Close(context.Background())
		return serveInputErr(err)
	}
	defer os.Remove(sock)
	stopMetrics, err := ml.serve(p.MetricsHandler(), logger)
	if err != nil {
		l.Close()
		m.Close(context.Background())
		return err
	}
	defer stopMetrics()
	var apiL net.Listener
	if f.apiSocket != "" {
		if apiL, err = mounts.Listen(f.apiSocket); err != nil {
			l.Close()
			m.Close(context.Background())
			return fmt.Errorf("--api-socket: %w", serveInputErr(err))
		}
		defer os.Remove(f.apiSocket)
		defer apiL.Close() // when a later step fails; Serve closes it too
	}

	if mcfg.Store != nil {
		if err := startStore(mcfg.Store, logger); err != nil {
			l.Close()
			m.Close(context.Background())
			return err
		}
	}
	reports := p.Start(cmd.Context())
	restored := 0
	for _, r := range reports {
		if r.Restored {
			restored++
		}
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(p.Interceptor))
	p.Register(gs)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(l) }()
	apiCtx, stopAPI := context.WithCancel(context.Background())
	apiDone := make(chan struct{})
	if apiL != nil {
		// After Start: the sessions it answers for are recovered.
		go func() {
			defer close(apiDone)
			if err := p.ServeAPI(apiCtx, apiL); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("api socket", "socket", f.apiSocket, "err", err)
			}
		}()
	} else {
		close(apiDone)
	}
	args := []any{"endpoint", sock, "driver", p.Name(), "node", f.nodeID, "state_dir", m.StateDir(), "mount_base", m.MountBase(), "volumes", len(reports), "restored", restored}
	if f.apiSocket != "" {
		args = append(args, "api_socket", f.apiSocket)
	}
	logger.Info("serving", args...)

	var serveErr error
	fullStop := mcfg.Store == nil
	select {
	case sig := <-sigs:
		fullStop = fullStop || sig == syscall.SIGINT
		logger.Info("stopping", "signal", sig.String(), "full_stop", fullStop)
	case serveErr = <-done:
	}
	stopAPI() // finishes the requests in flight
	<-apiDone
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		gs.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var closeErr error
	if fullStop {
		closeErr = p.Close(ctx)
		if h, ok := mcfg.Store.(*transport.Holder); ok && closeErr == nil {
			h.Exit()
		}
	} else {
		closeErr = p.Detach(ctx)
	}
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
		return fmt.Errorf("serve %s: %w", sock, serveErr)
	}
	if closeErr != nil {
		return fmt.Errorf("unmount sessions: %s", firstLine(closeErr.Error()))
	}
	logger.Info("stopped")
	return nil
}
