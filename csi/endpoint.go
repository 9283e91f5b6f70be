package csi

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ParseEndpoint returns the socket path of a CSI endpoint: "unix:///ABS" or
// "unix:/ABS" (the forms kubelet and the CSI sidecars use), or an absolute
// path. Anything else (tcp://, a relative path) is an error naming the rule:
// the Node service is reachable only through a Unix socket.
func ParseEndpoint(endpoint string) (string, error) {
	p := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(endpoint, "unix:"); ok {
		p = rest
	}
	if !filepath.IsAbs(p) || strings.Contains(p, "://") {
		return "", fmt.Errorf("endpoint %q: want unix:///ABSOLUTE/PATH", endpoint)
	}
	return filepath.Clean(p), nil
}

// ParseMetricsAddress returns the network ("tcp" or "unix") and address of
// a metrics listener: "unix:///ABS" (or "unix:/ABS") for a Unix socket,
// "HOST:PORT", ":PORT" or "tcp://HOST:PORT" for TCP.
func ParseMetricsAddress(addr string) (network, address string, err error) {
	if strings.HasPrefix(addr, "unix:") {
		p, err := ParseEndpoint(addr)
		if err != nil {
			return "", "", fmt.Errorf("metrics address %q: want unix:///ABSOLUTE/PATH or HOST:PORT", addr)
		}
		return "unix", p, nil
	}
	a := strings.TrimPrefix(addr, "tcp://")
	if i := strings.LastIndex(a, ":"); i < 0 || i == len(a)-1 || strings.Contains(a, "/") {
		return "", "", fmt.Errorf("metrics address %q: want unix:///ABSOLUTE/PATH or HOST:PORT", addr)
	}
	return "tcp", a, nil
}
