package mounts_test

import (
	"bytes"
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

// envInt is the integer in environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// One session walking a tree far larger than the daemon's descriptor limit
// neither fails itself nor starves another session or the API (issue 20
// item 4, issue 18 item 6). The daemon runs under prlimit with
// RLIMIT_NOFILE WSFS_STARVE_NOFILE (300); session "big" walks
// WSFS_STARVE_FILES (5,000) files with find, grep and tar and removes them
// (rm -rf) from a child while
// session "small" lists, creates, runs git status, and the API lists the
// sessions. hack/starve.sh runs the same test at 100,000 files under 3,000
// and 200,000 under 20,000.
func TestStarvedSessionLeavesOthers(t *testing.T) {
	dir := newDaemonDir(t)
	nofile := envInt(t, "WSFS_STARVE_NOFILE", 300)
	files := envInt(t, "WSFS_STARVE_FILES", 5000)
	const perDir = 100
	big, small := filepath.Join(dir, "big"), filepath.Join(dir, "small")
	for i := 0; i < files; i++ {
		sub := filepath.Join(big, fmt.Sprintf("d%04d", i/perDir))
		if i%perDir == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d", i%perDir)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkTree(t, small, "a", "b/")
	if out, err := exec.Command("bash", "-c", "cd "+small+" && git init -q && git add a && git -c user.name=t -c user.email=t@t commit -qm init").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}

	d := startDaemonWith(t, dir, []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", nofile, nofile)})
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(limits), fmt.Sprintf("Max open files            %-21d%-21d", nofile, nofile)) {
		t.Skipf("the daemon raised its descriptor limit (CAP_SYS_RESOURCE): nothing to test\n%s", limits)
	}
	ctx := context.Background()
	for id, root := range map[string]string{"big": big, "small": small} {
		if _, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	mBig, mSmall := filepath.Join(d.mountBase, "big"), filepath.Join(d.mountBase, "small")

	// The walk: every file's attributes (find -printf %s stats each),
	// every file's content (grep, tar), then every file removed.
	walk := exec.Command("bash", "-c", `set -o pipefail; cd "$1" &&
		find . -type f -printf '%s\n' | wc -l && grep -r -c x . | grep -c ':1$' &&
		tar cf - . | tar tf - | grep -c '[^/]$' && rm -rf d* && ls -A | wc -l`, "walk", mBig)
	var wout, werr bytes.Buffer
	walk.Stdout, walk.Stderr = &wout, &werr
	if err := walk.Start(); err != nil {
		t.Fatal(err)
	}
	walked := make(chan error, 1)
	go func() { walked <- walk.Wait() }()

	check := func(round int) {
		t.Helper()
		name := fmt.Sprintf("new%d", round)
		cmd := exec.Command("bash", "-c", `cd "$1" && ls && touch "$2" && git status --porcelain && rm "$2"`, "small", mSmall, name)
		out, err := cmd.CombinedOutput()
		if want := "a\nb\n?? " + name + "\n"; err != nil || string(out) != want {
			t.Fatalf("round %d: session small: %v, output %q; want %q", round, err, out, want)
		}
		ss, err := d.c.List(ctx)
		if err != nil {
			t.Fatalf("round %d: session list: %v", round, err)
		}
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"big", "small"}) {
			t.Fatalf("round %d: session list: %v, want [big small]", round, ids)
		}
	}
	round, slowest := 0, time.Duration(0)
	for done := false; !done; {
		select {
		case err := <-walked:
			if err != nil {
				t.Fatalf("walk of %d files: %v\nstdout %q\nstderr %s\ndaemon log:\n%s", files, err, wout.String(), abbrevT(werr.String(), 2000), abbrevT(d.logText(), 4000))
			}
			done = true
		default:
		}
		round++
		start := time.Now()
		check(round)
		slowest = max(slowest, time.Since(start))
	}
	if want := fmt.Sprintf("%d\n%d\n%d\n0\n", files, files, files); wout.String() != want || werr.Len() != 0 {
		t.Fatalf("walk: stdout %q, stderr %q; want %q and nothing", wout.String(), werr.String(), want)
	}
	// A measurement, not asserted (issue 20 asks for "within 1 s").
	t.Logf("%d files walked under RLIMIT_NOFILE %d; session small answered %d rounds meanwhile, the slowest (ls, touch, git status, rm, session list) in %v",
		files, nofile, round, slowest.Round(time.Millisecond))
}

// abbrevT shortens s to n bytes for a failure message.
func abbrevT(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
