package fusefs

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// Server is one mounted file system. Its methods are safe for concurrent use.
type Server struct {
	m        *mount
	fuse     *fuse.Server
	rootNode *node
	waitOnce sync.Once
}

// Mount validates cfg, mounts and returns once the server has answered the
// kernel's INIT (go-fuse's NewServer does, before it returns); requests made
// from then on wait in /dev/fuse until the server reads them. Mount does no
// I/O on the new mount itself (see DisablePoll).
// As root it calls mount(2) itself (go-fuse DirectMount), otherwise
// fusermount3; an unprivileged server has no FUSE passthrough (reads and
// writes go through it) and creates every object as its own user. It sets the process umask to 0: the kernel has already applied
// the caller's umask to every mode it sends (fuse(4)), and the server must not
// apply its own on top. It raises RLIMIT_NOFILE to the hard limit, since each
// inode the kernel knows holds one O_PATH descriptor.
//
// Errors are one line naming the input and the rule: a missing root, a root
// that is not a directory, a mountpoint that is missing, not a directory,
// inside the root (a loop), containing the root, or not empty (unless
// cfg.NonEmpty), an unknown symlink mode, a nil policy. On error nothing is
// left mounted.
func Mount(cfg Config) (*Server, error) {
	if cfg.Policy == nil {
		return nil, errors.New("policy: required")
	}
	if err := CheckUsers(cfg.Users); err != nil {
		return nil, err
	}
	mode, err := ParseSymlinkMode(string(cfg.Symlinks))
	if err != nil {
		return nil, err
	}
	var root, mpCanon string
	if cfg.Adopt != nil {
		// The mountpoint is the adopted connection's own, not served yet:
		// a look at it would wait for this very server.
		root, mpCanon, err = checkAdopt(cfg.Root, cfg.Mountpoint, cfg.Adopt)
	} else {
		root, mpCanon, err = CheckMount(cfg.Root, cfg.Mountpoint, cfg.NonEmpty)
	}
	if err != nil {
		return nil, err
	}
	served := root
	if cfg.Backing != "" {
		if !filepath.IsAbs(cfg.Backing) {
			return nil, fmt.Errorf("backing %q: must be absolute", cfg.Backing)
		}
		if served, err = identity.Canonical(cfg.Backing); err != nil {
			return nil, fmt.Errorf("backing %q: %s", cfg.Backing, describe(err))
		}
		if served != filepath.Clean(cfg.Backing) {
			// A directory a session can change (a sub-session's, in its
			// parent's layer) must not redirect the mount elsewhere.
			return nil, fmt.Errorf("backing %q: not its physical path (%s): a symlink on the way", cfg.Backing, served)
		}
	}
	rootFd, err := identity.OpenCanonical(served)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", served, err)
	}
	var st syscall.Stat_t
	if err := fstat(rootFd, &st); err != nil {
		unix.Close(rootFd)
		return nil, fmt.Errorf("root %q: %w", cfg.Root, err)
	}
	// The process's umask (a ring's queue thread, whose file system
	// context is its own, sets the caller's there for a create: umask.go):
	// the kernel has already applied the caller's umask to every create
	// and mkdir request, so the server must not apply its own on top (a process-wide setting: every caller
	// of Mount, the CLI's mount and serve verbs included, relies on it).
	syscall.Umask(0)

	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if n := RaiseDescriptorLimit(); n != 0 && n < LowDescriptorLimit {
		lowLimitOnce.Do(func() {
			logger.Warn("descriptor limit is low: node descriptors beyond three quarters of it are closed and opened again by file handle "+
				"(slower cold walks); a server that cannot (unprivileged, or a file system without file handles) gets EMFILE beyond it "+
				"(raise the hard limit: ulimit -Hn, systemd LimitNOFILE)",
				"limit", n, "want", LowDescriptorLimit)
		})
	}
	hostView := ""
	if cfg.HostView != "" {
		if !filepath.IsAbs(cfg.HostView) {
			unix.Close(rootFd)
			return nil, fmt.Errorf("host view %q: must be absolute", cfg.HostView)
		}
		hostView = filepath.Clean(cfg.HostView)
	}
	var hidden []string
	for _, h := range cfg.Hidden {
		if !filepath.IsAbs(h) {
			unix.Close(rootFd)
			return nil, fmt.Errorf("hidden path %q: must be absolute", h)
		}
		hidden = append(hidden, filepath.Clean(h))
	}
	m := &mount{
		linkRules: linkRules{root: root, mountpoint: filepath.Clean(cfg.Mountpoint), mountCanon: mpCanon, hostView: hostView, symlinks: mode},
		dev:       st.Dev,
		log:       logger,
		session:   cfg.Session,
		before:    cfg.BeforeWrite,
	}
	if served != root {
		m.backing = served
	}
	if cfg.Lower != "" {
		if cfg.Backing == "" {
			unix.Close(rootFd)
			return nil, fmt.Errorf("lower %q: needs a backing overlay (Backing)", cfg.Lower)
		}
		if m.lower, err = openLower(cfg.Lower, filepath.Clean(cfg.Lower) == root); err != nil {
			unix.Close(rootFd)
			return nil, fmt.Errorf("lower %q: %s", cfg.Lower, describe(err))
		}
	}
	m.cross = newCrossings(root, hidden, cfg.Shared, cfg.Owner)
	if cfg.Adopt != nil {
		// The restored nodes were never looked up by this process: the
		// mounts inside the root they may lie in are learned now.
		m.cross.learnTable(func(string) bool { return true })
	}
	m.pol.Store(cfg.Policy)
	return m.serve(rootFd, &st, serveOpts{
		mountpoint: cfg.Mountpoint, fsName: root, allowOther: cfg.AllowOther, users: cfg.Users, debug: cfg.Debug,
		noWatch: cfg.NoWatch, entry: cfg.EntryTimeout, attr: cfg.AttrTimeout, neg: cfg.NegativeTimeout,
		kind: "mount", keep: cfg.Keep, adopt: cfg.Adopt, transport: cfg.Transport, noPassthrough: cfg.NoPassthrough,
	})
}

