package mounts_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/transport"
)

// sessionLoop is a shell working in a session mount while daemons come and
// go: cwd three levels deep, fd 3 held open for append, and a loop of
// create, append+fsync... (dd conv=fsync), read-back, mkdir/rmdir, rename,
// readdir, stat and git status, printing "ok N" after each round on its
// stdout (a pipe the test reads) until $CTL/stop exists. Its first failure
// prints "FAIL N: what" and exits 1.
const sessionLoop = `cd "$MNT/a/b/c" || { echo "FAIL 0: cd"; exit 1; }
exec 3>>held
i=0
fail() { echo "FAIL $i: $*"; exit 1; }
while [ ! -e "$CTL/stop" ]; do
	echo "$i" >&3 || fail "append held"
	echo "x$i" > "f$i" || fail create
	printf 'y\n' | dd of="f$i" oflag=append conv=notrunc,fsync status=none || fail "append+fsync"
	[ "$(cat "f$i")" = "x$i
y" ] || fail "read back: $(cat "f$i")"
	mkdir "d$i" && rmdir "d$i" || fail mkdir/rmdir
	mv "f$i" "g$i" || fail "rename: $(ls -la 2>&1 | tr '\n' '|') $(stat -c '%i %s' "f$i" "g$i" 2>&1 | tr '\n' '|') $(ls -la "$REAL" | tr '\n' '|')"
	ls >/dev/null || fail readdir
	stat -c %s "g$i" >/dev/null || fail stat
	rm "g$i" || fail unlink
	git -C "$MNT" status --porcelain >/dev/null || fail "git status"
	echo "ok $i"
	i=$((i+1))
done
echo "done $i"
`

// loop is one running sessionLoop.
type loop struct {
	log   func() string // the daemons' logs, for a failure
	cmd   *exec.Cmd
	lines chan string
	last  int // the last round seen

	mu     sync.Mutex
	prev   time.Time     // when the last "ok" line arrived
	maxGap time.Duration // the longest time between two "ok" lines
}

// gap returns the longest time between two rounds so far.
func (l *loop) gap() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxGap
}

// stopLoops makes the loops stop ($CTL/stop) and checks that each ended
// well and that its held file (in roots[i]) holds every write it
// acknowledged, in order.
func stopLoops(t *testing.T, ctl string, loops []*loop, roots []string, logs func() string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(ctl, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, l := range loops {
		var last string
		for line := range l.lines {
			last = line
		}
		if err := l.cmd.Wait(); err != nil || !strings.HasPrefix(last, "done ") {
			t.Fatalf("loop %d: %v, last line %q\n%s", i, err, last, logs())
		}
		k, _ := strconv.Atoi(strings.TrimPrefix(last, "done "))
		data, err := os.ReadFile(filepath.Join(roots[i], "a/b/c/held"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(data)); !slices.Equal(got, counting(k)) {
			t.Fatalf("loop %d: held file has %d lines, %d rounds acknowledged, or out of order", i, len(got), k)
		}
	}
}

// resetGap starts measuring the longest time between two rounds afresh.
func (l *loop) resetGap() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxGap = 0
}

// startLoop starts sessionLoop in the mount mnt.
func startLoop(t *testing.T, mnt, ctl, real string) *loop {
	t.Helper()
	cmd := exec.Command("bash", "-c", sessionLoop)
	cmd.Env = append(os.Environ(), "MNT="+mnt, "CTL="+ctl, "REAL="+real)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &loop{cmd: cmd, lines: make(chan string, 1024), last: -1}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ok ") {
				now := time.Now()
				l.mu.Lock()
				if !l.prev.IsZero() {
					l.maxGap = max(l.maxGap, now.Sub(l.prev))
				}
				l.prev = now
				l.mu.Unlock()
			}
			l.lines <- sc.Text()
		}
		close(l.lines)
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return l
}

// next waits for the loop to finish one more round than it had.
func (l *loop) next(t *testing.T, name string) {
	t.Helper()
	want := l.last + 1
	for line := range l.lines {
		if n, ok := strings.CutPrefix(line, "ok "); ok {
			l.last, _ = strconv.Atoi(n)
			if l.last >= want {
				return
			}
			continue
		}
		t.Fatalf("%s: %s\ndaemon log:\n%s", name, line, l.log())
	}
	t.Fatalf("%s: the loop ended: %v\ndaemon log:\n%s", name, l.cmd.Wait(), l.log())
}

