package mounts_test

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// modeOf returns the lstat mode of p (type and permission bits).
func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode
}

// victimFile makes a root-owned file (mode 0600) outside every project.
func victimFile(t *testing.T, dir string) string {
	t.Helper()
	v := filepath.Join(dir, "victim")
	if err := os.WriteFile(v, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(v, 0o600); err != nil {
		t.Fatal(err)
	}
	return v
}

// stageLeft returns the commit's private names (.wsfs-commit-*) anywhere
// below root, but for symlinks (a racer's, made after the name was gone).
func stageLeft(t *testing.T, root string) []string {
	t.Helper()
	var left []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".wsfs-commit-") && d.Type() != fs.ModeSymlink {
			left = append(left, p)
		}
		return nil
	})
	return left
}

// racer is the attacker of a commit: on every name the daemon makes in
// dir that begins with prefix it makes a symlink to victim and renames it
// over that name (with exchange, renameat2's RENAME_EXCHANGE instead).
// stop ends it (a file made in dir wakes it) and returns how many of its
// renames succeeded.
func racer(t *testing.T, dir, prefix, victim string, exchange bool) (stop func() int) {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(in)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(in, buf)
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				l := int(binary.NativeEndian.Uint32(buf[off+12:])) // struct inotify_event's len
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+l]), "\x00")
				off += unix.SizeofInotifyEvent + l
				if name == ".stop-racer" {
					return
				}
				if !strings.HasPrefix(name, prefix) {
					continue
				}
				x := filepath.Join(dir, ".x")
				os.Remove(x)
				if os.Symlink(victim, x) != nil {
					continue
				}
				if exchange {
					err = unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, filepath.Join(dir, name), unix.RENAME_EXCHANGE)
				} else {
					err = unix.Rename(x, filepath.Join(dir, name))
				}
				if err == nil {
					won.Add(1)
				}
				os.Remove(x)
			}
		}
	}()
	stopped := false
	stop = func() int {
		if !stopped {
			stopped = true
			os.WriteFile(filepath.Join(dir, ".stop-racer"), nil, 0o600)
			<-done
			os.Remove(filepath.Join(dir, ".stop-racer"))
		}
		return int(won.Load())
	}
	t.Cleanup(func() { stop() })
	return stop
}

// The attack on commit: the project's directory belongs to the session's
// user (65534, served by the session), who writes a setuid file through
// its mount and renames a symlink to a root-owned host file over every
// name the daemon makes beside the file it commits. The daemon gives the file
// its attributes through its own descriptor, in a private directory no one
// else can write: the host file keeps its mode (it became -rwsrwxrwx), the
// commit applies the file whole (mode 4777, 2 MB) and leaves no private
// name behind. With renameat2's RENAME_EXCHANGE for a rename the attack
// gets no further.
func TestLayerCommitSymlinkRace(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "d/keep")
	for _, p := range []string{root, filepath.Join(root, "d")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	victim := victimFile(t, dir)
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Users: []uint32{65534}, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	openUpDirs(t, d.mountBase)
	for round, exchange := range []bool{false, true} {
		name := "d/big" + strings.Repeat("x", round)
		// The session's user writes it through its mount (a commit acts
		// with its rights).
		if r := asUID(t, 65534, "cd "+s.Mountpoint+" && head -c 2M /dev/zero > "+name+" && chmod 4777 "+name); r.code != 0 {
			t.Fatalf("layer write: %+v", r)
		}
		stop := racer(t, filepath.Join(root, "d"), ".wsfs-commit-", victim, exchange)
		r := d.wsfs(t, "session", "commit", "L", name)
		won := stop()
		if got := modeOf(t, victim); got != unix.S_IFREG|0o600 {
			t.Fatalf("exchange=%v: the victim's mode is %o after the commit (%+v), want 100600", exchange, got, r)
		}
		if want := "committed " + name + "\n"; r.code != 0 || r.stdout != want {
			t.Fatalf("exchange=%v: commit: %+v (racer won %d renames), want exit 0 and %q", exchange, r, won, want)
		}
		if got := modeOf(t, filepath.Join(root, name)); got != unix.S_IFREG|unix.S_ISUID|0o777 {
			t.Fatalf("exchange=%v: %s has mode %o, want 104777", exchange, name, got)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, name), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
			t.Fatalf("exchange=%v: %s is %d:%d (%v), want 65534's", exchange, name, st.Uid, st.Gid, err)
		}
		if fi, err := os.Lstat(filepath.Join(root, name)); err != nil || fi.Size() != 2<<20 {
			t.Fatalf("exchange=%v: %s: %v %v, want 2 MiB", exchange, name, fi, err)
		}
		if left := stageLeft(t, root); len(left) != 0 {
			t.Fatalf("exchange=%v: left in the project: %v", exchange, left)
		}
	}
}

