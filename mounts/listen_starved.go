package mounts

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// starvedListener keeps the API answering when the process is out of
// descriptors (EMFILE, ENFILE from accept4(2)), as nginx and Go servers do
// with a reserved descriptor:
//   - it first asks the node descriptor cache to close some of its entries
//     (fusefs.ShedDescriptors) and accepts again;
//   - if that frees nothing, it closes its reserved descriptor (an open
//     /dev/null) and accepts into that slot, so the client is answered; the
//     reserve is opened again at the next Accept that finds a free slot;
//   - only when neither helps is the error returned, and http.Server then
//     backs off (5 ms doubling to 1 s) rather than spinning.
type starvedListener struct {
	net.Listener
	mu      sync.Mutex
	reserve int // -1 while used
}

// newStarvedListener wraps l with a reserved descriptor.
func newStarvedListener(l net.Listener) *starvedListener {
	s := &starvedListener{Listener: l, reserve: -1}
	s.refill()
	return s
}

// refill opens the reserve again when it was used.
func (s *starvedListener) refill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserve < 0 {
		if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			s.reserve = fd
		}
	}
}

// Accept is net.Listener's Accept with the fallbacks above.
func (s *starvedListener) Accept() (net.Conn, error) {
	s.refill()
	c, err := s.Listener.Accept()
	if err == nil || !outOfDescriptors(err) {
		return c, err
	}
	if fusefs.ShedDescriptors() {
		if c, err = s.Listener.Accept(); err == nil || !outOfDescriptors(err) {
			return c, err
		}
	}
	s.mu.Lock()
	if s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
	}
	s.mu.Unlock()
	return s.Listener.Accept()
}

// Close closes the listener and the reserve.
func (s *starvedListener) Close() error {
	s.mu.Lock()
	if s.reserve >= 0 {
		unix.Close(s.reserve)
		s.reserve = -1
	}
	s.mu.Unlock()
	return s.Listener.Close()
}

func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
