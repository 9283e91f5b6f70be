package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Store keeps descriptors outside the serving process, by name, so that a
// FUSE connection (its /dev/fuse descriptor and its state memfd) survives
// the process: the kernel keeps a connection alive while one descriptor of
// it is open (fs/fuse/dev.c, fuse_dev_release). Two stores exist: systemd's
// file descriptor store (FDStore, when the daemon runs as a systemd service
// with FileDescriptorStoreMax=) and a holder process (Holder) otherwise.
//
// Names are at most 255 bytes of [A-Za-z0-9._-] (systemd's FDNAME rule,
// sd_pid_notify_with_fds(3)). Put of a name already stored replaces it.
type Store interface {
	// Put stores a duplicate of fd under name; the caller keeps fd.
	Put(name string, fd int) error
	// Remove closes and forgets the descriptor stored under name; a
	// name not stored is not an error.
	Remove(name string) error
	// Take returns every stored descriptor, duplicated into this
	// process (the caller owns them), by name. They stay stored.
	Take() (map[string]int, error)
	// Kind names the store for logs and `wsfs doctor`: "holder" or
	// "fdstore".
	Kind() string
}

// ValidName reports whether name may name a stored descriptor.
func ValidName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// holderMsg is one message of the holder protocol: a JSON object on a
// SOCK_SEQPACKET Unix socket, descriptors in SCM_RIGHTS beside it.
type holderMsg struct {
	Op    string `json:"op,omitempty"` // put, remove, take, names, ping, exit; replies: entry, end
	Name  string `json:"name,omitempty"`
	Error string `json:"error,omitempty"`
	Pid   int    `json:"pid,omitempty"`
}

// Holder is the client of a holder process listening at Socket.
type Holder struct {
	Socket string
	mu     sync.Mutex
	conn   *net.UnixConn
}

// Kind returns "holder".
func (h *Holder) Kind() string { return "holder" }

func (h *Holder) dial() (*net.UnixConn, error) {
	if h.conn != nil {
		return h.conn, nil
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: h.Socket, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("holder %s: %w", h.Socket, err)
	}
	h.conn = c
	return c, nil
}

// call sends m (with fds) and reads one reply per want==1, or entries until
// "end" when m is a take.
func (h *Holder) call(m holderMsg, fds []int) ([]holderMsg, [][]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, err := h.dial()
	if err != nil {
		return nil, nil, err
	}
	if err := sendMsg(c, m, fds); err != nil {
		h.conn.Close()
		h.conn = nil
		return nil, nil, fmt.Errorf("holder %s: %w", h.Socket, err)
	}
	var msgs []holderMsg
	var all [][]int
	for {
		r, rfds, err := recvMsg(c)
		if err != nil {
			h.conn.Close()
			h.conn = nil
			for _, fs := range all {
				closeAll(fs)
			}
			return nil, nil, fmt.Errorf("holder %s: %w", h.Socket, err)
		}
		if r.Error != "" {
			closeAll(rfds)
			return nil, nil, fmt.Errorf("holder: %s", r.Error)
		}
		if m.Op != "take" && m.Op != "names" {
			closeAll(rfds)
			return append(msgs, r), all, nil
		}
		if r.Op == "end" {
			closeAll(rfds)
			return msgs, all, nil
		}
		msgs = append(msgs, r)
		all = append(all, rfds)
	}
}

// Put stores fd under name.
func (h *Holder) Put(name string, fd int) error {
	if !ValidName(name) {
		return fmt.Errorf("descriptor name %q: must be 1-255 of [A-Za-z0-9._-]", name)
	}
	_, _, err := h.call(holderMsg{Op: "put", Name: name}, []int{fd})
	return err
}

// Remove forgets name.
func (h *Holder) Remove(name string) error {
	_, _, err := h.call(holderMsg{Op: "remove", Name: name}, nil)
	return err
}