// TestSessionsOutliveDaemon (DESIGN.md, "Round 4"): shells working in three
// sessions go on without one failed operation while the daemon is killed
// with SIGKILL and started again, and while a new daemon takes over from a
// running one, and while it is stopped with SIGTERM (it detaches) and
// started again, three times each; every write acknowledged through the held
// descriptor is on disk, in order. The longest pause per kind of restart is
// logged.
func TestSessionsOutliveDaemon(t *testing.T) {
	dir := newDaemonDir(t)
	ctl := filepath.Join(dir, "ctl")
	if err := os.Mkdir(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir)
	all := []*daemon{d}
	logs := func() string {
		var b strings.Builder
		for i, d := range all {
			fmt.Fprintf(&b, "--- daemon %d\n%s", i, d.logText())
		}
		return b.String()
	}
	ctx := context.Background()
	var loops []*loop
	var roots []string
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		root := filepath.Join(dir, id)
		mkTree(t, root, "a/b/c/")
		if r := run(t, commandf("git -C %s init -q && git -C %s commit -q --allow-empty -m init", root, root)); r.code != 0 {
			t.Fatalf("git init: %+v", r)
		}
		s, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, root)
		l := startLoop(t, s.Mountpoint, ctl, filepath.Join(root, "a/b/c"))
		l.log = logs
		loops = append(loops, l)
	}
	for i, l := range loops {
		l.next(t, fmt.Sprintf("s%d before any restart", i))
	}
	pauses := map[string]time.Duration{}
	gaps := func() time.Duration {
		var g time.Duration
		for _, l := range loops {
			g = max(g, l.gap())
		}
		return g
	}
	for round := range 3 {
		for _, kind := range []string{"kill -9", "takeover", "SIGTERM"} {
			switch kind {
			case "kill -9":
				d.kill()
				d.waitExit(t)
				d = startDaemon(t, dir)
				all = append(all, d)
			case "SIGTERM":
				d.detach() // stops, the connections kept
				if !strings.Contains(d.logText(), "sessions detached") {
					t.Fatalf("round %d: SIGTERM did not detach:\n%s", round, d.logText())
				}
				d = startDaemon(t, dir)
				all = append(all, d)
			case "takeover":
				old := d
				d = startDaemon(t, dir) // SIGTERMs the running one, serves on
				all = append(all, d)
				old.waitExit(t)
				if !strings.Contains(d.logText(), "taking over from the running daemon") {
					t.Fatalf("round %d: the new daemon did not take over:\n%s", round, d.logText())
				}
			}
			before := gaps()
			for i, l := range loops {
				l.next(t, fmt.Sprintf("s%d after %s #%d", i, kind, round))
			}
			// Two more rounds each: the gap across the restart is in.
			for i, l := range loops {
				l.next(t, fmt.Sprintf("s%d after %s #%d", i, kind, round))
			}
			if g := gaps(); g > before {
				pauses[kind] = max(pauses[kind], g)
			}
			if !strings.Contains(d.logText(), "session served on") {
				t.Fatalf("after %s #%d the sessions were mounted again, not served on:\n%s", kind, round, d.logText())
			}
		}
	}
	stopLoops(t, ctl, loops, roots, logs)
	t.Logf("longest time between two rounds of a shell: across kill -9 + start %v, across a takeover %v, across SIGTERM + start %v",
		pauses["kill -9"], pauses["takeover"], pauses["SIGTERM"])
	for i := range 3 {
		if err := d.c.Remove(ctx, fmt.Sprintf("s%d", i), false); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHolderKilled: with the holder gone, the mounts serve on while the
// daemon lives (it has its own descriptors); after the daemon is killed too
// they are dead, and the next start mounts every session again, as without
// keeping, logged, and never hangs.
func TestHolderKilled(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, filepath.Join(dir, "p"), "sub/f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")})
	if err != nil {
		t.Fatal(err)
	}
	h := &transport.Holder{Socket: filepath.Join(d.stateDir, "holder.sock")}
	pid, err := h.Ping()
	h.Close()
	if err != nil {
		t.Fatalf("no holder: %v\n%s", err, d.logText())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := run(t, commandf("cat %s/sub/f", s.Mountpoint)); r.code != 0 || r.stdout != "sub/f" {
		t.Fatalf("read through the mount with the holder gone: %+v", r)
	}
	d.kill()
	d.waitExit(t)
	d2 := startDaemon(t, dir)
	if !strings.Contains(d2.logText(), `msg="session recovered" session=p`) {
		t.Fatalf("after the holder and the daemon were killed, want the session mounted again:\n%s", d2.logText())
	}
	if r := d2.exec(t, "p", nil, "cat", "sub/f"); r.code != 0 || r.stdout != "sub/f" {
		t.Fatalf("exec in p after the restart: %+v", r)
	}
	if err := d2.c.Remove(ctx, "p", false); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyAcrossTakeover: a policy changed while the daemon runs keeps its
// meaning across a takeover and a kill -9: a session narrowed to read-only
// stays read-only for the process that held its cwd through both (EROFS,
// exactly), and widened again it writes.
func TestPolicyAcrossTakeover(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, filepath.Join(dir, "p"), "sub/")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")})
	if err != nil {
		t.Fatal(err)
	}
	ro := "read-only"
	if _, err := d.c.PatchPolicy(ctx, "p", api.PolicyPatch{Mode: ro}); err != nil {
		t.Fatal(err)
	}
	// A shell that holds its cwd in the mount through both restarts, and
	// writes at each step given on its stdin.
	sh := exec.Command("bash", "-c", `cd "$0/sub" || exit 1; while read -r step; do touch "f-$step" 2>&1 | sed 's/.*: //'; echo "end $step"; done`, s.Mountpoint)
	in, _ := sh.StdinPipe()
	outp, _ := sh.StdoutPipe()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); sh.Process.Kill(); sh.Wait() })
	out := bufio.NewReader(outp)
	step := func(name string) string {
		t.Helper()
		fmt.Fprintln(in, name)
		var got []string
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: the shell ended: %v", name, err)
			}
			if line == "end "+name+"\n" {
				return strings.Join(got, "")
			}
			got = append(got, line)
		}
	}
	if got := step("before"); got != "Read-only file system\n" {
		t.Fatalf("write in the read-only session: %q", got)
	}
	old := d
	d = startDaemon(t, dir)
	old.waitExit(t)
	if got := step("takeover"); got != "Read-only file system\n" {
		t.Fatalf("write after the takeover: %q, want EROFS", got)
	}
	d.kill()
	d.waitExit(t)
	d = startDaemon(t, dir)
	if got := step("crash"); got != "Read-only file system\n" {
		t.Fatalf("write after kill -9 and a restart: %q, want EROFS", got)
	}
	ww := "workspace-write"
	if _, err := d.c.PatchPolicy(ctx, "p", api.PolicyPatch{Mode: ww}); err != nil {
		t.Fatal(err)
	}
	if got := step("widened"); got != "" {
		t.Fatalf("write after widening: %q, want none", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "p/sub/f-widened")); err != nil {
		t.Fatalf("the write after widening is not on disk: %v", err)
	}
	for _, n := range []string{"before", "takeover", "crash"} {
		if _, err := os.Lstat(filepath.Join(dir, "p/sub/f-"+n)); !os.IsNotExist(err) {
			t.Errorf("f-%s exists on disk: %v", n, err)
		}
	}
	in.Close()
	sh.Wait()
	if err := d.c.Remove(ctx, "p", false); err != nil {
		t.Fatal(err)
	}
}

