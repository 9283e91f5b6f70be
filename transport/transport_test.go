package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStateReplay: the live set after a log of adds, forgets, opens,
// releases and backing IDs is exactly what the kernel may still refer to;
// a torn last record (a process killed mid-append) is the end of the log,
// and appending goes on after the last whole record.
func TestStateReplay(t *testing.T) {
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	s.AddNode(&Node{Ino: 10, Mode: syscall.S_IFDIR, MountID: 7, Type: 1, Handle: []byte{1, 2}, Path: "/r/a"})
	s.AddNode(&Node{Ino: 11, Mode: syscall.S_IFREG, MountID: 7, Type: 1, Handle: []byte{3}, Path: "/r/a/f"})
	s.SetBacking(11, 5)
	s.AddNode(&Node{Ino: 12, Mode: syscall.S_IFREG, MountID: 7, Type: 1, Handle: []byte{4}, Path: "/r/g"})
	s.Forget(12)
	s.Open(File{Fh: 3, Ino: 11, Flags: uint32(os.O_WRONLY | os.O_APPEND)})
	s.Open(File{Fh: 4, Ino: 10, Dir: true})
	s.Release(4)
	s.AllocIno(InoAlloc{Dev: 9, Ino: 99, Alloc: 1<<63 | 1})
	end := s.Size()
	// A torn record: a length that runs past the end.
	if _, err := unix.Pwrite(s.Fd(), []byte{200, 0, 0, 0, 1, 2}, end); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(s.Fd())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, meta, live, err := OpenState(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if meta.Mountpoint != "/m" || meta.Root != "/r" || meta.RootMountID != 7 {
		t.Errorf("meta: %+v", meta)
	}
	if got := fmt.Sprint(len(live.Nodes), live.Nodes[10] != nil, live.Nodes[11] != nil, live.Nodes[12] == nil); got != "2 true true true" {
		t.Errorf("nodes (count, 10, 11 live, 12 gone): %s; %+v", got, live.Nodes)
	}
	if n := live.Nodes[11]; n.Backing != 5 || n.Path != "/r/a/f" || string(n.Handle) != "\x03" || n.Mode != syscall.S_IFREG {
		t.Errorf("node 11: %+v", n)
	}
	if len(live.Files) != 1 || live.Files[3] == nil || live.Files[3].Ino != 11 || live.Files[3].Flags != uint32(os.O_WRONLY|os.O_APPEND) {
		t.Errorf("files: %+v", live.Files)
	}
	if len(live.Inos) != 1 || live.Inos[0] != (InoAlloc{Dev: 9, Ino: 99, Alloc: 1<<63 | 1}) {
		t.Errorf("inos: %+v", live.Inos)
	}
	if s2.Size() != end {
		t.Errorf("append offset %d, want %d (after the last whole record)", s2.Size(), end)
	}
}

// TestStateLookupCounts: a node's lookup count is the sum of its Count
// deltas over the whole log, in any order with its record (a count before
// the record, a FORGET of a node recorded after a new node of the same
// inode number); a sum of zero or less is a forgotten node; a node without
// any count (a state from before counts) is live with count 0 (not
// known); WriteLive carries the counts into a new state.
func TestStateLookupCounts(t *testing.T) {
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add := func(ino uint64, h byte) {
		s.AddNode(&Node{Ino: ino, Mode: syscall.S_IFREG, MountID: 7, Type: 1, Handle: []byte{h}, Path: fmt.Sprint("/r/", ino)})
	}
	// 20: counted before its record, looked up three times, one lookup
	// dropped (a revalidate that found another node ID).
	s.Count(20, 1)
	add(20, 1)
	s.Count(20, 1)
	s.Count(20, 1)
	s.Count(20, -1)
	// 21: evicted with its whole count.
	add(21, 2)
	s.Count(21, 1)
	s.Count(21, 1)
	s.Count(21, -2)
	// 22: the old node's FORGET recorded after the new node (another
	// handle, the same inode number) took its number.
	add(22, 3)
	s.Count(22, 1)
	s.Count(22, 1)
	add(22, 4)
	s.Count(22, -1)
	// 23: no counts at all.
	add(23, 5)
	_, live, err := s.replayCopy()
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, live *Live) {
		t.Helper()
		got := map[uint64]string{}
		for ino, n := range live.Nodes {
			got[ino] = fmt.Sprintf("%d/%x", n.Lookups, n.Handle)
		}
		want := map[uint64]string{20: "2/01", 22: "1/04", 23: "0/05"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: nodes (lookups/handle) %v, want %v", what, got, want)
		}
	}
	check("replay", live)
	s2, err := s.Compact(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, live2, err := s2.replayCopy()
	if err != nil {
		t.Fatal(err)
	}
	check("after WriteLive (Compact)", live2)
}

// replayCopy replays s from a duplicate of its descriptor (OpenState).
func (s *State) replayCopy() (*State, *Live, error) {
	fd, err := unix.Dup(s.Fd())
	if err != nil {
		return nil, nil, err
	}
	r, _, live, err := OpenState(fd)
	if err == nil {
		r.Close()
	}
	return r, live, err
}

// TestStateRefused: state of another format version, or with a corrupt
// header, is refused with the error that says which.
func TestStateRefused(t *testing.T) {
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dup := func() int {
		fd, err := unix.Dup(s.Fd())
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	unix.Pwrite(s.Fd(), []byte{StateVersion + 1, 0, 0, 0}, 8)
	if _, _, _, err := OpenState(dup()); !errors.Is(err, ErrStateVersion) {
		t.Errorf("another version: %v, want ErrStateVersion", err)
	}
	unix.Pwrite(s.Fd(), []byte("XXXX"), 0)
	if _, _, _, err := OpenState(dup()); !errors.Is(err, ErrStateCorrupt) {
		t.Errorf("a corrupt header: %v, want ErrStateCorrupt", err)
	}
}

// TestHolder: descriptors put in the holder come back from Take (the same
// open file: a byte written through one is read through the other), Put of
// a name replaces, Remove forgets, bad names are refused, Exit ends it.
func TestHolder(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	listening, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- RunHolder(sock, func() { close(listening) }) }()
	<-listening
	h := &Holder{Socket: sock}
	defer h.Close()
	pid, err := h.Ping()
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ping: %d %v", pid, err)
	}
	fa, _ := NewState(Meta{Mountpoint: "/a"})
	fb, _ := NewState(Meta{Mountpoint: "/b"})
	defer fa.Close()
	defer fb.Close()
	for _, p := range []struct {
		name string
		fd   int
	}{{"x.fuse", fa.Fd()}, {"y.state", fb.Fd()}, {"x.fuse", fb.Fd()}} {
		if err := h.Put(p.name, p.fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Put("bad:name", fa.Fd()); err == nil || !strings.Contains(err.Error(), `"bad:name"`) {
		t.Errorf("bad name: %v", err)
	}
	got, err := h.Take()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("take: %v", got)
	}
	for _, fd := range got {
		defer unix.Close(fd)
	}
	// x.fuse was replaced by fb's file: it reads fb's header.
	buf := make([]byte, 8)
	if n, err := unix.Pread(got["x.fuse"], buf, 0); err != nil || string(buf[:n]) != stateMagic {
		t.Errorf("x.fuse: %q %v", buf, err)
	}
	// names: the names alone, no descriptor received.
	if names, err := h.Names(); err != nil || !slices.Equal(slices.Sorted(slices.Values(names)), []string{"x.fuse", "y.state"}) {
		t.Errorf("names: %q %v, want x.fuse and y.state", names, err)
	}
	if err := h.Remove("x.fuse"); err != nil {
		t.Fatal(err)
	}
	if names, err := h.Names(); err != nil || !slices.Equal(names, []string{"y.state"}) {
		t.Errorf("names after remove: %q %v, want y.state", names, err)
	}
	if got, _ := h.Take(); len(got) != 1 || got["y.state"] == 0 {
		t.Errorf("after remove: %v", got)
	} else {
		unix.Close(got["y.state"])
	}
	if err := h.Exit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RunHolder after Exit: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket after exit: %v", err)
	}
}

