package mounts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
)

// appendLoop keeps $MNT/appended open and appends its counter every 10 ms
// until $CTL/stop exists; it prints the count, exit 9 on a failed write.
const appendLoop = `exec 4>>"$MNT/appended" || exit 9
i=0
while [ ! -e "$CTL/stop" ]; do echo "$i" >&4 || exit 9; i=$((i+1)); sleep 0.01; done
echo "$i"`

// mmapLoop writes its counter through a shared mapping of $MNT/mapped
// every 10 ms until $CTL/stop exists, then prints the last value written.
const mmapLoop = `import mmap, os, sys, time
fd = os.open(os.environ["MNT"] + "/mapped", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
i = 0
while not os.path.exists(os.environ["CTL"] + "/stop"):
    i += 1
    s = b"%020d" % i
    m[0:20] = s
    m.flush()
    time.sleep(0.01)
m.close()
print(i)`

// confineLoop runs `wsfs exec --confine` on session $SID over and over
// until $CTL/stop exists, each jail appending its counter to
// $WSFS_ROOT/confined; it prints the count, exit 9 on a failed exec.
const confineLoop = `i=0
while [ ! -e "$CTL/stop" ]; do
  "$WSFS" exec --session "$SID" --confine -- sh -c 'echo "$1" >> "$WSFS_ROOT/confined"' sh "$i" || exit 9
  i=$((i+1))
done
echo "$i"`

// jailLoop is one jail (`wsfs exec --confine`) that lives across every
// restart, appending its counter to $WSFS_ROOT/jailed every 10 ms until
// $WSFS_ROOT/stop exists (the control directory lies in the daemon's
// directory, which a jail hides); it prints the count, exit 9 on a failed
// write.
const jailLoop = `"$WSFS" exec --session "$SID" --confine -- sh -c '
i=0
while [ ! -e "$WSFS_ROOT/stop" ]; do echo "$i" >> "$WSFS_ROOT/jailed" || exit 9; i=$((i+1)); sleep 0.01; done
echo "$i"'`

