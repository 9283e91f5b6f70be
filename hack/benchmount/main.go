// Command benchmount mounts a directory through fusefs.Mount with the default
// configuration (workspace-write policy over the root, no temp roots) for
// hack/bench.sh. It is a benchmark harness, not a product command.
//
// It prints "ready" on stdout once the kernel serves the mount, then serves
// until SIGTERM or SIGINT, unmounts and writes Stats() as JSON to -stats. On
// SIGUSR1 it writes the current Stats() to -stats as well (written to a
// temporary file and renamed, so a reader that waits for the file to appear
// never sees half of it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

func main() {
	root := flag.String("root", "", "directory to serve (absolute)")
	mountpoint := flag.String("mountpoint", "", "empty directory to mount on (absolute)")
	stats := flag.String("stats", "", "file to write Stats() JSON to on SIGUSR1 and on exit")
	debug := flag.Bool("debug", false, "log every FUSE request to stderr (go-fuse debug output)")
	noWatch := flag.Bool("nowatch", false, "mount without the host-change watcher (fusefs.Config.NoWatch), to measure its cost")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the server to this file until exit")
	keep := flag.String("keep", "", "keep the connection in a holder listening at this socket (started in this process), as wsfs serve does, to measure what keeping state costs")
	fuseTransport := flag.String("fuse-transport", "", "auto, io-uring or dev (fusefs.Config.Transport; default auto)")
	layerDir := flag.String("layer", "", "serve the root on a copy-on-write layer kept in this directory (mounts.OpenLayer), as a layered session")
	flag.Parse()
	if *root == "" || *mountpoint == "" {
		fmt.Fprintln(os.Stderr, "usage: benchmount -root DIR -mountpoint DIR [-stats FILE] [-debug]")
		os.Exit(2)
	}
	// As `wsfs mount` does.
	fusefs.TuneProcs(transport.Mode(*fuseTransport))
	pol, err := policy.Compile(policy.Spec{Primary: *root, Temp: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmount: policy:", err)
		os.Exit(1)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmount:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "benchmount:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	// Subscribe before mounting so an early signal is not lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)

	cfg := fusefs.Config{
		Root:       *root,
		Mountpoint: *mountpoint,
		Policy:     pol,
		Debug:      *debug,
		Session:    "bench",
		NoWatch:    *noWatch,
		Transport:  transport.Mode(*fuseTransport),
	}
	if *layerDir != "" {
		l, err := mounts.OpenLayer(*layerDir, *root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchmount:", err)
			os.Exit(1)
		}
		defer l.Close()
		cfg = l.Config(cfg)
	}
	if *keep != "" {
		listening := make(chan struct{})
		go transport.RunHolder(*keep, func() { close(listening) })
		<-listening
		cfg.Keep = &transport.Holder{Socket: *keep}
	}
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmount:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "benchmount: transport", srv.Transport())
	fmt.Println("ready")

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()

	for {
		select {
		case <-done:
			// Unmounted from outside.
			dump(*stats, srv.Stats())
			return
		case s := <-sigs:
			if s == syscall.SIGUSR1 {
				dump(*stats, srv.Stats())
				continue
			}
			st := srv.Stats()
			// A shell that just left the mount may still hold it for a
			// moment; retry, then detach lazily.
			var uerr error
			for i := 0; i < 20; i++ {
				if uerr = srv.Unmount(false); uerr == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if uerr != nil {
				fmt.Fprintln(os.Stderr, "benchmount:", uerr, "(detaching lazily)")
				if err := srv.Unmount(true); err != nil {
					fmt.Fprintln(os.Stderr, "benchmount:", err)
				}
			}
			dump(*stats, st)
			return
		}
	}
}

func dump(path string, st fusefs.Stats) {
	if path == "" {
		return
	}
	b, err := json.Marshal(st)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmount: stats:", err)
		return
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "benchmount: stats:", err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		fmt.Fprintln(os.Stderr, "benchmount: stats:", err)
	}
}