// TestFDStoreNotify checks FDStore's half of systemd's protocol
// (sd_pid_notify_with_fds(3)): Put sends FDSTOREREMOVE then FDSTORE=1 with
// the name and the descriptor, Remove FDSTOREREMOVE, to $NOTIFY_SOCKET.
func TestFDStoreNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &FDStore{Socket: path, got: map[string]int{}}
	st, _ := NewState(Meta{Mountpoint: "/x"})
	defer st.Close()
	if err := s.Put("wsfs-1.state", st.Fd()); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("wsfs-1.state"); err != nil {
		t.Fatal(err)
	}
	want := []string{"FDSTOREREMOVE=1\nFDNAME=wsfs-1.state", "FDSTORE=1\nFDNAME=wsfs-1.state", "FDSTOREREMOVE=1\nFDNAME=wsfs-1.state"}
	for i, w := range want {
		buf, oob := make([]byte, 512), make([]byte, 64)
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != w {
			t.Errorf("message %d: %q, want %q", i, buf[:n], w)
		}
		var fds []int
		if oobn > 0 {
			cms, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, cm := range cms {
				got, _ := unix.ParseUnixRights(&cm)
				fds = append(fds, got...)
			}
		}
		if (i == 1) != (len(fds) == 1) {
			t.Errorf("message %d carries %d descriptors", i, len(fds))
		}
		for _, fd := range fds {
			buf := make([]byte, 8)
			if n, _ := unix.Pread(fd, buf, 0); string(buf[:n]) != stateMagic {
				t.Errorf("the descriptor sent is not the state: %q", buf[:n])
			}
			unix.Close(fd)
		}
	}
}

