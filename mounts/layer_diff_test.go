package mounts_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// A session exchanges a changed file with a FIFO (renameat2
// RENAME_EXCHANGE through its mount) while the host asks for diffs: diff
// never opens the FIFO (it used to block in open(2) for good, and the
// session's lock with it: every later diff, commit, rm, show and even
// list timed out); each diff lists the two names by what they are, and
// the daemon answers everything afterwards.
func TestLayerDiffFIFOSwap(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "L", nil, "bash", "-c", "echo new > f && mkfifo p"); r.code != 0 {
		t.Fatalf("layer setup: %+v", r)
	}
	f, p := filepath.Join(s.Mountpoint, "f"), filepath.Join(s.Mountpoint, "p")
	var quit atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !quit.Load() {
			if unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, p, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	t.Cleanup(func() { quit.Store(true); wg.Wait() })
	allowed := map[string]bool{
		"modified f file content": true, "type_changed f fifo ": true,
		"added p fifo ": true, "added p file ": true,
	}
	for i := range 300 {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := d.c.Diff(cctx, "L", nil, false)
		cancel()
		if err != nil {
			t.Fatalf("diff %d (after %d swaps): %v", i, swaps.Load(), err)
		}
		for _, c := range res.Changes {
			if k := c.Kind + " " + c.Path + " " + c.Type + " " + strings.Join(c.Fields, ","); !allowed[k] {
				t.Fatalf("diff %d: change %q", i, k)
			}
		}
	}
	quit.Store(true)
	wg.Wait()
	if swaps.Load() == 0 {
		t.Fatal("no exchange succeeded")
	}
	// Put f back as the file, then list and diff answer at once.
	var st unix.Stat_t
	if err := unix.Lstat(f, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFIFO {
		if err := unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, p, unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	if r := d.wsfs(t, "session", "list"); r.code != 0 {
		t.Fatalf("list: %+v", r)
	}
	if r := d.wsfs(t, "session", "diff", "L", "--stat"); r.code != 0 || r.stdout != "M f (file: content)\nA p (fifo)\n" {
		t.Fatalf("diff: %+v", r)
	}
}

// vmHWM returns the peak resident size of process pid in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// Diff of large files streams: a file truncated to 1 GiB in the layer
// (sizes differ: nothing read) and a 64 MiB file changed in its last byte
// (equal sizes: compared chunk by chunk) are both "content" changes
// without a unified diff (over the 1 MiB limit, as a binary file), and
// the daemon's peak resident size stays far below either file (one diff
// used to read both sides whole: 3 GB took it from 34 MB to 6.9 GB).
func TestLayerDiffLargeFile(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "big", "same")
	if err := os.Truncate(filepath.Join(root, "same"), 64<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "L", nil, "bash", "-c", "truncate -s 1G big && printf y | dd of=same bs=1 seek=$((64*1024*1024-1)) conv=notrunc status=none"); r.code != 0 {
		t.Fatalf("layer writes: %+v", r)
	}
	r := d.wsfs(t, "session", "diff", "L")
	if want := "M big (file: content)\nM same (file: content)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("diff: %+v\nwant %q", r, want)
	}
	r = d.wsfs(t, "session", "diff", "L", "--json")
	var res api.DiffResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("diff --json: %+v", r)
	}
	want := []api.Change{
		{Path: "big", Kind: "modified", Type: "file", Fields: []string{"content"}},
		{Path: "same", Kind: "modified", Type: "file", Fields: []string{"content"}},
	}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Fatalf("diff --json: %+v, want %+v", res.Changes, want)
	}
	if hwm := vmHWM(t, d.cmd.Process.Pid); hwm > 256<<20 {
		t.Fatalf("the daemon's peak resident size is %d MiB after the diffs, want under 256 MiB", hwm>>20)
	}
}

// A text file the session added or deleted gets a unified diff against
// /dev/null, as git diff shows a new or removed file; an empty or binary
// one is listed without; --stat and a PATH elsewhere show none.
func TestLayerDiffAddedDeletedText(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "old.txt", "keep/")
	if err := os.WriteFile(filepath.Join(root, "old.txt"), []byte("x\ny"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "L", nil, "bash", "-c", "printf 'a\\nb\\n' > new.txt && : > empty && printf 'z\\0' > bin && rm old.txt"); r.code != 0 {
		t.Fatalf("layer writes: %+v", r)
	}
	r := d.wsfs(t, "session", "diff", "L")
	want := "A bin (file)\nA empty (file)\nA new.txt (file)\nD old.txt (file)\n" +
		"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n" +
		"--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n\\ No newline at end of file\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("diff:\n%s\nwant\n%s(exit %d, stderr %q)", r.stdout, want, r.code, r.stderr)
	}
	r = d.wsfs(t, "session", "diff", "L", "--stat")
	if want := "A bin (file)\nA empty (file)\nA new.txt (file)\nD old.txt (file)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("diff --stat: %q, want %q", r.stdout, want)
	}
	r = d.wsfs(t, "session", "diff", "L", "keep")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("diff L keep: exit %d %q, want nothing", r.code, r.stdout)
	}
}