// Take returns every stored descriptor.
func (h *Holder) Take() (map[string]int, error) {
	msgs, fds, err := h.call(holderMsg{Op: "take"}, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i, m := range msgs {
		if len(fds[i]) != 1 {
			closeAll(fds[i])
			continue
		}
		out[m.Name] = fds[i][0]
	}
	return out, nil
}

// TakeNamed returns a duplicate of the descriptor stored in st under name
// (the caller owns it) and true, or false when none is; it stays stored.
// Unlike Take it does not duplicate every descriptor into this process: a
// Holder is asked for the one name (a holder of an earlier version, which
// answers a take with every descriptor, is answered too: the others are
// closed here).
func TakeNamed(st Store, name string) (int, bool, error) {
	var got map[string]int
	if h, ok := st.(*Holder); ok {
		msgs, fds, err := h.call(holderMsg{Op: "take", Name: name}, nil)
		if err != nil {
			return -1, false, err
		}
		got = map[string]int{}
		for i, m := range msgs {
			if len(fds[i]) == 1 && m.Name == name {
				got[name] = fds[i][0]
			} else {
				closeAll(fds[i])
			}
		}
	} else {
		var err error
		if got, err = st.Take(); err != nil {
			return -1, false, err
		}
	}
	fd, ok := got[name]
	delete(got, name)
	closeAll(mapValues(got))
	if !ok {
		return -1, false, nil
	}
	return fd, true, nil
}

// Names returns the names of the descriptors the holder keeps, without
// the descriptors (for `wsfs doctor`: ConnName of a mountpoint tells
// whose connection is kept). A holder of an earlier version, which has
// no such op, answers with an error.
func (h *Holder) Names() ([]string, error) {
	msgs, fds, err := h.call(holderMsg{Op: "names"}, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, m := range msgs {
		closeAll(fds[i])
		out = append(out, m.Name)
	}
	return out, nil
}

// Ping returns the holder's pid, or an error when none answers at Socket.
func (h *Holder) Ping() (int, error) {
	msgs, _, err := h.call(holderMsg{Op: "ping"}, nil)
	if err != nil {
		return 0, err
	}
	return msgs[0].Pid, nil
}

// Exit tells the holder to close every descriptor and exit: every
// connection it alone kept ends (a full stop).
func (h *Holder) Exit() error {
	_, _, err := h.call(holderMsg{Op: "exit"}, nil)
	return err
}

// Close closes the client's connection (the holder keeps running).
func (h *Holder) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return nil
	}
	err := h.conn.Close()
	h.conn = nil
	return err
}

func sendMsg(c *net.UnixConn, m holderMsg, fds []int) error {
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(js, oob, nil)
	return err
}

func recvMsg(c *net.UnixConn) (holderMsg, []int, error) {
	var m holderMsg
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*253))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return m, nil, err
	}
	if n == 0 {
		return m, nil, errors.New("connection closed")
	}
	var fds []int
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, cm := range cmsgs {
				if got, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeAll(fds)
		return m, nil, errors.New("descriptors truncated")
	}
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeAll(fds)
		return m, nil, fmt.Errorf("bad message: %w", err)
	}
	return m, fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// RunHolder is the holder process: it listens at socket (mode 0600, in a
// directory only root can enter), accepts connections from its own uid
// only (SO_PEERCRED), and keeps the descriptors it is given until told to
// remove them or to exit. It does nothing else: no FUSE I/O, no API, no
// file system access beyond its socket, so nothing a session does can make
// it hang or die. ready, if not nil, is called once it listens. It returns
// when told to exit, or on a listen error.
func RunHolder(socket string, ready func()) error {
	os.Remove(socket)
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: socket, Net: "unixpacket"})
	unix.Umask(old)
	if err != nil {
		return fmt.Errorf("holder: listen %s: %w", socket, err)
	}
	defer l.Close()
	if ready != nil {
		ready()
	}
	var mu sync.Mutex
	held := newParking() // in flight, not open here (park.go)
	exit := make(chan struct{})
	var once sync.Once
	go func() {
		<-exit
		l.Close()
	}()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			select {
			case <-exit:
				mu.Lock()
				held.closeAll()
				mu.Unlock()
				os.Remove(socket)
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: back off, never spin
			continue
		}
		if !sameUser(c) {
			c.Close()
			continue
		}
		go func() {
			defer c.Close()
			for {
				m, fds, err := recvMsg(c)
				if err != nil {
					return
				}
				reply := holderMsg{Op: m.Op}
				switch m.Op {
				case "put":
					if len(fds) != 1 || !ValidName(m.Name) {
						closeAll(fds)
						reply.Error = "put: one descriptor and a valid name"
						break
					}
					mu.Lock()
					held.put(m.Name, fds[0])
					mu.Unlock()
				case "remove":
					mu.Lock()
					held.remove(m.Name)
					mu.Unlock()
				case "take":
					mu.Lock()
					werr := held.each(func(n string, fd int) error {
						if m.Name != "" && n != m.Name {
							return nil // a take of one name
						}
						return sendMsg(c, holderMsg{Op: "entry", Name: n}, []int{fd})
					})
					mu.Unlock()
					if werr != nil {
						return
					}
					reply.Op = "end"
				case "names":
					mu.Lock()
					names := held.names()
					mu.Unlock()
					for _, n := range names {
						if sendMsg(c, holderMsg{Op: "entry", Name: n}, nil) != nil {
							return
						}
					}
					reply.Op = "end"
				case "ping":
					reply.Pid = os.Getpid()
				case "exit":
					sendMsg(c, reply, nil)
					once.Do(func() { close(exit) })
					return
				default:
					closeAll(fds)
					reply.Error = fmt.Sprintf("unknown op %q", m.Op)
				}
				if sendMsg(c, reply, nil) != nil {
					return
				}
			}
		}()
	}
}