// TestFDStoreListen checks the other half (sd_listen_fds_with_names(3)):
// a process started with LISTEN_PID (its own pid), LISTEN_FDS and
// LISTEN_FDNAMES finds the descriptors from 3 on under their names, and the
// variables are unset.
func TestFDStoreListen(t *testing.T) {
	if os.Getenv("WSFS_TEST_FDSTORE_CHILD") != "" {
		s := NewFDStore()
		got, err := s.Take()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		buf := make([]byte, 8)
		n, _ := unix.Pread(got["b.state"], buf, 0)
		fmt.Printf("%d %q %q %s\n", len(got), buf[:n], os.Getenv("LISTEN_FDS"), strings.Join(sortedKeys(got), ","))
		os.Exit(0)
	}
	st, _ := NewState(Meta{Mountpoint: "/x"})
	defer st.Close()
	// The child's descriptor 4: a duplicate in an *os.File of its own,
	// closed here. Wrapping st.Fd() itself would give the number two
	// owners: st.Close closes it, then f's cleanup closes it again once
	// f is collected, by then maybe another test's descriptor (that
	// closed the io_uring of a later test's ring queue, whose CPU's
	// requests then waited forever).
	sfd, err := unix.Dup(st.Fd())
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(sfd), "state")
	defer f.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	// sh's $$ is the pid the test binary gets from exec.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=a.fuse:b.state exec "$0" -test.run=^TestFDStoreListen$`, os.Args[0])
	cmd.Env = append(os.Environ(), "WSFS_TEST_FDSTORE_CHILD=1", "NOTIFY_SOCKET=/nonexistent")
	cmd.ExtraFiles = []*os.File{null, f}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if got, want := string(out), "2 \"WSFSCONN\" \"\" a.fuse,b.state\n"; got != want {
		t.Errorf("child saw %q, want %q", got, want)
	}
}

