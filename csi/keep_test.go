package csi_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfs/wsfs/transport"
)

// TestKeptVolumesSurviveRestarts (issue 18, wsfs csi): with
// --keep-connections, a loop working in each published volume goes on
// without one failed operation while the plugin is killed with SIGKILL and
// started again, and stopped with SIGTERM (a rollout) and started again:
// the pods' mounts pause, never die, and every target is found served
// ("already served"), not bound again; the first volume runs on a layer
// (layer=true), whose writes never reach its project. SIGINT is then the
// full stop.
func TestKeptVolumesSurviveRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("restart test; skipped with -short")
	}
	e := newEnv(t)
	p := e.start(t, "--keep-connections")
	t.Cleanup(func() {
		// Each start's own cleanup stops with SIGTERM, which keeps the
		// holder: it is ended here, after them.
		fullStop(p)
		h := &transport.Holder{Socket: filepath.Join(e.state, "holder.sock")}
		h.Exit()
		h.Close()
	})
	const n = 3
	type vol struct {
		id, target string
		lines      chan string
		cmd        *exec.Cmd
	}
	var vols []*vol
	for i := range n {
		v := &vol{id: fmt.Sprintf("csi-%064x", i+1), target: filepath.Join(e.pods, fmt.Sprintf("uid-%d", i), "mount")}
		if err := os.MkdirAll(filepath.Dir(v.target), 0o750); err != nil {
			t.Fatal(err)
		}
		attrs := podAttrs(mkProject(t, e, fmt.Sprintf("p%d", i)), fmt.Sprintf("agent-%d", i))
		if i == 0 {
			attrs["layer"] = "true" // its loop writes its layer, found again at each start
		}
		if err := p.publish(v.id, v.target, false, attrs); err != nil {
			t.Fatalf("publish: %v\n%s", err, p.logText())
		}
		v.cmd = exec.Command("bash", "-c", `cd "$0" || exit 1; exec 3>>log; i=0
while [ ! -e "$0.stop" ]; do echo "$i" >&3 || { echo "FAIL append $i"; exit 1; }
mkdir "d$i" && rmdir "d$i" || { echo "FAIL mkdir $i"; exit 1; }
ls >/dev/null || { echo "FAIL ls $i"; exit 1; }; echo "ok $i"; i=$((i+1)); done; echo done`, v.target)
		out, _ := v.cmd.StdoutPipe()
		if err := v.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.cmd.Process.Kill(); v.cmd.Wait() })
		v.lines = make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				v.lines <- sc.Text()
			}
			close(v.lines)
		}()
		vols = append(vols, v)
	}
	// progress waits for two more rounds of every loop.
	progress := func(when string) {
		for _, v := range vols {
			for k := 0; k < 2; {
				line, ok := <-v.lines
				if !ok || !strings.HasPrefix(line, "ok ") {
					t.Fatalf("%s, %s: %q (open %v)\n%s", when, v.target, line, ok, p.logText())
				}
				k++
			}
		}
	}
	progress("before a restart")
	p.kill9(t)
	p = e.start(t, "--keep-connections")
	progress("after kill -9 and a start")
	if strings.Count(p.logText(), "already served") != n {
		t.Errorf("after kill -9: want %d targets already served:\n%s", n, p.logText())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("wsfs csi: still running 60 s after SIGTERM")
	}
	if !strings.Contains(p.logText(), "sessions detached") {
		t.Fatalf("SIGTERM with --keep-connections: want the sessions detached:\n%s", p.logText())
	}
	p = e.start(t, "--keep-connections")
	progress("after SIGTERM and a start")
	for i, v := range vols {
		if err := os.WriteFile(v.target+".stop", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var last string
		for line := range v.lines {
			last = line
		}
		if err := v.cmd.Wait(); err != nil || last != "done" {
			t.Fatalf("%s: %v, last line %q", v.target, err, last)
		}
		_, err := os.Stat(filepath.Join(e.allowed, fmt.Sprintf("p%d", i), "log"))
		if (i == 0) != os.IsNotExist(err) {
			t.Fatalf("%s: the project's log: %v (want it only where the volume has no layer)", v.target, err)
		}
		if err := p.unpublish(v.id, v.target); err != nil {
			t.Fatalf("unpublish %s: %v", v.id, err)
		}
	}
	fullStop(p)
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}

// fullStop stops a plugin with SIGINT, the full stop with
// --keep-connections (targets unbound, sessions unmounted, holder ended),
// and waits.
func fullStop(p *plugin) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	<-p.done
}
