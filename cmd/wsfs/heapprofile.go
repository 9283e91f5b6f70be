package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// heapProfileEnv names the environment variable that turns on the daemon's
// heap profile for measurements (hack/measure-scale.sh): when it holds an
// absolute path and the daemon runs as root, SIGUSR1 makes `wsfs serve` run
// a garbage collection and write a heap profile (runtime/pprof, the "heap"
// profile, readable with `go tool pprof`) there, mode 0600, written to a
// temporary file and renamed so a reader never sees half of one. Off by
// default; no listener of any kind is opened.
const heapProfileEnv = "WSFS_DEBUG_HEAP_PROFILE"

// startHeapProfiler installs the SIGUSR1 handler of heapProfileEnv when it is
// set; it returns a function that removes it. A relative path, or a daemon
// not running as root, is logged and ignored.
func startHeapProfiler(logger *slog.Logger) (stop func()) {
	path := os.Getenv(heapProfileEnv)
	switch {
	case path == "":
		return func() {}
	case !filepath.IsAbs(path):
		logger.Warn(heapProfileEnv+": must be an absolute path; heap profiles off", "path", path)
		return func() {}
	case os.Geteuid() != 0:
		logger.Warn(heapProfileEnv+": only a daemon running as root writes heap profiles; off", "path", path)
		return func() {}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				if err := writeHeapProfile(path); err != nil {
					logger.Warn("heap profile", "path", path, "err", err)
				} else {
					logger.Info("heap profile written", "path", path)
				}
			case <-done:
				return
			}
		}
	}()
	logger.Info("heap profiles on SIGUSR1", "path", path)
	return func() { signal.Stop(sig); close(done) }
}

// writeHeapProfile writes the heap profile, after a GC, to path (through a
// temporary file in its directory, renamed).
func writeHeapProfile(path string) error {
	runtime.GC()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
