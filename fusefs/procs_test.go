package fusefs_test

import (
	"runtime"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

func TestServerProcs(t *testing.T) {
	for _, c := range []struct{ procs, want int }{{1, 1}, {2, 1}, {4, 1}, {7, 1}, {8, 2}, {16, 4}, {64, 16}} {
		if got := fusefs.ServerProcs(c.procs); got != c.want {
			t.Errorf("ServerProcs(%d) = %d, want %d", c.procs, got, c.want)
		}
	}
}

// TuneProcs leaves a GOMAXPROCS given in the environment alone, and else
// sets ServerProcs of the runtime's value.
func TestTuneProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.GOMAXPROCS(8)
	t.Setenv("GOMAXPROCS", "8")
	if got := fusefs.TuneProcs(); got != 8 || runtime.GOMAXPROCS(0) != 8 {
		t.Errorf("with GOMAXPROCS=8 in the environment: TuneProcs() = %d, GOMAXPROCS %d; want 8, 8", got, runtime.GOMAXPROCS(0))
	}
	t.Setenv("GOMAXPROCS", "")
	if got := fusefs.TuneProcs(); got != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("without GOMAXPROCS, from 8: TuneProcs() = %d, GOMAXPROCS %d; want 2, 2", got, runtime.GOMAXPROCS(0))
	}
}