// serveOpts are the mount options a session mount and a host view share.
type serveOpts struct {
	mountpoint, fsName string
	allowOther, debug  bool
	users              []uint32 // Config.Users: allow_other and usersGate
	noWatch            bool
	noPassthrough      bool // Config.NoPassthrough
	entry, attr, neg   time.Duration
	kind               string          // "mount" or "hostview", for the kept state
	keep               transport.Store // keep the connection there (Config.Keep)
	adopt              *transport.Conn // serve this connection (Config.Adopt)
	transport          transport.Mode
	// sharedRoot: rootFd is shared by every host view (hostRootFd), never
	// closed with this mount.
	sharedRoot bool
}

// serve mounts the node tree rooted at rootFd (stat st) at o.mountpoint and
// starts the watcher. Every mount is made with default_permissions: the
// kernel checks modes with the caller's credentials, whatever the server's.
// On error it closes rootFd (but a shared one, o.sharedRoot) and leaves
// nothing mounted.
func (m *mount) serve(rootFd int, st *syscall.Stat_t, o serveOpts) (*Server, error) {
	var err error
	m.sh = shareFor(m.session)
	m.mfds.probe(rootFd)
	rootNode, _ := m.newNodeWith(rootFd, m.root, syscall.S_IFDIR, -1, nil, 0, true)
	if o.sharedRoot {
		rootNode.desc.shared = true // closing the node leaves it open
	}
	if m.host != nil {
		m.host.root.Store(rootNode)
	}
	if !o.noWatch {
		if m.watch, err = newWatcher(); err != nil {
			m.log.Warn("host changes not watched; short cache timeouts", m.sessionAttr("err", err)...)
		}
	}
	defEntry, defNeg := DefaultTimeout, time.Duration(0)
	if m.watch != nil {
		defEntry, defNeg = DefaultWatchedTimeout, DefaultWatchedTimeout
	}
	entry := timeout(o.entry, defEntry)
	attr := timeout(o.attr, defEntry)
	neg := timeout(o.neg, defNeg)
	if m.watch != nil {
		m.xattrTTL = attr
	}
	rootAttr := m.stable(st)
	opts := &fs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		RootStableAttr:  &rootAttr,
		// Node IDs are inode numbers, so a successor that serves this
		// connection on gives every object the ID the kernel knows it
		// by (keep.go).
		ExternalNodeID: true,
		// The kernel's lookup counts, recorded for a successor (a
		// no-op when the connection is not kept).
		OnLookupCount: m.keepCount,
		// Modes pass through as they are: without this go-fuse shows a
		// mode-0000 file as 0644.
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName:               o.fsName,
			Name:                 "wsfs",
			DirectMount:          os.Geteuid() == 0,
			AllowOther:           o.allowOther || len(o.users) > 0,
			EnableLocks:          true,
			EnableSymlinkCaching: true,
			// ACLs enforced and cached by the kernel (FUSE_POSIX_ACL) only
			// when the watcher can drop a cached ACL that changes on the
			// host: the kernel keeps it for the inode's life otherwise.
			EnableAcl: m.watch != nil,
			Debug:     o.debug,
			MaxWrite:  1 << 20,
			// A request for a node ID or handle the bridge does not know
			// (after a takeover) is ESTALE, not a stack trace and EIO.
			PanicHandler: m.panicStatus,
			Options:      []string{"default_permissions"},
		},
	}
	if os.Geteuid() != 0 || o.noPassthrough {
		// Registering a backing file needs CAP_SYS_ADMIN (fuse_backing_open):
		// an unprivileged server serves file data itself.
		opts.MountOptions.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	} else {
		m.passthrough = true
	}
	// Never kernel-"ro", even when nothing is writable: read-only is decided
	// here (EROFS), so every denial is logged and counted and a read-only
	// session can be widened live (DESIGN.md, "Policy", Live).
	//
	// noatime: the backing file system keeps its own access times, since
	// every read reaches it (passed through, or by the server); the kernel
	// need not track them on its FUSE inodes too.
	if opts.MountOptions.DirectMount {
		opts.MountOptions.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOATIME
	} else {
		opts.MountOptions.Options = append(opts.MountOptions.Options, "noatime")
	}
	rootNode.ensureWatched()
	srv, err := m.mountRaw(o.mountpoint, rootNode, opts, m.watch != nil, o.transport, o.adopt, o.users)
	if err != nil {
		if m.watch != nil {
			m.watch.close()
		}
		rootNode.desc.close()
		m.mfds.close()
		m.lower.close()
		dropShare(m.sh)
		if o.adopt != nil {
			return nil, fmt.Errorf("take over %q: %w", o.mountpoint, err)
		}
		return nil, fmt.Errorf("mount %q: %w", o.mountpoint, err)
	}
	var live *transport.Live
	if o.adopt != nil {
		var restored, stale int
		live, restored, stale = m.restore(o.adopt, rootNode, rootFd)
		m.log.Info("connection taken over", m.sessionAttr("mountpoint", o.mountpoint,
			"nodes", restored, "stale", stale, "handles", len(live.Files))...)
	}
	if o.keep != nil {
		m.keep(o.keep, srv, o.kind, filepath.Clean(o.mountpoint), rootFd, live)
	}
	if o.adopt != nil {
		o.adopt.State.Close()
		o.adopt.State = nil
	}
	if m.watch != nil {
		m.watch.start(rootNode)
	}
	go srv.Serve()
	// The ring's queues too (held since INIT); on a connection taken over
	// they first take over what the predecessor's entries hold.
	m.ring.Serve()
	if o.adopt != nil {
		if st := srv.NotifyResend(); !st.Ok() {
			m.log.Warn("FUSE_NOTIFY_RESEND refused: requests the predecessor read may wait until interrupted",
				m.sessionAttr("mountpoint", o.mountpoint, "status", st)...)
		}
		m.forgetCaches(srv, live)
	}
	return &Server{m: m, fuse: srv, rootNode: rootNode}, nil
}