func sortedKeys(m map[string]int) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	if len(k) == 2 && k[0] > k[1] {
		k[0], k[1] = k[1], k[0]
	}
	return k
}

// TestStateCloseFd: a state whose descriptor was closed once the store held
// it (Keep) goes on recording through its mapping, grows (past its first
// mapping) and replays with a descriptor opened from the mapping, and the
// store's copy reads every record; the process holds no descriptor for it
// meanwhile.
func TestStateCloseFd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (/proc/self/map_files)")
	}
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored, err := unix.Dup(s.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stored)
	memfds := func() int {
		es, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, e := range es {
			if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(l, "/memfd:wsfs-conn") {
				n++
			}
		}
		return n
	}
	s.CloseFd()
	if s.fd != -1 || memfds() != 1 {
		t.Fatalf("after CloseFd: fd %d, %d memfds open (want -1, 1: the store's copy)", s.fd, memfds())
	}
	path := strings.Repeat("p", 1000)
	const n = 3000 // about 3 MB of records: the 1 MiB mapping grows twice
	for i := range n {
		s.AddNode(&Node{Ino: uint64(100 + i), Mode: syscall.S_IFREG, Handle: []byte{1}, Path: path})
	}
	if s.fd != -1 || memfds() != 1 {
		t.Errorf("after growing: fd %d, %d memfds open (want -1, 1)", s.fd, memfds())
	}
	if live, _, err := s.replay(); err != nil || len(live.Nodes) != n {
		t.Errorf("replay through the mapping: %d nodes, %v; want %d", len(live.Nodes), err, n)
	}
	dup, err := unix.Dup(stored)
	if err != nil {
		t.Fatal(err)
	}
	s2, _, live, err := OpenState(dup)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if len(live.Nodes) != n || live.Nodes[100+n-1] == nil || live.Nodes[100+n-1].Path != path {
		t.Errorf("the store's copy replays %d nodes, want %d", len(live.Nodes), n)
	}
}

// TestHolderParks: the holder keeps what it holds in flight in its own
// socket pairs, not open (park.go): 300 descriptors cost it a few pairs,
// and each comes back by name with its own content; a replaced and a
// removed name behave as before.
func TestHolderParks(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	before := openFds(t)
	listening, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- RunHolder(sock, func() { close(listening) }) }()
	<-listening
	h := &Holder{Socket: sock}
	defer h.Close()
	const n = 300
	for i := range n {
		s, err := NewState(Meta{Mountpoint: fmt.Sprintf("/m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Put(fmt.Sprintf("c%d.state", i), s.Fd()); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	// The holder runs in this process: what it holds open shows here.
	if extra := openFds(t) - before; extra > 2*(n/parkBucket+1)+8 {
		t.Errorf("%d descriptors open for %d held, want about %d (socket pairs)", extra, n, 2*(n/parkBucket+1))
	}
	again, _ := NewState(Meta{Mountpoint: "/again"})
	if err := h.Put("c7.state", again.Fd()); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if err := h.Remove("c8.state"); err != nil {
		t.Fatal(err)
	}
	got, err := h.Take()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-1 {
		t.Errorf("take: %d descriptors, want %d", len(got), n-1)
	}
	for name, fd := range got {
		_, meta, _, err := OpenState(fd) // closes fd on error
		want := "/m" + strings.TrimSuffix(strings.TrimPrefix(name, "c"), ".state")
		if name == "c7.state" {
			want = "/again"
		}
		if err != nil || meta.Mountpoint != want {
			t.Errorf("%s: mountpoint %q, %v; want %q", name, meta.Mountpoint, err, want)
		}
		unix.Close(fd)
	}
	if _, ok := got["c8.state"]; ok {
		t.Errorf("c8.state taken after its remove")
	}
	if err := h.Exit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if extra := openFds(t) - before; extra > 2 {
		t.Errorf("%d descriptors left open after exit", extra)
	}
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
