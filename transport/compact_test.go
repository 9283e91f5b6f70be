package transport

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStateCompactsWhileServing: a state with a compactor compacts itself
// once its log has grown past the threshold: the store is given a new
// memfd holding the live set (lookup counts summed, the intents of the
// requests in flight kept), the state goes on appending there, and what
// it held stays as small as the live set. A compactor that fails leaves
// the old log in use, whole.
func TestStateCompactsWhileServing(t *testing.T) {
	defer func(v int64) { compactMin = v }(compactMin)
	compactMin = 64 << 10
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AddNode(&Node{Ino: 30, Mode: syscall.S_IFREG, MountID: 7, Type: 1, Handle: []byte{9}, Path: "/r/f"})
	s.Count(30, 1)
	s.Intend(77)
	stored := -1
	defer func() {
		if stored >= 0 {
			unix.Close(stored)
		}
	}()
	s.SetCompactor(func(fd int) error {
		if stored >= 0 {
			unix.Close(stored)
		}
		var err error
		stored, err = unix.Dup(fd)
		return err
	})
	const rounds = 20000 // two records each: ~1 MB of log
	for range rounds {
		s.Count(30, 1)
		s.Count(30, -1)
	}
	s.compactWG.Wait()
	if n := s.Compactions(); n < 1 {
		t.Fatalf("compactions after %d records: %d, want at least 1", 2*rounds, n)
	}
	if size := s.Size() - stateHeaderSize; size > compactMin*compactRatio {
		t.Errorf("log after compaction: %d bytes, want at most %d", size, compactMin*compactRatio)
	}
	s.Count(30, 1) // after the last compaction: in the stored memfd
	fd, err := unix.Dup(stored)
	if err != nil {
		t.Fatal(err)
	}
	r, _, live, err := OpenState(fd)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n := live.Nodes[30]; n == nil || n.Lookups != 2 || n.Path != "/r/f" {
		t.Errorf("node 30 in the stored state: %+v, want 2 lookups at /r/f", n)
	}
	if done, ok := live.Intended[77]; !ok || done {
		t.Errorf("intent 77 in the stored state: %v %v, want begun, not done", ok, done)
	}

	// A compactor that fails: the log goes on in the old memfd.
	before := s.Compactions()
	s.mu.Lock()
	s.compactor = func(int) error { return errors.New("store gone") }
	s.compactAt = s.off
	s.mu.Unlock()
	s.Count(30, -1)
	s.compactWG.Wait()
	if n := s.Compactions(); n != before {
		t.Errorf("compactions after a failed one: %d, want %d", n, before)
	}
	_, live, err = s.replayCopy()
	if err != nil {
		t.Fatal(err)
	}
	if n := live.Nodes[30]; n == nil || n.Lookups != 1 {
		t.Errorf("node 30 after a failed compaction: %+v, want 1 lookup", n)
	}
}

// TestStateLocks: the lock requests granted through a handle replay in
// order; an unlock of the whole file drops the earlier requests of its
// kind (flock or byte-range) only; a released handle takes its locks with
// it; WriteLive carries them into a compacted state.
func TestStateLocks(t *testing.T) {
	s, err := NewState(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Open(File{Fh: 3, Ino: 11, Flags: unix.O_RDWR})
	s.Open(File{Fh: 4, Ino: 11, Flags: unix.O_RDWR})
	s.Lock(3, Lock{Flock: true, Typ: unix.F_WRLCK})
	s.Lock(3, Lock{Typ: unix.F_WRLCK, Start: 0, End: 9})
	s.Lock(3, Lock{Typ: unix.F_UNLCK, Start: 0, End: LockEOF}) // every range lock of 3
	s.Lock(3, Lock{Typ: unix.F_RDLCK, Start: 20, End: LockEOF})
	s.Lock(3, Lock{Typ: unix.F_UNLCK, Start: 30, End: 39}) // a part: kept as a request
	s.Lock(4, Lock{Typ: unix.F_WRLCK, Start: 100, End: 100})
	s.Release(4)
	s.Lock(9, Lock{Typ: unix.F_WRLCK}) // no such handle
	want := "[{true 1 0 0} {false 0 20 9223372036854775807} {false 2 30 39}]"
	_, live, err := s.replayCopy()
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Files) != 1 || live.Files[3] == nil || fmt.Sprint(live.Files[3].Locks) != want {
		t.Fatalf("replay: files %v, want only 3 with locks %s", live.Files, want)
	}
	s2, err := s.Compact(Meta{Kind: "mount", Mountpoint: "/m", Root: "/r", RootMountID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, live2, err := s2.replayCopy()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(live2.Files[3].Locks); got != want {
		t.Errorf("after WriteLive: locks of 3 %s, want %s", got, want)
	}
}