// mountRaw mounts root like go-fuse's fs.Mount, with directories served
// without OPENDIR round trips (noOpendir) when cacheDirs: only with the
// watcher are kernel-cached listings safe from host-side changes, and
// only to root, the server's uid and users when users are given
// (usersGate, outermost). The requests come over mode's transport
// (transport.NewURing decides, and leaves the mount on /dev/fuse when the
// ring cannot serve it).
//
// With adopt, it serves that connection instead of mounting (fuse.NewServerOnFD
// with the predecessor's INIT), over the transport its INIT agreed on
// whatever mode says: a connection on the ring has its ring memory taken
// over (transport.AdoptURing), one on /dev/fuse stays there. The server is
// returned before it serves: the caller restores and keeps state first,
// then runs Serve (and the ring's Serve).
func (m *mount) mountRaw(mountpoint string, root fs.InodeEmbedder, opts *fs.Options, cacheDirs bool, mode transport.Mode, adopt *transport.Conn, users []uint32) (*fuse.Server, error) {
	mode, err := transport.Resolve(mode)
	if err != nil {
		return nil, err
	}
	var ring *transport.URing
	switch {
	case adopt != nil && adopt.Meta.Ring != nil:
		ring, err = transport.AdoptURing(adopt.Ring, *adopt.Meta.Ring, m.log)
		adopt.Ring = -1 // the ring's now, also on error
	case adopt == nil:
		ring, err = transport.NewURing(mode, opts.MountOptions.MaxWrite, m.log)
	}
	if err != nil {
		return nil, err
	}
	opts.MountOptions.ExtraCapabilities |= ring.Capabilities() | fuse.CAP_DONT_MASK | fuse.CAP_HANDLE_KILLPRIV_V2
	raw := fs.NewNodeFS(root, opts)
	if cacheDirs {
		raw = &noOpendir{RawFileSystem: raw}
	}
	if m.passthrough {
		raw = &backingReply{RawFileSystem: raw, m: m}
	}
	raw = &keepReply{RawFileSystem: raw, m: m}
	if len(users) > 0 {
		raw = &usersGate{fs: raw, m: m, users: users}
	}
	var srv *fuse.Server
	if adopt != nil {
		srv, err = fuse.NewServerOnFD(raw, adopt.Fuse, mountpoint, &adopt.Meta.Init, &adopt.Meta.InitOut, &opts.MountOptions)
	} else {
		srv, err = fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	}
	if err != nil {
		ring.Close()
		return nil, err
	}
	m.fuseSrv.Store(srv)
	// A connection taken over keeps what its first INIT agreed (an older
	// one may have the kernel mask the mode itself).
	initOut := srv.InitOut()
	m.dontMask = initOut.Flags64()&fuse.CAP_DONT_MASK != 0
	if adopt != nil {
		// go-fuse's now: the caller's copy must not be closed again.
		adopt.Fuse = -1
	}
	switch err := ring.Start(srv, mountpoint); {
	case err == nil:
		m.ring = ring
	case adopt != nil && ring != nil:
		// Its requests come only through the ring: a queue that could
		// not register would leave its CPU's callers waiting for good.
		// End the connection (they get ECONNABORTED) for the caller to
		// mount again.
		aerr := transport.AbortConnection(transport.FusectlName(mountpoint))
		if aerr == nil && !transport.Ended(srv) {
			// fusectl named another connection: the mount point is
			// covered by another FUSE mount.
			aerr = errors.New("the abort did not end it (is the mount point covered by another FUSE mount?)")
		}
		if aerr != nil {
			// Left as it is: its other queues go on serving what they can.
			m.log.Error("a connection taken over on the ring could not register its queues, nor be ended", m.sessionAttr("mountpoint", mountpoint, "err", err, "abort_err", aerr)...)
			return nil, fmt.Errorf("ring: %w", err)
		}
		// Ended: go-fuse's read gets ENODEV at once and Serve closes
		// its descriptor of the connection; the queues (Start opened
		// their gate) end with it and give theirs and the ring memory
		// back, so nothing of the connection stays open here, unless a
		// lock wait a queue handed off holds on (its fcntl(2) waits for
		// the lock's holder): then they are given back when it ends.
		srv.Serve()
		ended := make(chan struct{})
		go func() { ring.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(ringEndWait):
			m.log.Warn("an ended connection's ring queues still wait on a lock; they give back their descriptors when it is granted", m.sessionAttr("mountpoint", mountpoint)...)
		}
		m.fuseSrv.Store(nil)
		return nil, fmt.Errorf("ring: %w", err)
	}
	// Start logs why a new mount stays on /dev/fuse otherwise.
	// No srv.WaitMount: its pollHack opens and polls a file through the new
	// mount from this process, and a SIGKILL that lands while one of those
	// requests is read but not yet answered leaves the process unkillable
	// (fs/fuse/dev.c, request_wait_answer waits out a sent request, and the
	// stuck thread keeps /dev/fuse open). NewServer has mounted and answered
	// INIT; every request from now on waits in /dev/fuse until Serve reads
	// it, so the mount is usable as it is.
	return srv, nil
}

// ringEndWait bounds how long a failed takeover waits for the queues of the
// connection it ended to give back their descriptors (mountRaw).
const ringEndWait = 5 * time.Second

// timeout applies Config's timeout convention: 0 is the default, negative 0.
func timeout(v, def time.Duration) time.Duration {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// LowDescriptorLimit is the RLIMIT_NOFILE below which Mount logs a warning
// and `wsfs doctor` warns. The server caches one O_PATH descriptor per inode
// the kernel keeps looked up, up to three quarters of the limit, and opens
// the others again by file handle when they are used (fdcache.go), so a
// walk of a tree larger than the cache (tar, git status of a big
// repository) costs reopens. A server that cannot reopen by handle (not
// root, or a file system without export support) keeps every descriptor,
// and such a walk gets EMFILE through the mount.
const LowDescriptorLimit = 65536

var lowLimitOnce sync.Once

// RaiseDescriptorLimit lifts the process's soft descriptor limit to the hard
// one (Go does this at start too) and, with CAP_SYS_RESOURCE, the hard one to
// fs.nr_open, and returns the soft limit then in force (0 if getrlimit(2)
// fails). Mount calls it; it is exported for `wsfs doctor`.
func RaiseDescriptorLimit() uint64 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > lim.Max {
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}) == nil {
				return n
			}
		}
	}
	if lim.Cur < lim.Max {
		if unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim.Max, Max: lim.Max}) == nil {
			lim.Cur = lim.Max
		}
	}
	return lim.Cur
}

