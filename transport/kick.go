package transport

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kick after a takeover (uring_takeover.go). A request made while no
// server of a connection on the ring runs waits on the list of its CPU's
// queue, and the kernel hands such a request out only at the next
// COMMIT_AND_FETCH on that queue: a successor whose queues took over no
// request there would leave it waiting until some other request came on
// that CPU. So after a takeover each queue gets one request: a stat of
// the mount's root (statx(2) AT_STATX_FORCE_SYNC, a GETATTR) from a thread
// pinned to the queue's CPU, whose commit hands out the first request that
// waited, and so on down the list.
//
// The stat is made by a child process (this executable again, kickEnv set:
// the package's init runs it and exits), never by the daemon: a process
// killed while it waits for an answer from its own mount cannot exit until
// a successor answers, and it would keep the state directory's lock from
// that very successor (docs/design.md, "Recovery"). The kicks of the
// connections taken over at once go to one child (kickLater batches them).

// kickEnv names the environment variable that makes this executable the
// kicker: the JSON of a []string of mount points.
const kickEnv = "WSFS_RING_KICK"

// kickWait bounds how long a kicker may run before it is killed (a stat of
// a mount no server serves waits; the kick is best effort).
const kickWait = time.Minute

func init() {
	if v, ok := os.LookupEnv(kickEnv); ok {
		var mps []string
		if json.Unmarshal([]byte(v), &mps) == nil {
			kick(mps)
		}
		os.Exit(0)
	}
}

// kick stats each mount point's root from a thread pinned to each CPU this
// process may run on.
func kick(mps []string) {
	runtime.LockOSThread()
	var all unix.CPUSet
	if unix.SchedGetaffinity(0, &all) != nil {
		return
	}
	n, err := possibleCPUs()
	if err != nil {
		return
	}
	for cpu := range n {
		if !all.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if unix.SchedSetaffinity(0, &one) != nil {
			continue
		}
		for _, mp := range mps {
			var stx unix.Statx_t
			_ = unix.Statx(unix.AT_FDCWD, mp, unix.AT_STATX_FORCE_SYNC|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx)
		}
	}
}

var kicks struct {
	sync.Mutex
	pending []string
	timer   *time.Timer
	log     *slog.Logger
}

// kickDelay gathers the kicks of connections taken over together.
const kickDelay = 20 * time.Millisecond

// kickLater has the kicker stat mountpoint from every CPU soon, with the
// other mount points asked for meanwhile.
func kickLater(mountpoint string, log *slog.Logger) {
	kicks.Lock()
	defer kicks.Unlock()
	kicks.pending = append(kicks.pending, mountpoint)
	kicks.log = log
	if kicks.timer == nil {
		kicks.timer = time.AfterFunc(kickDelay, runKicker)
	} else {
		kicks.timer.Reset(kickDelay)
	}
}

// runKicker starts the kicker for the pending mount points and reaps it
// (killed after kickWait).
func runKicker() {
	kicks.Lock()
	mps, log := kicks.pending, kicks.log
	kicks.pending, kicks.timer = nil, nil
	kicks.Unlock()
	if len(mps) == 0 {
		return
	}
	js, _ := json.Marshal(mps)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{kickEnv + "=" + string(js)}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		log.Warn("fuse transport: no kick after a takeover: a request made while no server ran may wait for the next one on its CPU", "mountpoints", len(mps), "err", err)
		return
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(kickWait):
			cmd.Process.Kill()
		}
	}()
	go func() {
		cmd.Wait()
		close(done)
	}()
}