// sameUser reports whether the peer of c runs as this process's uid.
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return err == nil && cred != nil && int(cred.Uid) == os.Geteuid()
}

// SpawnHolder starts a holder process, the program at path run with argv
// (argv[0] included: what ps shows) that runs RunHolder(socket,
// HolderReady) (wsfs: path /proc/self/exe, the very binary running even if
// an upgrade replaced its file, argv[0] that binary's path and the hidden
// `holder` verb), detached from the caller (its own session and process
// group, cwd "/", standard streams on /dev/null) so that neither a signal to
// the daemon's group nor the daemon's death ends it, and waits until it
// listens (it closes descriptor 3, a pipe, then). If a holder already
// answers at socket, it is used as it is.
func SpawnHolder(socket, path string, argv []string) (*Holder, error) {
	h := &Holder{Socket: socket}
	if _, err := h.Ping(); err == nil {
		return h, nil
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("holder: start %s: %w", argv[0], err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	// EOF on the pipe: the holder listens (or died). It may also have
	// lost a race with another daemon's holder for the socket; then that
	// one answers.
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, r)
	if _, err := h.Ping(); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return nil, fmt.Errorf("holder: %s does not answer at %s: %w", argv[0], socket, err)
	}
	return h, nil
}

// HolderReady is the ready function of a holder process started by
// SpawnHolder: it closes descriptor 3, the pipe SpawnHolder waits on.
func HolderReady() { unix.Close(3) }

// FDStore is systemd's file descriptor store (systemd.service(5)
// FileDescriptorStoreMax=, sd_pid_notify_with_fds(3)): descriptors are sent
// to $NOTIFY_SOCKET with FDSTORE=1 and come back at the next start of the
// service in $LISTEN_FDS / $LISTEN_FDNAMES (sd_listen_fds_with_names(3)),
// from descriptor 3 on.
type FDStore struct {
	// Socket is $NOTIFY_SOCKET (a path, or "@name" for the abstract
	// namespace).
	Socket string
	mu     sync.Mutex
	got    map[string]int // received at start, not yet taken
}

// NewFDStore returns the store when the process runs under systemd with a
// notify socket ($NOTIFY_SOCKET), else nil. It takes the descriptors
// systemd passed (LISTEN_PID must be this process) and unsets the
// LISTEN_* variables, as sd_listen_fds(3) with unset_environment does.
func NewFDStore() *FDStore {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return nil
	}
	s := &FDStore{Socket: sock, got: map[string]int{}}
	pid, _ := strconv.Atoi(os.Getenv("LISTEN_PID"))
	n, _ := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	names := strings.Split(os.Getenv("LISTEN_FDNAMES"), ":")
	if pid == os.Getpid() {
		for i := 0; i < n; i++ {
			fd := 3 + i
			unix.CloseOnExec(fd)
			name := "unknown"
			if i < len(names) && names[i] != "" {
				name = names[i]
			}
			if old, ok := s.got[name]; ok {
				unix.Close(old)
			}
			s.got[name] = fd
		}
	}
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	return s
}

// Kind returns "fdstore".
func (s *FDStore) Kind() string { return "fdstore" }

func (s *FDStore) notify(state string, fds []int) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fdstore: %w", err)
	}
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	// x/sys turns a leading "@" into the abstract namespace's NUL.
	if err := unix.Sendmsg(fd, []byte(state), oob, &unix.SockaddrUnix{Name: s.Socket}, 0); err != nil {
		return fmt.Errorf("fdstore: send to %s: %w", s.Socket, err)
	}
	return nil
}

// Put stores fd under name (FDSTOREREMOVE of the name first, then
// FDSTORE=1 with FDNAME=name, so the name holds one descriptor).
func (s *FDStore) Put(name string, fd int) error {
	if !ValidName(name) {
		return fmt.Errorf("descriptor name %q: must be 1-255 of [A-Za-z0-9._-]", name)
	}
	if err := s.notify("FDSTOREREMOVE=1\nFDNAME="+name, nil); err != nil {
		return err
	}
	return s.notify("FDSTORE=1\nFDNAME="+name, []int{fd})
}

// Remove removes name from the store.
func (s *FDStore) Remove(name string) error {
	s.mu.Lock()
	if fd, ok := s.got[name]; ok {
		unix.Close(fd)
		delete(s.got, name)
	}
	s.mu.Unlock()
	return s.notify("FDSTOREREMOVE=1\nFDNAME="+name, nil)
}

// Take returns the descriptors systemd passed at this start; systemd keeps
// its own copies. A second Take returns duplicates again.
func (s *FDStore) Take() (map[string]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for name, fd := range s.got {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			closeAll(mapValues(out))
			return nil, err
		}
		out[name] = d
	}
	return out, nil
}

func mapValues(m map[string]int) []int {
	v := make([]int, 0, len(m))
	for _, fd := range m {
		v = append(v, fd)
	}
	return v
}