// Statfs is statfs(2) of path, asked once more when the answer is
// ECONNABORTED: over FUSE over io_uring, the requests a dead server's
// ring still held or queued are ended with ECONNABORTED when the kernel
// tears the ring down (fs/fuse/dev_uring.c), and it marks the connection
// dead before it ends any, so the next request gets ENOTCONN as on
// /dev/fuse. A caller telling a dead mount (ENOTCONN) from a live one
// uses it instead of unix.Statfs. The error is a unix.Errno, or nil.
func Statfs(path string, st *unix.Statfs_t) error {
	err := unix.Statfs(path, st)
	if err == unix.ECONNABORTED {
		err = unix.Statfs(path, st)
	}
	return err
}

// CheckMount validates a root and a mountpoint as Mount does and returns their
// canonical paths. It refuses a missing root or one that is not a directory, a
// mountpoint that is relative, missing, not a directory, a dead FUSE mount
// (ENOTCONN) or a live wsfs mount, inside the root or containing it, or not
// empty unless nonEmpty.
func CheckMount(root, mountpoint string, nonEmpty bool) (rootCanon, mpCanon string, err error) {
	if root == "" {
		return "", "", errors.New("root: required")
	}
	if rootCanon, err = identity.Canonical(root); err != nil {
		return "", "", fmt.Errorf("root %q: %s", root, describe(err))
	}
	if fi, err := os.Stat(rootCanon); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("root %q: not a directory", root)
	}
	if mountpoint == "" {
		return "", "", errors.New("mountpoint: required")
	}
	if !filepath.IsAbs(mountpoint) {
		return "", "", fmt.Errorf("mountpoint %q: must be absolute", mountpoint)
	}
	mpCanon, err = identity.Canonical(mountpoint)
	if err == nil {
		// statfs(2) reaches the server; lstat(2) of a dead mount's root
		// may be answered from the attribute cache (default_permissions).
		var sfs unix.Statfs_t
		if serr := Statfs(mpCanon, &sfs); serr == unix.ENOTCONN {
			err = serr
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ENOTCONN) {
			return "", "", fmt.Errorf("mountpoint %q: a dead FUSE mount is there; unmount it first (wsfs unmount)", mountpoint)
		}
		return "", "", fmt.Errorf("mountpoint %q: %s", mountpoint, describe(err))
	}
	if fi, err := os.Stat(mpCanon); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("mountpoint %q: not a directory", mountpoint)
	}
	if identity.Within(mpCanon, rootCanon) {
		return "", "", fmt.Errorf("mountpoint %q is inside the root %q it would serve (a loop)", mountpoint, rootCanon)
	}
	if identity.Within(rootCanon, mpCanon) {
		return "", "", fmt.Errorf("root %q is inside the mountpoint %q", root, mountpoint)
	}
	if e, _, terr := MountAt(mpCanon); terr == nil && e.FSType == "fuse.wsfs" {
		return "", "", fmt.Errorf("mountpoint %q is a live wsfs mount; unmount it first (wsfs unmount %s) or pick another directory", mountpoint, mpCanon)
	}
	if !nonEmpty {
		f, err := os.Open(mpCanon)
		if err != nil {
			return "", "", fmt.Errorf("mountpoint %q: %s", mountpoint, describe(err))
		}
		names, _ := f.Readdirnames(1)
		f.Close()
		if len(names) > 0 {
			return "", "", fmt.Errorf("mountpoint %q: not empty (wsfs mount --nonempty mounts over what is in it)", mountpoint)
		}
	}
	return rootCanon, mpCanon, nil
}

// describe renders an errno as the words ext4 users know ("does not exist").
func describe(err error) string {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return "does not exist"
	case errors.Is(err, syscall.ENOTDIR):
		return "a path component is not a directory"
	case errors.Is(err, syscall.ELOOP):
		return "too many levels of symbolic links"
	case errors.Is(err, syscall.EACCES):
		return "permission denied"
	}
	return identity.ErrnoText(err)
}

// Root returns the canonical physical root being served.
func (s *Server) Root() string { return s.m.root }

// Mountpoint returns the mountpoint as given to Mount.
func (s *Server) Mountpoint() string { return s.m.mountpoint }

// SetPolicy replaces the policy; the next operation of every process, already
// running ones included, sees it. Files already open for write keep their
// descriptor, as with chmod(2). Both directions work: the mount is never
// made kernel-read-only, so a read-only policy can be widened.
//
// The kernel's cached entries for the places whose access changed (a root
// added, removed or given another access; everything outside the roots when
// Outside changed; in a host view, the mounts whose source lies in such a
// root) are dropped (FUSE_NOTIFY_INVAL_ENTRY, which drops the
// subtree below too), so a path walk looks them up again under the new
// policy instead of using a dentry cached under the old one; a host view
// also decides reads on OPEN, OPENDIR and READLINK, for descriptors and
// dentries the kernel still holds.
func (s *Server) SetPolicy(p *policy.Policy) {
	if p == nil {
		return
	}
	old := s.m.pol.Swap(p)
	if old == nil || old == p {
		return
	}
	was, now := old.Spec(), p.Spec()
	if s.m.host != nil && was.Outside != now.Outside {
		// Everything outside the roots: every name of the host's "/".
		for name := range s.rootNode.Children() {
			s.rootNode.NotifyEntry(name)
		}
		return
	}
	changed := changedRoots(was, now)
	for _, place := range changed {
		s.forgetEntry(place, false)
	}
	// A mount inside the root is decided at its source, which the change
	// may concern: its entry is dropped (the node too, so the next lookup
	// decides again).
	for _, mp := range s.m.cross.points() {
		s.forgetEntry(mp, true)
	}
	if s.m.host != nil && len(changed) > 0 {
		s.forgetMountsFrom(changed)
	}
}