// TestMeasureOutlive measures issue 18's acceptance run (hack/measure-outlive.sh):
// WSFS_MEASURE_N sessions (default 20), each with a shell loop (sessionLoop:
// create, append+fsync, read-back, mkdir/rmdir, rename, readdir, stat, git
// status, with a descriptor held for append), plus a process appending to a
// held file every 10 ms and one writing through a shared mmap, an
// `exec --confine` loop (confineLoop) and one jail living through every
// restart (jailLoop), while 10 takeovers and 10 kill -9 + starts alternate
// between two builds of wsfs.
// It fails on any failed operation or lost write, and prints the pause per
// kind of restart (the longest time between two rounds of any shell across
// it): p50, p99 and max.
func TestMeasureOutlive(t *testing.T) {
	if os.Getenv("WSFS_MEASURE") != "1" {
		t.Skip("set WSFS_MEASURE=1 to measure (hack/measure-outlive.sh)")
	}
	n := 20
	if v := os.Getenv("WSFS_MEASURE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("WSFS_MEASURE_N=%q: want a count of at least 2", v)
		}
	}
	dir := newDaemonDir(t)
	ctl := filepath.Join(dir, "ctl")
	if err := os.Mkdir(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	// The other build: the same source, another version stamp.
	binB := filepath.Join(dir, "wsfs-b")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-measure-b", "-o", binB, "github.com/wsfs/wsfs/cmd/wsfs").CombinedOutput(); err != nil {
		t.Fatalf("go build the second build: %v\n%s", err, out)
	}
	bins := []string{wsfsBin, binB}
	start := func(i int) *daemon {
		return startDaemonBin(t, bins[i%2], dir, filepath.Join(dir, "state"), filepath.Join(dir, "mnt"), nil)
	}
	d := start(0)
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
	var roots, mps []string
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		root := filepath.Join(dir, id)
		mkTree(t, root, "a/b/c/")
		if r := run(t, commandf("git -C %s init -q && git -C %s commit -q --allow-empty -m init", root, root)); r.code != 0 {
			t.Fatalf("git init: %+v", r)
		}
		s, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		roots, mps = append(roots, root), append(mps, s.Mountpoint)
		l := startLoop(t, s.Mountpoint, ctl, filepath.Join(root, "a/b/c"))
		l.log = logs
		loops = append(loops, l)
	}
	var bg0 []string // the background writers started so far: the next one works in session len(bg0)
	bg := func(name string, argv ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MNT="+mps[len(bg0)], "CTL="+ctl, "SID="+fmt.Sprintf("s%02d", len(bg0)),
			"WSFS="+wsfsBin, "WSFS_SOCKET="+d.socket)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		bg0 = append(bg0, name)
		return cmd, &out
	}
	app, appOut := bg("appender", "sh", "-c", appendLoop)
	var mm *exec.Cmd
	var mmOut *strings.Builder
	if _, err := exec.LookPath("python3"); err == nil {
		mm, mmOut = bg("mmap writer", "python3", "-c", mmapLoop)
	}
	var jailCmds []*exec.Cmd
	var jailOuts []*strings.Builder
	var jailFiles []string
	jailStop := "" // the jail loop's stop file
	if haveJail() {
		for _, c := range []struct{ name, script, file string }{{"exec --confine loop", confineLoop, "confined"}, {"jail", jailLoop, "jailed"}} {
			if c.script == jailLoop {
				jailStop = filepath.Join(roots[len(bg0)], "stop")
			}
			jailFiles = append(jailFiles, filepath.Join(roots[len(bg0)], c.file))
			cmd, out := bg(c.name, "sh", "-c", c.script)
			jailCmds, jailOuts = append(jailCmds, cmd), append(jailOuts, out)
		}
	} else {
		t.Log("bwrap is not installed: no exec --confine loop")
	}
	for i, l := range loops {
		l.next(t, fmt.Sprintf("s%02d before any restart", i))
	}
	pauses := map[string][]time.Duration{}
	for round := range 10 {
		for _, kind := range []string{"takeover", "kill -9"} {
			for _, l := range loops {
				l.resetGap()
			}
			switch kind {
			case "kill -9":
				d.kill()
				d.waitExit(t)
				d = start(round + 1)
			case "takeover":
				old := d
				d = start(round)
				old.waitExit(t)
			}
			all = append(all, d)
			for i, l := range loops {
				l.next(t, fmt.Sprintf("s%02d after %s #%d", i, kind, round))
				l.next(t, fmt.Sprintf("s%02d after %s #%d", i, kind, round))
			}
			var g time.Duration
			for _, l := range loops {
				g = max(g, l.gap())
			}
			pauses[kind] = append(pauses[kind], g)
			if !strings.Contains(d.logText(), "session served on") {
				t.Fatalf("after %s #%d the sessions were mounted again, not served on:\n%s", kind, round, d.logText())
			}
		}
	}
	if jailStop != "" {
		if err := os.WriteFile(jailStop, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stopLoops(t, ctl, loops, roots, logs)
	if err := app.Wait(); err != nil {
		t.Fatalf("appender: %v\n%s", err, appOut.String())
	}
	k, _ := strconv.Atoi(strings.TrimSpace(appOut.String()))
	if data, err := os.ReadFile(filepath.Join(roots[0], "appended")); err != nil || !slices.Equal(strings.Fields(string(data)), counting(k)) {
		t.Fatalf("appended: %d writes acknowledged, the file on disk differs (%v)", k, err)
	}
	if mm != nil {
		if err := mm.Wait(); err != nil {
			t.Fatalf("mmap writer: %v\n%s", err, mmOut.String())
		}
		last, _ := strconv.Atoi(strings.TrimSpace(mmOut.String()))
		data, err := os.ReadFile(filepath.Join(roots[1], "mapped"))
		if err != nil || len(data) < 20 || string(data[:20]) != fmt.Sprintf("%020d", last) {
			t.Fatalf("mapped: the last value written %d, on disk %q (%v)", last, data[:min(len(data), 20)], err)
		}
	}
	for i, cmd := range jailCmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Args, err, jailOuts[i].String())
		}
		k, _ := strconv.Atoi(strings.TrimSpace(jailOuts[i].String()))
		if data, err := os.ReadFile(jailFiles[i]); err != nil || !slices.Equal(strings.Fields(string(data)), counting(k)) {
			t.Fatalf("%s: %d writes acknowledged, the file on disk differs (%v):\n%s", jailFiles[i], k, err, data)
		}
		fmt.Printf("MEASURE outlive: %s wrote %d times across the restarts, none failed\n", filepath.Base(jailFiles[i]), k)
	}
	for _, kind := range []string{"takeover", "kill -9"} {
		p := pauses[kind]
		slices.Sort(p)
		fmt.Printf("MEASURE outlive %d sessions, %d %s restarts (two builds alternating): pause p50 %v, p99 %v, max %v\n",
			n, len(p), kind, p[len(p)/2].Round(time.Millisecond), p[(len(p)*99-1)/100].Round(time.Millisecond), p[len(p)-1].Round(time.Millisecond))
	}
	for i := range n {
		if err := d.c.Remove(ctx, fmt.Sprintf("s%02d", i), false); err != nil {
			t.Fatal(err)
		}
	}
}

// counting returns "0" … "k-1".
func counting(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}
