package transport

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// parking holds the holder's descriptors without keeping them open in the
// holder (issue 22: a session's two connections are four descriptors, so a
// holder keeping them open would run out at RLIMIT_NOFILE/4 sessions, 4,997
// under a hard limit of 20,000). Each descriptor is sent (SCM_RIGHTS),
// with its name, into a socket pair the holder owns and left unread in
// the pair's receive queue: a descriptor in flight is held by the kernel
// (the file stays open, the FUSE connection alive) but counts against no
// process's descriptor table. A pair parks up to parkBucket descriptors, so
// the holder itself holds 2 descriptors per parkBucket entries. Reading
// one back means reading every message ahead of it in its pair and
// sending each back in (cycle): O(parkBucket) per remove or take.
//
// A descriptor that cannot be parked (the pair's buffer full, or the
// kernel's limit on descriptors in flight for a user without
// CAP_SYS_ADMIN: ETOOMANYREFS) is kept open instead (loose), so nothing is
// lost; parking is a saving, never a condition. Not safe for concurrent
// use: the holder calls it under its mutex.
type parking struct {
	buckets []*parkPair
	where   map[string]*parkPair
	loose   map[string]int
}

// parkBucket is the number of descriptors one socket pair parks. Each
// parked message is a name of at most 255 bytes and one descriptor, about
// 1 KiB of the sender's buffer (SO_SNDBUF, raised to parkBuffer).
const (
	parkBucket = 64
	parkBuffer = 1 << 20
)

// parkPair is one socket pair: messages sent on w wait in r's queue.
type parkPair struct {
	r, w  int
	names map[string]bool
}

func newParking() *parking {
	return &parking{where: map[string]*parkPair{}, loose: map[string]int{}}
}

// put holds fd (taking it over: it is closed here, or kept loose) under
// name, replacing a descriptor held under that name.
func (p *parking) put(name string, fd int) {
	p.remove(name)
	var b *parkPair
	for _, c := range p.buckets {
		if len(c.names) < parkBucket {
			b = c
			break
		}
	}
	if b == nil {
		var err error
		if b, err = newParkPair(); err != nil {
			p.loose[name] = fd
			return
		}
		p.buckets = append(p.buckets, b)
	}
	if err := b.send(name, fd); err != nil {
		p.loose[name] = fd
		return
	}
	unix.Close(fd)
	b.names[name] = true
	p.where[name] = b
}

// remove closes and forgets the descriptor held under name, if any.
func (p *parking) remove(name string) {
	if fd, ok := p.loose[name]; ok {
		unix.Close(fd)
		delete(p.loose, name)
		return
	}
	b := p.where[name]
	if b == nil {
		return
	}
	delete(p.where, name)
	p.cycle(b, func(n string, fd int) bool { return n != name })
}

// names returns the names held, without reading a descriptor back.
func (p *parking) names() []string {
	out := make([]string, 0, len(p.loose)+len(p.where))
	for n := range p.loose {
		out = append(out, n)
	}
	for n := range p.where {
		out = append(out, n)
	}
	return out
}

// each calls f with every held descriptor and its name, sorted by neither;
// the descriptor is f's only for the call.
func (p *parking) each(f func(name string, fd int) error) error {
	var ferr error
	for name, fd := range p.loose {
		if ferr = f(name, fd); ferr != nil {
			return ferr
		}
	}
	for _, b := range p.buckets {
		p.cycle(b, func(n string, fd int) bool {
			if ferr == nil {
				ferr = f(n, fd)
			}
			return true
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// cycle reads every message parked in b once, calls keep with its name and
// descriptor, and parks it again when keep says so (else closes it). A
// descriptor that cannot be parked again is kept loose.
func (p *parking) cycle(b *parkPair, keep func(name string, fd int) bool) {
	for range len(b.names) {
		name, fd, err := b.recv()
		if err != nil {
			break // nothing more queued: the names were off (cannot happen)
		}
		if !keep(name, fd) {
			unix.Close(fd)
			delete(b.names, name)
			continue
		}
		if err := b.send(name, fd); err != nil {
			delete(b.names, name)
			delete(p.where, name)
			p.loose[name] = fd
			continue
		}
		unix.Close(fd)
	}
}

// closeAll closes every pair (the kernel closes the descriptors in flight
// with them) and every loose descriptor.
func (p *parking) closeAll() {
	for _, b := range p.buckets {
		unix.Close(b.r)
		unix.Close(b.w)
	}
	for _, fd := range p.loose {
		unix.Close(fd)
	}
	p.buckets, p.where, p.loose = nil, map[string]*parkPair{}, map[string]int{}
}

func newParkPair() (*parkPair, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// Room for parkBucket messages; SO_SNDBUFFORCE passes net.core.wmem_max
	// as root.
	if unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, parkBuffer) != nil {
		unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_SNDBUF, parkBuffer)
	}
	return &parkPair{r: fds[0], w: fds[1], names: map[string]bool{}}, nil
}

// send parks fd (a duplicate in flight; the caller keeps fd) under name,
// never blocking.
func (b *parkPair) send(name string, fd int) error {
	return unix.Sendmsg(b.w, []byte(name), unix.UnixRights(fd), nil, unix.MSG_DONTWAIT)
}

// recv takes the first parked message out of b, never blocking.
func (b *parkPair) recv() (string, int, error) {
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := unix.Recvmsg(b.r, buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return "", -1, err
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 || flags&unix.MSG_CTRUNC != 0 {
		return "", -1, errors.Join(errors.New("parked message without its descriptor"), err)
	}
	fds, err := unix.ParseUnixRights(&cms[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return "", -1, fmt.Errorf("parked message: %d descriptors: %v", len(fds), err)
	}
	return string(buf[:n]), fds[0], nil
}