// changedRoots returns the explicit roots and temp areas whose access
// differs between the specs a and b (present in one only, or with another
// access).
func changedRoots(a, b policy.Spec) []string {
	access := func(s policy.Spec) map[string]policy.Access {
		m := map[string]policy.Access{}
		for _, t := range s.Temp {
			m[t] = policy.AccessReadWrite
		}
		for _, r := range s.Additional {
			m[r.Path] = r.Access
		}
		return m
	}
	am, bm := access(a), access(b)
	var out []string
	for p, acc := range am {
		if got, ok := bm[p]; !ok || got != acc {
			out = append(out, p)
		}
	}
	for p := range bm {
		if _, ok := am[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// Decide returns what the mount answers for op at the canonical physical
// path p, without a round trip through the kernel (so a process that must
// not look into its own mount, like the daemon, can ask): the lookups on
// the way to p first, as a process makes them (a path below a mount inside
// the root is refused when a mount around it is: a bind of a none root
// holding a bind of a read-write one), then a host view's own rules (a
// hidden place is EACCES "hostview:hidden"; a lookup on
// the way to a visible place through a refused area is allowed as
// "hostview:passage"; a session link cannot be changed; a mount on the way
// of a refused type, or whose source lies in a none root, is EACCES
// "hostview:mount-type" or "hostview:mount-source"), then the policy
// (policy.Policy.DecideAt: a none root is EACCES "root:none"). A write is
// decided with the object's identity as the mount's node has it (objectAt:
// a hard link to a protected file is protected; in a layered mount by its
// origin in the project), so the answer is the one a process meets.
// Decide reads /proc/self/mountinfo on a host view: meant for a cd or a
// resolve, not for every access.
func (s *Server) Decide(op policy.Op, p string) policy.Decision {
	if cs := s.m.cross; cs != nil && p != s.m.root && identity.Within(p, s.m.root) {
		// The mounts on the way to p inside the root, which no lookup
		// may have crossed yet: what a lookup there would learn.
		cs.learnTable(func(mp string) bool { return identity.Within(p, mp) })
	}
	// The lookups on the way first, as a process meets them.
	if d, ok := s.m.way(p); !ok {
		return d
	}
	var obj policy.Object
	if op.IsWrite() {
		obj = s.m.objectAt(p)
	}
	d := s.m.judge(op, p, obj)
	// A refusal decided at a mount's source is named by the mount's rule
	// when that refuses it too, as a lookup crossing it is refused.
	if h := s.m.host; h != nil && (d.Allow || s.m.cross.sources(p) != nil) {
		if md, ok := h.mountsGate(s.m.policy(), p); !ok {
			return md
		}
	}
	return d
}

// Passage reports whether a host view shows the canonical physical path p
// only as the way to a visible place (a hidden place, or one the policy
// refuses, that holds one of the session's roots, temp areas or links):
// lookups pass, listings show only the names on the way. False on a
// session mount.
func (s *Server) Passage(p string) bool {
	h := s.m.host
	return h != nil && h.onlyTheWay(s.m.policy(), p)
}

// Policy returns the policy in force.
func (s *Server) Policy() *policy.Policy { return s.m.pol.Load() }

// Watched reports whether host-side changes are watched (inotify). Without
// the watcher the kernel caches entries and attributes for DefaultTimeout
// only, keeps no directory listings and no ACLs (and so enforces none).
func (s *Server) Watched() bool { return s.m.watch != nil }

// SyncHostChanges returns once every change made on the host before the
// call has been turned into kernel cache invalidations, so a process's next
// operation sees it. A host that writes files itself and then starts a tool
// in the mount calls it in between; without it a change becomes visible a
// moment later (the watcher is asynchronous). With the watcher it is a
// barrier: a marker directory is made in a private directory watched by the
// same inotify instance, whose events come in order, and the call returns
// when the watcher has handled the marker (and so every earlier event).
// Without the watcher (host views) it drops every entry, attribute and
// cached page the kernel holds for the mount (the cost grows with the
// number of inodes the kernel knows there). Errors: the barrier could not be
// placed (inotify limits), timed out (10 s), or the mount is gone.
func (s *Server) SyncHostChanges() error {
	if s.m.watch == nil {
		invalidateTree(s.rootNode.EmbeddedInode())
		return nil
	}
	return s.m.watch.barrier(10 * time.Second)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { return s.m.stats.snapshot() }

// Transport names how requests reach the server: transport.NameURing
// ("io-uring") when the kernel sends them through the ring, else
// transport.NameDev ("/dev/fuse").
func (s *Server) Transport() string {
	if s.m.ring.Active() {
		return transport.NameURing
	}
	return transport.NameDev
}

// RingRequests returns the number of requests served through the ring
// since the mount (0 on /dev/fuse).
func (s *Server) RingRequests() uint64 { return s.m.ring.Served() }

// Unmount unmounts and waits for the server to stop. A busy mount gives a
// *BusyError naming the holders, unless force, which detaches the mount lazily
// (umount2(2) MNT_DETACH): it disappears from the namespace at once and the
// server stops when the last holder lets go.
func (s *Server) Unmount(force bool) error {
	if err := Unmount(s.m.mountpoint, force); err != nil {
		return err
	}
	if force {
		// Serve lazily detached holders until they let go, in the
		// background; the caller gets control back now.
		go s.Wait()
		return nil
	}
	s.Wait()
	return nil
}

// Pause stops serving at a request boundary, for a successor that serves
// the connection on (Config.Adopt): the requests being handled are finished
// (up to wait), every later one is left unanswered for the successor (on
// /dev/fuse the kernel sends it again, FUSE_NOTIFY_RESEND; over io_uring
// it waits in a ring entry the successor takes over). Nothing is
// unmounted. It reports whether every running request finished in time.
//
// The watcher stops first: the successor watches the backing tree itself,
// and this server's view of it is no longer the kernel's.
func (s *Server) Pause(wait time.Duration) bool {
	if s.m.watch != nil {
		s.m.watch.close()
	}
	return s.suspend(wait)
}

// Suspend stops serving at a request boundary as Pause does, but for a
// handover that may be undone (Resume): the watcher runs on, since this
// server may serve on. It reports whether every running request finished
// in time. A successor may serve the connection only once this process
// has exited: until then its readers still read requests and leave them
// unanswered.
func (s *Server) Suspend(wait time.Duration) bool {
	return s.suspend(wait)
}

// suspend pauses /dev/fuse's readers and the ring's queues at once, so
// that both are given wait, and the call takes no longer.
func (s *Server) suspend(wait time.Duration) bool {
	ring := make(chan bool, 1)
	go func() { ring <- s.m.ring.Pause(wait) }()
	dev := s.fuse.Pause(wait)
	return <-ring && dev
}

// Resume undoes Suspend: requests are served again, and the ones left
// unanswered meanwhile are served (the kernel is asked to send /dev/fuse's
// again, FUSE_NOTIFY_RESEND; the ring's queues take over what a successor
// that ran meanwhile left in its entries). The error is the
// notification's (ENOSYS before Linux 6.9).
func (s *Server) Resume() error {
	s.m.ring.Resume()
	if st := s.fuse.Resume(); !st.Ok() {
		return syscall.Errno(st)
	}
	return nil
}

// Kept reports whether the connection is kept in a descriptor store
// (Config.Keep), so that it survives this process.
func (s *Server) Kept() bool { return s.m.keepState() != nil }

// DisablePoll makes the kernel stop sending FUSE_POLL to this mount: it opens
// and polls a file through the mount, the server answers ENOSYS and the
// kernel sets no_poll for the connection (go-fuse's WaitMount pollHack). A
// process that opens files of its own mount with package os must call it
// before the first open: Go's runtime adds every opened file to its epoll set
// with a raw epoll_ctl(2) that keeps its P while the kernel waits for the
// server's answer to FUSE_POLL, a deadlock when no other P is free to run the
// server (GOMAXPROCS=1). Mount does not call it, because it is I/O by the
// server on its own mount (see mountRaw); servers that never touch their own
// mounts, as wsfs's daemon and CLI do not, need not. Errors are those of
// open(2) through the mount.
func (s *Server) DisablePoll() error { return s.fuse.WaitMount() }

// Wait blocks until the mount is gone (unmounted by anyone) and the server's
// descriptors are closed.
func (s *Server) Wait() {
	s.fuse.Wait()
	s.waitOnce.Do(func() {
		s.m.unkeep(s.m.mountpoint)
		if h := s.m.host; h != nil && h.shared != nil {
			h.shared.unregister(h)
		}
		if s.m.watch != nil {
			s.m.watch.close()
		}
		s.rootNode.desc.close()
		s.m.mfds.close()
		s.m.lower.close()
		dropShare(s.m.sh)
	})
}

// Stats are counters since the mount. Maps are fresh copies.
type Stats struct {
	// Ops counts FUSE operations the node tree answered, by name ("lookup",
	// "getattr", ...). Reads and writes that go through FUSE passthrough
	// never reach the server and are not counted.
	Ops map[string]uint64
	// Denials counts policy denials by rule.
	Denials map[string]uint64
}

// BusyError is Unmount's error when processes still use the mount.
type BusyError struct {
	Mountpoint string
	Holders    []Holder
}

// Holder is a process that holds a mount busy.
type Holder struct {
	PID  int
	Comm string
	What string // "cwd", "root", "exe", "fd 3"
	// Waiting says what the process is blocked in, when that explains why
	// it does not let go: "waiting in a FUSE request" when one of its
	// threads sleeps in the kernel for a FUSE server's answer (its
	// /proc/PID/task/TID/wchan or stack shows request_wait_answer and the
	// like), else "in uninterruptible sleep (state D)" when a thread's
	// /proc/PID/task/TID/stat state is D; "" otherwise.
	Waiting string
}

// Error is one line: the mountpoint and each holder as pid (comm, what),
// or pid (comm, what, waiting) for a holder blocked in the kernel.
func (e *BusyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mountpoint %q is busy", e.Mountpoint)
	for i, h := range e.Holders {
		if i == 0 {
			b.WriteString(": held by ")
		} else {
			b.WriteString(", ")
		}
		if h.Waiting != "" {
			fmt.Fprintf(&b, "pid %d (%s, %s, %s)", h.PID, h.Comm, h.What, h.Waiting)
		} else {
			fmt.Fprintf(&b, "pid %d (%s, %s)", h.PID, h.Comm, h.What)
		}
	}
	if len(e.Holders) == 0 {
		b.WriteString(" (no holder found in /proc; another mount namespace?)")
	}
	return b.String()
}

// busyTries and busyPause bound Unmount's asking again when a mount is busy
// with no holder (a reference held for a moment): 10 times 50 ms.
const (
	busyTries = 10
	busyPause = 50 * time.Millisecond
)

// Unmount unmounts the FUSE mount at mountpoint from outside its server (the
// `wsfs unmount` verb), a dead (ENOTCONN) one included. A busy mount gives a
// *BusyError (after asking again for a moment when no process holds it)
// unless force, which detaches lazily. As root it uses umount2(2),
// otherwise fusermount3 -u (-z with force).
func Unmount(mountpoint string, force bool) error {
	mountpoint = filepath.Clean(mountpoint)
	if err := checkWsfsMount(mountpoint); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		args := []string{"-u"}
		if force {
			args = append(args, "-z")
		}
		// fusermount3 exits 1 for every failure; only its message (strerror
		// of umount2's errno) tells EBUSY apart, so it runs in the C locale.
		fm := exec.Command("fusermount3", append(args, mountpoint)...)
		fm.Env = []string{"LC_ALL=C", "PATH=" + os.Getenv("PATH")}
		out, err := fm.CombinedOutput()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			if strings.Contains(strings.ToLower(msg), unix.EBUSY.Error()) {
				return &BusyError{Mountpoint: mountpoint, Holders: Holders(mountpoint)}
			}
			return fmt.Errorf("unmount %q: %s", mountpoint, msg)
		}
		return nil
	}
	err := unix.Unmount(mountpoint, 0)
	for tries := 0; err == unix.EBUSY && !force; tries++ {
		// A mount busy with no process holding it is referred to for a
		// moment only (a stat in flight, such as the kick after a
		// takeover, transport/kick.go): asked again a few times.
		h := Holders(mountpoint)
		if len(h) > 0 || tries == busyTries {
			return &BusyError{Mountpoint: mountpoint, Holders: h}
		}
		time.Sleep(busyPause)
		err = unix.Unmount(mountpoint, 0)
	}
	if err == unix.EBUSY {
		err = unix.Unmount(mountpoint, unix.MNT_DETACH)
	}
	switch err {
	case nil:
		return nil
	case unix.EINVAL:
		return &NotMountError{Mountpoint: mountpoint, Why: "not a mountpoint"}
	case unix.ENOENT:
		return &NotMountError{Mountpoint: mountpoint, Why: "does not exist"}
	}
	return fmt.Errorf("unmount %q: %w", mountpoint, err)
}

// HostViewSource is the mount source (the first field after the file system
// type in /proc/self/mountinfo) of every host view.
const HostViewSource = "wsfs-host"

// UnmountSiblingHostView detaches the host view mounted at mountpoint+"@host"
// (`wsfs mount`'s default place for the host view of the session mounted at
// mountpoint) and returns its path; "" and nil when no host view is mounted
// there. It detaches lazily (umount2(2) MNT_DETACH): once its session is
// unmounted a host view must leave the tree at once, or a later `rm -rf` of
// the directory holding both walks into the host's "/" through it.
func UnmountSiblingHostView(mountpoint string) (string, error) {
	return unmountSiblingHostView(mountpoint, Unmount)
}

func unmountSiblingHostView(mountpoint string, unmount func(string, bool) error) (string, error) {
	hv := filepath.Clean(mountpoint) + "@host"
	table, err := MountTable()
	if err != nil {
		return "", err
	}
	if !isHostView(table, hv) {
		return "", nil
	}
	if err := unmount(hv, true); err != nil {
		// The session's server takes its host view down as soon as it sees
		// its session unmounted, and may win the race: gone is done.
		if table, terr := MountTable(); terr == nil && !isHostView(table, hv) {
			return hv, nil
		}
		return hv, err
	}
	return hv, nil
}

// isHostView reports whether table has a host view mounted at path.
func isHostView(table map[string]MountEntry, path string) bool {
	e, ok := table[path]
	return ok && e.FSType == "fuse.wsfs" && e.Source == HostViewSource
}

// checkWsfsMount refuses to unmount what is not a wsfs mount (a tmpfs,
// /proc): the verb exists for wsfs's own mounts, dead ones included. The
// path is looked up as spelled, then with its parent canonicalized, with
// MountAt: the mountpoint is stat'ed only with AT_STATX_DONT_SYNC, which a
// FUSE mount answers from the kernel's cache (a dead or hung one neither
// answers ENOTCONN nor hangs), else read from the mount table.
func checkWsfsMount(mountpoint string) error {
	e, ok, err := MountAt(mountpoint)
	if err != nil {
		return nil // no mount table to judge by; umount2(2) still checks
	}
	if !ok {
		if dir, err := filepath.EvalSymlinks(filepath.Dir(mountpoint)); err == nil {
			e, ok, _ = MountAt(filepath.Join(dir, filepath.Base(mountpoint)))
		}
	}
	switch {
	case !ok:
		if _, err := os.Lstat(mountpoint); os.IsNotExist(err) {
			return &NotMountError{Mountpoint: mountpoint, Why: "does not exist"}
		}
		return &NotMountError{Mountpoint: mountpoint, Why: "not a mountpoint"}
	case e.FSType != "fuse.wsfs":
		return &NotMountError{Mountpoint: mountpoint, Why: "a " + e.FSType + " mount, not a wsfs one"}
	}
	return nil
}

// NotMountError is Unmount's error for a path that is not a wsfs mount
// (bad input, not a failure to unmount one): Why says what it is instead,
// "does not exist", "not a mountpoint" or "a tmpfs mount, not a wsfs one".
type NotMountError struct {
	Mountpoint string // the path as given to Unmount
	Why        string // what the path is instead of a wsfs mount
}

// Error returns `unmount "<mountpoint>": <why>`.
func (e *NotMountError) Error() string {
	return fmt.Sprintf("unmount %q: %s", e.Mountpoint, e.Why)
}

// Holders lists the processes whose cwd, root, executable or open files are
// on the mount at mountpoint: by path in this mount namespace, and by the
// mount's device (its FUSE connection) in any other, so processes in a jail
// (wsfs exec --confine), which see the mount at another path through a bind
// mount, are found too (What then ends in " (other mount namespace)").
// Magic links are stat'ed with AT_STATX_DONT_SYNC, which FUSE answers from
// its cache, so a hung file system elsewhere cannot block the scan.
func Holders(mountpoint string) []Holder {
	mountpoint = filepath.Clean(mountpoint)
	// The mount's device from the inode the kernel has (AT_STATX_DONT_SYNC,
	// no attributes asked): never a GETATTR to a server that may be this
	// process.
	var dev uint64
	var mst unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, mountpoint, unix.AT_STATX_DONT_SYNC, 0, &mst) == nil {
		dev = unix.Mkdev(mst.Dev_major, mst.Dev_minor)
	}
	ents, _ := os.ReadDir("/proc")
	var hs []Holder
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + e.Name()
		comm, _ := os.ReadFile(dir + "/comm")
		add := func(what, link string) bool {
			t, err := os.Readlink(link)
			if err != nil {
				return false
			}
			if !identity.Within(t, mountpoint) {
				var stx unix.Statx_t
				if dev == 0 || unix.Statx(unix.AT_FDCWD, link, unix.AT_STATX_DONT_SYNC, 0, &stx) != nil ||
					unix.Mkdev(stx.Dev_major, stx.Dev_minor) != dev {
					return false
				}
				what += " (other mount namespace)"
			}
			hs = append(hs, Holder{PID: pid, Comm: strings.TrimSpace(string(comm)), What: what})
			return true
		}
		if add("cwd", dir+"/cwd") || add("root", dir+"/root") || add("exe", dir+"/exe") {
			continue
		}
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			if add("fd "+fd.Name(), dir+"/fd/"+fd.Name()) {
				break
			}
		}
	}
	for i := range hs {
		hs[i].Waiting = waitingOf(hs[i].PID)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].PID < hs[j].PID })
	return hs
}

