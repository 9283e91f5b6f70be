package main

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/wsfs/wsfs/csi"
	"github.com/wsfs/wsfs/mounts"
)

// metricsListener is a --metrics-address parsed: "" network when off.
type metricsListener struct {
	flag, network, address string
}

// parseMetricsAddress parses a --metrics-address value (csi.ParseMetricsAddress:
// unix:///ABS, HOST:PORT, :PORT, tcp://HOST:PORT); "" is off.
func parseMetricsAddress(v string) (metricsListener, error) {
	if v == "" {
		return metricsListener{}, nil
	}
	n, a, err := csi.ParseMetricsAddress(v)
	if err != nil {
		return metricsListener{}, errUsage("--metrics-address: %v", err)
	}
	return metricsListener{flag: v, network: n, address: a}, nil
}

// serve listens (a Unix socket with mode 0600, mounts.Listen, or TCP) and
// serves h at /metrics in the background, without the API's peer check:
// the operator chose to expose it. stop closes the listener (and removes a Unix socket). A listener that
// cannot be made is a usage error naming the flag.
func (ml metricsListener) serve(h http.Handler, logger *slog.Logger) (stop func(), err error) {
	if ml.network == "" {
		return func() {}, nil
	}
	var l net.Listener
	if ml.network == "unix" {
		l, err = mounts.Listen(ml.address)
	} else {
		l, err = net.Listen("tcp", ml.address)
	}
	if err != nil {
		return nil, errUsage("--metrics-address %q: %v", ml.flag, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	logger.Info("metrics", "address", l.Addr().String())
	return func() {
		hs.Close()
		if ml.network == "unix" {
			os.Remove(ml.address)
		}
	}, nil
}
