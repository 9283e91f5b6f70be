package mounts

import (
	"net"
	"syscall"
	"testing"
)

// fakeListener answers Accept with errs in turn, then with conn.
type fakeListener struct {
	net.Listener
	errs  []error
	conn  net.Conn
	calls int
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.conn, nil
}

// accept4's EMFILE is answered by shedding node descriptors and then by
// the reserved descriptor: the client is accepted, and the reserve is taken
// again at the next Accept. Another error is returned as it is.
func TestStarvedListener(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	f := &fakeListener{errs: []error{syscall.EMFILE}, conn: c1}
	s := newStarvedListener(f)
	if s.reserve < 0 {
		t.Fatal("no reserved descriptor at start")
	}
	got, err := s.Accept()
	if err != nil || got != c1 {
		t.Fatalf("Accept after EMFILE: %v, %v; want the connection", got, err)
	}
	// Nothing to shed in this process: the second accept4 took the
	// reserve's slot.
	if f.calls != 2 || s.reserve != -1 {
		t.Fatalf("accept4 calls %d, reserve %d; want 2 and the reserve used (-1)", f.calls, s.reserve)
	}
	if _, err := s.Accept(); err != nil || s.reserve < 0 {
		t.Fatalf("next Accept: %v, reserve %d; want it taken again", err, s.reserve)
	}
	// Both fallbacks failing: the error goes to http.Server's back-off.
	f.errs = []error{syscall.EMFILE, syscall.EMFILE}
	if _, err := s.Accept(); err != syscall.EMFILE {
		t.Fatalf("Accept with EMFILE twice: %v, want EMFILE", err)
	}
	f.errs = []error{syscall.ECONNABORTED}
	if _, err := s.Accept(); err != syscall.ECONNABORTED {
		t.Fatalf("Accept with ECONNABORTED: %v, want it returned", err)
	}
	s.mu.Lock()
	r := s.reserve
	s.mu.Unlock()
	if r < 0 {
		t.Fatal("reserve lost")
	}
}