// fuseWaitFrames are the kernel functions (fs/fuse/dev.c) a task sleeps in
// while a FUSE request of its is unanswered or waits to be sent.
var fuseWaitFrames = []string{"request_wait_answer", "__fuse_simple_request", "fuse_simple_request", "fuse_get_req"}

// waitingOf is Holder.Waiting of process pid: each of its threads' wchan
// (the kernel function it sleeps in; readable by its user), then its kernel
// stack (root only), is looked up for a FUSE request wait; failing that, a
// thread in state D is reported as such. Nothing here blocks on a file
// system.
func waitingOf(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, _ := os.ReadDir(dir)
	inD := false
	for _, t := range tasks {
		td := dir + "/" + t.Name()
		wchan, _ := os.ReadFile(td + "/wchan")
		stack, _ := os.ReadFile(td + "/stack")
		for _, f := range fuseWaitFrames {
			if strings.TrimSpace(string(wchan)) == f || bytes.Contains(stack, []byte("] "+f+"+")) {
				return "waiting in a FUSE request"
			}
		}
		if procState(td+"/stat") == 'D' {
			inD = true
		}
	}
	if inD {
		return "in uninterruptible sleep (state D)"
	}
	return ""
}

// procState returns the state field of a /proc/.../stat file (the field
// after the parenthesized comm, which may itself hold ") "), 0 when it
// cannot be read.
func procState(stat string) byte {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// ServerProcs is the GOMAXPROCS a process that serves FUSE mounts runs with
// when the GOMAXPROCS environment variable does not say otherwise, from
// procs (the runtime's default, which counts the CPUs the process may use
// and its cgroup's CPU limit): procs itself when the mounts are served over
// FUSE over io_uring (ring), else a quarter of procs, at least 1.
//
// Why fewer than the CPUs on /dev/fuse: go-fuse keeps a few goroutines
// blocked in read(2) on /dev/fuse, each holding its P until sysmon takes
// the P back, and every request then moves Ps between threads and wakes a
// spinning thread that finds nothing to do (futex wake-ups and context
// switches per request). With one P per four CPUs the Go code of the
// handlers still has room (a few microseconds per request) and far fewer
// threads are woken: on 2 CPUs an open(2)+close(2) took 42 µs of wall time
// and 24-25 µs of server CPU with 1 P against 66-86 and 44-58 with 2 Ps
// (ROUNDTRIP_PROCS="default 2" hack/roundtrip.sh), `ls -lR` and `tar` of a
// 12k-file tree 1.5 and 2.4 s against 2.4 and 3.0 s (hack/bench.sh), and
// two to four parallel clients were served no slower.
//
// Why all of them over io_uring: each CPU has its queue thread, pinned to
// it, which serves the requests of callers on that CPU inline and needs a
// P to run them. A queue thread waiting in io_uring_enter(2) keeps its P
// until sysmon takes it, so with fewer Ps than CPUs a request arriving on
// another CPU waits for sysmon (20 µs at best, up to 10 ms when sysmon
// sleeps): a parallel tool (rg, make -j), or one the scheduler moves
// between CPUs, is served at sysmon's pace. With two clients on 2 CPUs
// (ROUNDTRIP_PROCS="1 2" ROUNDTRIP_CLIENTS="1 2" hack/roundtrip.sh, 20 µs
// of caller work between calls) a statfs(2) took 62-67 µs of wall time
// with 1 P and 26 with 2, an lgetxattr(2) 56-57 against 24-27, an
// open+close 92-94 against 55-58, an open+read+fstat+close 131-133 against
// 68-75, for the same server CPU; one client 20-63 µs either way. Whole
// workloads (a 12k-file tree, 1 P against 2, median of 5 interleaved runs
// on 2 loaded CPUs): `rg -uu` 1.46 against 0.74 s (server CPU 0.80
// against 0.66), `ls -lR` 1.48 against 1.21 s, create 5k 2.34 against
// 2.02 s. The price is paid where requests come from one CPU and the
// server gets much else to do: FORGETs and the watcher's events, read on
// /dev/fuse and inotify, are handled on the second P at once rather than
// in batches, which costs a delete of 5,000 files more server CPU (0.69 s
// against 0.56) while its wall time is no longer (0.61 against 0.66 s).
// A third P (one idle while both queue threads wait, which keeps sysmon
// from taking theirs every 20 µs) measured no better overall.
func ServerProcs(procs int, ring bool) int {
	if ring {
		return max(1, procs)
	}
	return max(1, procs/4)
}

// TuneProcs sets runtime.GOMAXPROCS to ServerProcs of the runtime's default
// for mounts made with transport mode (transport.Resolve'd: "" is the
// environment's choice, else auto), served over io_uring when mode is not
// Dev and the kernel's parameter is on (transport.KernelURing), unless the
// environment sets GOMAXPROCS, and returns the value in force. `wsfs
// mount` (one session) calls it once at start; `wsfs serve` and `wsfs
// csi`, which serve many sessions and their API from one process, keep the
// runtime's default (not measured with fewer Ps; GOMAXPROCS sets it).
func TuneProcs(mode transport.Mode) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	ring := false
	if m, err := transport.Resolve(mode); err == nil && m != transport.Dev {
		_, ring = transport.KernelURing()
	}
	n := ServerProcs(runtime.GOMAXPROCS(0), ring)
	runtime.GOMAXPROCS(n)
	return n
}