// TestTwoSuccessors: two daemons started at once on a running one's state
// directory end with exactly one serving the sessions: the other either
// lost the race for the lock (exit 2, naming the winner) or was itself
// taken over after it had won (exit 0).
func TestTwoSuccessors(t *testing.T) {
	dir := newDaemonDir(t)
	a := startDaemon(t, dir)
	ctx := context.Background()
	mkTree(t, filepath.Join(dir, "p"), "f")
	s, err := a.c.Create(ctx, api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")})
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		cmd  *exec.Cmd
		errb lockedBuilder // read while the survivor still writes to it
		done chan error
	}
	var succ [2]*started
	for i := range succ {
		st := &started{done: make(chan error, 1)}
		st.cmd = exec.Command(wsfsBin, "serve", "--socket", a.socket, "--state-dir", a.stateDir, "--mount-base", a.mountBase)
		st.cmd.Stderr = &st.errb
		succ[i] = st
	}
	for _, st := range succ {
		if err := st.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { st.done <- st.cmd.Wait() }()
	}
	t.Cleanup(func() {
		for _, st := range succ {
			if st.cmd.Process.Signal(syscall.SIGINT) == nil {
				if err := <-st.done; err != nil {
					st.done <- err
				}
			}
		}
	})
	a.waitExit(t)
	// One of the two exits; the survivor is the other.
	var loser, winner *started
	select {
	case err := <-succ[0].done:
		loser, winner = succ[0], succ[1]
		succ[0].done <- err
	case err := <-succ[1].done:
		loser, winner = succ[1], succ[0]
		succ[1].done <- err
	}
	lerr := <-loser.done
	switch code := exitCode(lerr); {
	case code == 2 && strings.Contains(loser.errb.String(), "taken over by pid"):
	case code == 0 && strings.Contains(winner.errb.String(), "taking over from the running daemon"):
	default:
		t.Fatalf("the successor that exited: code %d\n%s\nthe other:\n%s", code, loser.errb.String(), winner.errb.String())
	}
	if r := run(t, commandf("cat %s/f", s.Mountpoint)); r.code != 0 || r.stdout != "f" {
		t.Fatalf("read through the mount after the two starts: %+v\nwinner:\n%s", r, winner.errb.String())
	}
	winner.cmd.Process.Signal(syscall.SIGINT)
	werr := <-winner.done
	winner.done <- werr
	if werr != nil {
		t.Fatalf("the serving successor on SIGINT: %v\n%s", werr, winner.errb.String())
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// lockedBuilder is a strings.Builder safe for one writer (a child's stderr
// copier) and concurrent readers.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
