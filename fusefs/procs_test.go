package fusefs_test

import (
	"runtime"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/transport"
)

func TestServerProcs(t *testing.T) {
	for _, c := range []struct {
		procs int
		ring  bool
		want  int
	}{
		{1, false, 1}, {2, false, 1}, {4, false, 1}, {7, false, 1}, {8, false, 2}, {16, false, 4}, {64, false, 16},
		{1, true, 1}, {2, true, 2}, {7, true, 7}, {64, true, 64},
	} {
		if got := fusefs.ServerProcs(c.procs, c.ring); got != c.want {
			t.Errorf("ServerProcs(%d, %v) = %d, want %d", c.procs, c.ring, got, c.want)
		}
	}
}

// TuneProcs leaves a GOMAXPROCS given in the environment alone, and else
// sets ServerProcs of the runtime's value: a quarter for /dev/fuse, all of
// it when the mounts will be served over io_uring (the kernel's parameter
// on and a mode other than dev).
func TestTuneProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.GOMAXPROCS(8)
	t.Setenv("GOMAXPROCS", "8")
	if got := fusefs.TuneProcs(transport.Dev); got != 8 || runtime.GOMAXPROCS(0) != 8 {
		t.Errorf("with GOMAXPROCS=8 in the environment: TuneProcs(dev) = %d, GOMAXPROCS %d; want 8, 8", got, runtime.GOMAXPROCS(0))
	}
	t.Setenv("GOMAXPROCS", "")
	if got := fusefs.TuneProcs(transport.Dev); got != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("without GOMAXPROCS, from 8: TuneProcs(dev) = %d, GOMAXPROCS %d; want 2, 2", got, runtime.GOMAXPROCS(0))
	}
	_, on := transport.KernelURing()
	want := 2
	if on {
		want = 8
	}
	for _, m := range []transport.Mode{transport.IOURing, transport.Auto} {
		runtime.GOMAXPROCS(8)
		if got := fusefs.TuneProcs(m); got != want || runtime.GOMAXPROCS(0) != want {
			t.Errorf("without GOMAXPROCS, from 8, enable_uring %v: TuneProcs(%s) = %d, GOMAXPROCS %d; want %d", on, m, got, runtime.GOMAXPROCS(0), want)
		}
	}
}
