package mounts_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// kill -9 of the daemon during a loop of writes to project files in a
// layered session (appends, rewrites by rename, truncates: each a copy-up
// of a project file; and new files), then a new daemon: at the
// kill, every file the session sees is the project's old file or what the
// loop made of it, whole (no torn copy-up), and what the loop had
// acknowledged is there; the loop runs on to its end; afterwards every
// file is the loop's, diff lists exactly the loop's changes, and the
// project never changed. TestLayerKill9 covers new files only.
func TestLayerKill9CopyUp(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	// The kill comes after the third round, as the fourth begins with the
	// copy-up of a4: the appended files are the largest (4 MiB), so that
	// their copy-up takes longest.
	const n, size, bigSize = 12, 512 << 10, 4 << 20
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	old := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), size) }
	oldBig := func(i int) string { return strings.Repeat(string(rune('A'+i%26)), bigSize) }
	for i := 1; i <= n; i++ {
		for k, content := range map[string]string{"a": oldBig(i), "r": old(i), "t": old(i)} {
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("%s%d", k, i)), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := treeSnap(t, root)
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "kc", Root: root, Layer: true})
	if err != nil {
		t.Fatal(err)
	}
	// The states a file may be in: what the loop's step makes of it
	// (final), and what it may be while that step runs (the old file, a
	// name made but not yet written).
	type states struct {
		final   string
		absent  bool // before the step: no file
		partial []string
	}
	expect := map[string]states{}
	for i := 1; i <= n; i++ {
		expect[fmt.Sprintf("a%d", i)] = states{final: oldBig(i) + fmt.Sprintf("line %d\n", i), partial: []string{oldBig(i)}}
		expect[fmt.Sprintf("r%d", i)] = states{final: fmt.Sprintf("rewritten %d\n", i), partial: []string{old(i)}}
		expect[fmt.Sprintf("t%d", i)] = states{final: old(i)[:1000], partial: []string{old(i)}}
		expect[fmt.Sprintf("n%d", i)] = states{final: fmt.Sprintf("new %d\n", i), absent: true, partial: []string{""}}
	}
	// Each step prints "ack NAME" once it returned. umask 022: a rewritten
	// file has the project file's mode (the test process's umask may be 0
	// after an in-process mount).
	script := fmt.Sprintf(`umask 022
for i in $(seq 1 %d); do
	echo "line $i" >> a$i; echo ack a$i
	printf 'rewritten %%s\n' $i > r$i.tmp && mv r$i.tmp r$i; echo ack r$i
	truncate -s 1000 t$i; echo ack t$i
	echo "new $i" > n$i; echo ack n$i
done
echo done`, n)
	loop := exec.Command(wsfsBin, "exec", "--session", "kc", "--", "bash", "-c", script)
	loop.Env = append(os.Environ(), "WSFS_SOCKET="+d.socket)
	stdout, err := loop.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	loop.Stderr = &stderr
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loop.Process.Kill(); loop.Wait() })
	lines := make(chan string, 4*n+1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	acked := map[string]bool{}
	for len(acked) < 4*3 {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the loop ended before the kill: %s", stderr.String())
		}
		acked[strings.TrimPrefix(line, "ack ")] = true
	}
	d.kill()
	// What was acknowledged before the look (later acknowledgements are
	// steps that may or may not show in it).
	for drained := false; !drained; {
		select {
		case line := <-lines:
			acked[strings.TrimPrefix(line, "ack ")] = true
		default:
			drained = true
		}
	}
	merged := filepath.Join(s.Layer, "merged")
	look := func(name string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(merged, name))
		if os.IsNotExist(err) {
			return "", false
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(b), true
	}
	describe := func(s string) string {
		if len(s) > 20 {
			return fmt.Sprintf("%d bytes starting %q", len(s), s[:20])
		}
		return fmt.Sprintf("%q", s)
	}
	for name, st := range expect {
		got, exists := look(name)
		switch {
		case exists && got == st.final:
		case acked[name]:
			t.Errorf("at the kill, %s (acknowledged): %s, want the loop's %s", name, describe(got), describe(st.final))
		case !exists && st.absent:
		case exists && slices.Contains(st.partial, got):
		default:
			t.Errorf("at the kill, %s: %s (exists %v): neither the old file nor the loop's, whole", name, describe(got), exists)
		}
	}
	for i := 1; i <= n; i++ {
		// The rename's source: absent, made, or whole.
		tmp := fmt.Sprintf("r%d.tmp", i)
		if got, exists := look(tmp); exists && got != "" && got != fmt.Sprintf("rewritten %d\n", i) {
			t.Errorf("at the kill, %s: %s", tmp, describe(got))
		}
	}

	d2 := startDaemon(t, dir)
	var rest []string
	for line := range lines {
		rest = append(rest, line)
	}
	if err := loop.Wait(); err != nil || len(rest) == 0 || rest[len(rest)-1] != "done" || stderr.Len() != 0 {
		t.Fatalf("the loop across kill -9: %v, last lines %q, stderr %q", err, rest, stderr.String())
	}
	d.waitExit(t)
	for name, st := range expect {
		if got, _ := look(name); got != st.final {
			t.Errorf("after the loop, %s: %s, want %s", name, describe(got), describe(st.final))
		}
	}
	res, err := d2.c.Diff(ctx, "kc", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Changes {
		got = append(got, c.Path+" "+c.Kind+" "+strings.Join(c.Fields, ","))
	}
	var want []string
	for name := range expect {
		if name[0] == 'n' {
			want = append(want, name+" added ")
		} else {
			want = append(want, name+" modified content")
		}
	}
	sort.Strings(want) // as diff sorts a flat directory: by name
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff after the restart:\n got %q\nwant %q", got, want)
	}
	if got := treeSnap(t, root); !reflect.DeepEqual(got, before) {
		t.Fatalf("the project changed")
	}
	if err := d2.c.Remove(ctx, "kc", false); err != nil {
		t.Fatal(err)
	}
}