// The attack on discard: in the layer the session makes a project file's
// mode differ and a symlink to a root-owned host file beside it, and
// exchanges the two (renameat2 RENAME_EXCHANGE through its mount) while
// the host discards the file again and again. Discard changes only the
// object it opened without following a symlink: the host file keeps its
// mode (it became 0606), and a discard that finds the symlink in the
// file's place refuses it by name.
func TestLayerDiscardExchangeRace(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "m")
	if err := os.Chmod(filepath.Join(root, "m"), 0o606); err != nil {
		t.Fatal(err)
	}
	victim := victimFile(t, dir)
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "L", nil, "bash", "-c", "chmod 600 m && ln -s "+victim+" ml"); r.code != 0 {
		t.Fatalf("layer setup: %+v", r)
	}
	m, ml := filepath.Join(s.Mountpoint, "m"), filepath.Join(s.Mountpoint, "ml")
	var quit atomic.Bool
	var pause sync.Mutex // held: the exchanges wait
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !quit.Load() {
			pause.Lock()
			unix.Renameat2(unix.AT_FDCWD, m, unix.AT_FDCWD, ml, unix.RENAME_EXCHANGE)
			pause.Unlock()
		}
	}()
	t.Cleanup(func() { quit.Store(true); wg.Wait() })
	// arm puts the attack's state back (a discard undoes it): m the file,
	// mode 0600 (changed through its descriptor, never following the
	// link), ml the symlink to the victim.
	arm := func() {
		pause.Lock()
		defer pause.Unlock()
		var st unix.Stat_t
		if unix.Lstat(m, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if err := unix.Renameat2(unix.AT_FDCWD, m, unix.AT_FDCWD, ml, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
		}
		if unix.Lstat(m, &st) != nil {
			if err := os.WriteFile(m, []byte("m"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if unix.Lstat(ml, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
			os.Remove(ml)
			if err := os.Symlink(victim, ml); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(m, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Fchmodat(fd, "", 0o600, unix.AT_EMPTY_PATH); err != nil {
			t.Fatal(err)
		}
	}
	refusals := map[string]int{}
	for range 300 {
		res, err := d.c.Discard(ctx, "L", []string{"m"})
		if err != nil {
			t.Fatalf("discard: %v", err)
		}
		for _, r := range res.Refused {
			refusals[r.Path+": "+r.Reason]++
		}
		if got := modeOf(t, victim); got != unix.S_IFREG|0o600 {
			t.Fatalf("the victim's mode is %o after a discard (%+v), want 100600", got, res)
		}
		arm()
	}
	quit.Store(true)
	wg.Wait()
	t.Logf("refusals: %v", refusals)
	for r := range refusals {
		if r != "m: a symlink now, not a file: changed since the diff" {
			t.Errorf("refused %q (%d times)", r, refusals[r])
		}
	}
	// Quiet again: one discard of both names restores the project's file
	// and removes the link.
	res, err := d.c.Discard(ctx, "L", []string{"m", "ml"})
	if err != nil || len(res.Refused) != 0 {
		t.Fatalf("discard m ml: %+v %v", res, err)
	}
	if got := modeOf(t, m); got != unix.S_IFREG|0o606 {
		t.Fatalf("m in the session after discard: mode %o, want 100606", got)
	}
	if _, err := os.Lstat(ml); !os.IsNotExist(err) {
		t.Fatalf("ml after discard: %v, want ENOENT", err)
	}
	if left := stageLeft(t, filepath.Join(s.Layer, "upper")); len(left) != 0 {
		t.Fatalf("left in the layer: %v", left)
	}
	if got := modeOf(t, victim); got != unix.S_IFREG|0o600 {
		t.Fatalf("the victim's mode is %o, want 100600", got)
	}
	if !reflect.DeepEqual(entries(t, root), []string{"m"}) || modeOf(t, filepath.Join(root, "m")) != unix.S_IFREG|0o606 {
		t.Fatalf("the project changed: %v", entries(t, root))
	}
}

// A commit racing a host directory swap (renameat2 RENAME_EXCHANGE of the
// two directories it writes into, again and again) leaves nothing of its
// own behind: each path is applied or refused, and no .wsfs-commit-* name
// is in the project afterwards (50 root-owned temporary files, mode 0600,
// were left when a temporary file's directory was swapped between its
// creation and its removal by name).
func TestLayerCommitDirSwapLeavesNothing(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	var names []string
	for _, sub := range []string{"a", "b"} {
		for i := range 30 {
			names = append(names, filepath.Join(sub, "f"+strconv.Itoa(i)))
		}
	}
	mkTree(t, root, names...)
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "L", Root: root, Layer: true, Policy: &api.Policy{Mode: "full-access"}}); err != nil {
		t.Fatal(err)
	}
	if r := d.exec(t, "L", nil, "bash", "-c", "for f in a/* b/*; do head -c 256K /dev/zero > $f; done"); r.code != 0 {
		t.Fatalf("layer writes: %+v", r)
	}
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	var quit atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !quit.Load() {
			if unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	}()
	t.Cleanup(func() { quit.Store(true); wg.Wait() })
	res, err := d.c.Commit(ctx, "L", nil, true)
	quit.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := len(res.Applied) + len(res.Refused) + len(res.Conflicts); n != len(names) || len(res.Conflicts) != 0 {
		t.Fatalf("commit: %d paths applied, refused or in conflict (%+v), want %d, no conflict", n, res, len(names))
	}
	if swaps.Load() == 0 {
		t.Fatal("no swap succeeded")
	}
	if left := stageLeft(t, root); len(left) != 0 {
		t.Fatalf("left in the project after %d swaps: %v", swaps.Load(), left)
	}
	var got []string
	for _, sub := range []string{"a", "b"} {
		for _, e := range entries(t, filepath.Join(root, sub)) {
			got = append(got, filepath.Join(sub, e))
		}
	}
	sort.Strings(got)
	sort.Strings(names)
	if !reflect.DeepEqual(got, names) {
		t.Fatalf("the project holds %v, want %v", got, names)
	}
}
