package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
	"github.com/wsfs/wsfs/transport"
)

// HostViewConfig is what MountHostView needs (DESIGN.md, "Host view").
type HostViewConfig struct {
	// Mountpoint is an existing, empty directory, absolute, outside every
	// session mount.
	Mountpoint string
	// Policy decides every operation at the physical path; required. It is
	// normally the session's, replaced together with it (SetPolicy).
	Policy *policy.Policy
	// Hidden are absolute physical paths treated as a none root (EACCES),
	// on top of DefaultHidden: the daemon's state, socket and mount base
	// directories, other sessions' roots, temp areas and mountpoints. The
	// most specific entry decides: the session's own roots, temp areas and
	// Links keys stay visible inside a hidden place (their ancestors are
	// passages: looked up, listed with only the names on the way).
	Hidden []string
	// Shared, when set, is the daemon-wide index of the places sessions
	// hide from each other: every place it holds for an owner other than
	// Owner is hidden as a Hidden entry is, and changes to it reach this
	// view at once (PlaceIndex.Add, Remove). Owner names this view's
	// session in it.
	Shared *PlaceIndex
	Owner  string
	// Links maps a canonical physical path to the absolute link text shown
	// there instead of the object: the session root and the session
	// mountpoint map to the session mountpoint, so one object has one path.
	// The ancestors of a key stay reachable even inside a hidden place.
	Links map[string]string
	// Symlinks is how links are shown: SymlinksContain ("", the default)
	// as the session mount shows them; SymlinksFollow as stored (a jail's
	// view of the host, where a path means what it means on the host).
	Symlinks SymlinkMode
	// AllowOther mounts with allow_other.
	AllowOther bool
	// Users are as in Config: a session's host view serves the session's
	// users.
	Users []uint32
	// Logger receives denials and errors; nil means slog.Default().
	Logger *slog.Logger
	// Session labels log lines and metrics; may be empty.
	Session string
	// NoWatch, Debug, the timeouts and Transport are as in Config.
	NoWatch                                    bool
	Debug                                      bool
	EntryTimeout, AttrTimeout, NegativeTimeout time.Duration
	// Keep and Adopt are Config's.
	Keep      transport.Store
	Adopt     *transport.Conn
	Transport transport.Mode
}

// DefaultHidden are the places every host view hides (treats as a none
// root): kernel interfaces and runtime state. /tmp is hidden except the
// session's temp areas (policy.Spec.Temp) and explicit roots below it.
var DefaultHidden = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/var/run"}

// refusedFSTypes are mount types a host view never descends into (checked
// per component): kernel interfaces whose files are magic links or hang, and
// any FUSE mount (one of them may be served by this very process).
var refusedFSTypes = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "cgroup": true, "cgroup2": true,
	"debugfs": true, "tracefs": true, "securityfs": true, "bpf": true, "configfs": true,
	"efivarfs": true, "fusectl": true, "mqueue": true, "nsfs": true, "pidfs": true, "autofs": true,
	"binfmt_misc": true, "pstore": true, "hugetlbfs": true, "rpc_pipefs": true, "selinuxfs": true,
	"fuse": true, "fuseblk": true,
}

func refusedFSType(t string) bool {
	return refusedFSTypes[t] || strings.HasPrefix(t, "fuse.")
}

// hostView is the host view's part of a mount.
type hostView struct {
	hidden  atomic.Pointer[[]string] // always hidden (HostViewConfig.Hidden, SetHidden) and the mountpoint
	mp      string                   // the host view's own mountpoint, always hidden
	shared  *PlaceIndex              // HostViewConfig.Shared; nil: none
	owner   string                   // HostViewConfig.Owner
	root    atomic.Pointer[node]     // the node tree's root, once serving (for shared's invalidations)
	seen    sync.Map                 // first names of the paths decided, for shared (PlaceIndex.note)
	defHide []string                 // hidden unless visible (DefaultHidden)
	links   map[string]string
	linkIno map[string]uint64
	created time.Time
	uid     uint32
	gid     uint32

	// visible caches, per policy, the places inside hidden ones that stay
	// visible: the temp areas and explicit roots that are not none, and
	// the link keys.
	vis atomic.Pointer[visibleSet]
}

type visibleSet struct {
	pol   *policy.Policy
	paths []string
}

var (
	denyHidden      = policy.Decision{Errno: syscall.EACCES, Rule: "hostview:hidden"}
	denyMountType   = policy.Decision{Errno: syscall.EACCES, Rule: "hostview:mount-type"}
	denySessionLink = policy.Decision{Errno: syscall.EACCES, Rule: "hostview:session-link"}
	denyMountSource = policy.Decision{Errno: syscall.EACCES, Rule: "hostview:mount-source"}
)

// denial carries a policy decision out of a helper that returns an error.
type denial struct{ d policy.Decision }

func (e *denial) Error() string { return e.d.Rule }

func (h *hostView) visible(pol *policy.Policy) []string {
	if v := h.vis.Load(); v != nil && v.pol == pol {
		return v.paths
	}
	spec := pol.Spec()
	paths := append([]string{spec.Primary}, spec.Temp...)
	for _, r := range spec.Additional {
		if r.Access != policy.AccessNone {
			paths = append(paths, r.Path)
		}
	}
	for k := range h.links {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	h.vis.Store(&visibleSet{pol: pol, paths: paths})
	return paths
}

// hiddenAt reports whether p is hidden, and if so whether it is a passage:
// a strict ancestor of a visible place, reachable for lookups only. The most
// specific entry decides: a visible place (the session's roots, temp areas,
// links) inside a hidden one is visible, a hidden place inside a visible
// one (another session's root inside an additional root) is hidden.
func (h *hostView) hiddenAt(pol *policy.Policy, p string) (hidden, passage bool) {
	if h.shared != nil {
		h.shared.note(h, p)
	}
	return h.hiddenIn(pol, p)
}

// hiddenIn is hiddenAt without noting p for the shared index's
// invalidations (a session mount deciding a mount's source).
func (h *hostView) hiddenIn(pol *policy.Policy, p string) (hidden, passage bool) {
	vis := h.visible(pol)
	hid := -1
	if h.shared != nil {
		hid = h.shared.innermostLen(p, h.owner)
	}
	for _, list := range [2][]string{*h.hidden.Load(), h.defHide} {
		for _, x := range list {
			if len(x) > hid && identity.Within(p, x) {
				hid = len(x)
			}
		}
	}
	if hid < 0 {
		return false, false
	}
	for _, v := range vis {
		if len(v) >= hid && identity.Within(p, v) {
			return false, false
		}
	}
	for _, v := range vis {
		if v != p && identity.Within(v, p) {
			return true, true
		}
	}
	return true, false
}

// gate applies the host view's own rules to op at the physical path p: a
// session link cannot be changed, a hidden place is a none root. ok means
// the policy decides.
func (h *hostView) gate(pol *policy.Policy, op policy.Op, p string) (policy.Decision, bool) {
	if _, ok := h.links[p]; ok && op != policy.OpRead {
		return denySessionLink, false
	}
	if hidden, passage := h.hiddenAt(pol, p); hidden && (!passage || op != policy.OpRead) {
		return denyHidden, false
	}
	if op == policy.OpRename && h.holdsHidden(pol, p) {
		// Either end of a rename (RENAME_EXCHANGE included) that holds a
		// hidden place would move it to a path not hidden, or put another
		// tree where it is: the places are hidden by path only.
		return denyHidden, false
	}
	if op == policy.OpRead && h.refusedPassage(pol, p) {
		// On the way to a visible place through an area the policy
		// refuses (a none root around a root, or none outside every root):
		// lookups pass, listings show only the way (listFilter).
		return allowPassage, false
	}
	return policy.Decision{}, true
}

var allowPassage = policy.Decision{Allow: true, Rule: "hostview:passage"}

// refusedPassage reports whether p is a strict ancestor of a visible place
// that the policy refuses to read (a none area on the way to a root).
func (h *hostView) refusedPassage(pol *policy.Policy, p string) bool {
	for _, v := range h.visible(pol) {
		if v != p && identity.Within(v, p) {
			return !pol.Decide(policy.OpRead, p).Allow
		}
	}
	return false
}

// onlyTheWay reports whether the host view shows dir only as the way to a
// visible place: hidden (a lookup on the way passes, Decide refuses the
// rest), or refused by the policy on the way to a visible place.
func (h *hostView) onlyTheWay(pol *policy.Policy, dir string) bool {
	hidden, _ := h.hiddenAt(pol, dir)
	return hidden || h.refusedPassage(pol, dir)
}

// listFilter returns the filter of a listing of dir: a hidden name is never
// listed (LOOKUP refuses it; it must not show as d?????????), and a
// directory that is a passage (hidden, or refused by the policy, on the way
// to a visible place) lists only the names on the way. nil when every name
// is listed.
func (h *hostView) listFilter(pol *policy.Policy, dir string) func(string) bool {
	if h.onlyTheWay(pol, dir) {
		vis := h.visible(pol)
		return func(name string) bool {
			p := join(dir, name)
			for _, v := range vis {
				if identity.Within(v, p) {
					return true
				}
			}
			return false
		}
	}
	if !h.hidesBelow(dir) {
		return nil
	}
	return func(name string) bool {
		hidden, passage := h.hiddenAt(pol, join(dir, name))
		return !hidden || passage
	}
}

// holdsHidden reports whether a hidden place (HostViewConfig.Hidden,
// DefaultHidden, the view's mountpoint) or a none root of pol lies strictly
// inside the physical path p.
func (h *hostView) holdsHidden(pol *policy.Policy, p string) bool {
	if h.hidesBelow(p) {
		return true
	}
	for _, r := range pol.Spec().Additional {
		if r.Access == policy.AccessNone && r.Path != p && identity.Within(r.Path, p) {
			return true
		}
	}
	return false
}

// hidesBelow reports whether a hidden place lies strictly inside dir.
func (h *hostView) hidesBelow(dir string) bool {
	if h.shared != nil && h.shared.hasUnder(dir, h.owner) {
		return true
	}
	for _, list := range [2][]string{*h.hidden.Load(), h.defHide} {
		for _, x := range list {
			if x != dir && identity.Within(x, dir) {
				return true
			}
		}
	}
	return false
}

// openChild opens name in the directory dirfd (physical path p) as O_PATH
// without following it and fstats it, refusing to enter a mount of a
// refused type: the crossing is detected with RESOLVE_NO_XDEV, the type read
// from mountinfo.
func (h *hostView) openChild(pol *policy.Policy, cs *crossings, dirfd int, name, p string) (int, syscall.Stat_t, error) {
	fd, err := retryFd(func() (int, error) {
		return unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	})
	if err == unix.EXDEV {
		table, terr := MountTable()
		if terr != nil {
			return -1, syscall.Stat_t{}, &denial{denyMountType}
		}
		if d, ok := mountGate(pol, table, p); !ok {
			return -1, syscall.Stat_t{}, &denial{d}
		}
		// What lies below is decided at its source too (crossings): a
		// bind of a directory above a hidden place hides it there.
		return cs.crossInto(dirfd, name, p)
	}
	if err == nil {
		cs.notMount(p)
	}
	return statOpened(fd, err)
}

// RefusedMount reports whether the canonical physical path p lies in a
// mount of a type a host view never descends into (mountGate's type rule:
// proc, sysfs, devtmpfs, cgroup, debugfs, tracefs, securityfs, bpf, ...,
// any FUSE mount), looking at the mounts at p and each of its ancestors
// (the mount table of this process, /proc/self/mountinfo); mp and fstype
// name the innermost such mount. A session root, mountpoint or directly
// writable directory there is refused (a lookup in /proc/PID/fd of the
// server itself opens another descriptor per entry). Each ancestor is asked
// with MountRootType (a statx, and a statmount at a mount root), so the
// cost does not grow with the number of mounts; the mount table is read
// when the kernel cannot say, and to name a refused mount's type in full
// ("fuse.wsfs"). Errors: the mount table could not be read.
func RefusedMount(p string) (mp, fstype string, refused bool, err error) {
	for q := filepath.Clean(p); ; q = filepath.Dir(q) {
		root, t, known := MountRootType(q)
		if !known {
			return refusedMountByTable(p)
		}
		if root && refusedFSType(t) {
			if table, err := MountTable(); err == nil && table[q].FSType != "" {
				t = table[q].FSType
			}
			return q, t, true, nil
		}
		if q == "/" || q == "." {
			return "", "", false, nil
		}
	}
}

// refusedMountByTable is RefusedMount from the mount table alone.
func refusedMountByTable(p string) (mp, fstype string, refused bool, err error) {
	table, err := MountTable()
	if err != nil {
		return "", "", false, err
	}
	for q := filepath.Clean(p); ; q = filepath.Dir(q) {
		if e, ok := table[q]; ok && refusedFSType(e.FSType) {
			return q, e.FSType, true, nil
		}
		if q == "/" || q == "." {
			return "", "", false, nil
		}
	}
}

// mountGate is the host view's rule for entering the mount at mp (a key of
// table, else refused): a refused file-system type (refusedFSTypes) is
// EACCES "hostview:mount-type", a mount whose source lies in a none root
// EACCES "hostview:mount-source". ok means the host view descends into it.
func mountGate(pol *policy.Policy, table map[string]MountEntry, mp string) (policy.Decision, bool) {
	e, ok := table[mp]
	if !ok || refusedFSType(e.FSType) {
		return denyMountType, false
	}
	for _, src := range mountSources(table, mp, e) {
		if d := pol.Decide(policy.OpRead, src); !d.Allow && d.Errno == syscall.EACCES {
			return denyMountSource, false
		}
	}
	return policy.Decision{}, true
}

// mountsGate applies mountGate to every mount the host view crosses on its
// way from "/" to the physical path p. A path at or under a session link
// is not served by the host view (the link stands there): nothing to cross.
func (h *hostView) mountsGate(pol *policy.Policy, p string) (policy.Decision, bool) {
	for k := range h.links {
		if identity.Within(p, k) {
			return policy.Decision{}, true
		}
	}
	table, err := MountTable()
	if err != nil {
		return denyMountType, false
	}
	for q := p; q != "/"; q = filepath.Dir(q) {
		if _, ok := table[q]; ok {
			if d, ok := mountGate(pol, table, q); !ok {
				return d, false
			}
		}
	}
	return policy.Decision{}, true
}

// mountSources returns where else the file system shown by the mount e at
// mp is visible: for every other mount of the same device whose root holds
// e's root, the path there (a bind mount's source). A mount whose source
// lies in a none root is hidden as the root is.
func mountSources(table map[string]MountEntry, mp string, e MountEntry) []string {
	var out []string
	for other, o := range table {
		if other == mp || o.Dev != e.Dev {
			continue
		}
		if src, ok := identity.MountSource(e.Root, o.Root, other); ok {
			out = append(out, src)
		}
	}
	return out
}

// servedMounts maps each session mountpoint among the links (a key whose
// text is itself) to the physical root shown there (the key whose text is
// that mountpoint), for linkRules.served.
func (h *hostView) servedMounts() map[string]string {
	served := map[string]string{}
	for k, v := range h.links {
		if k == v {
			for r, w := range h.links {
				if w == v && r != k {
					served[k] = r
				}
			}
		}
	}
	return served
}

// setHidden replaces the places hidden on top of DefaultHidden (and the
// host view's own mountpoint, always hidden).
func (h *hostView) setHidden(paths []string) error {
	hidden := []string{h.mp}
	for _, x := range paths {
		if !filepath.IsAbs(x) {
			return fmt.Errorf("host view hidden path %q: must be absolute", x)
		}
		hidden = append(hidden, filepath.Clean(x))
	}
	h.hidden.Store(&hidden)
	return nil
}

// SetHidden replaces the host view's HostViewConfig.Hidden: the daemon
// hides sessions created after this one. The next lookup sees the new list;
// the kernel's cached entries for newly hidden places are dropped. A
// relative path is refused and nothing changes. On a session mount (not a
// host view) it is an error.
func (s *Server) SetHidden(paths []string) error {
	if s.m.host == nil {
		return errors.New("SetHidden: not a host view")
	}
	old := map[string]bool{}
	for _, p := range *s.m.host.hidden.Load() {
		old[p] = true
	}
	if err := s.m.host.setHidden(paths); err != nil {
		return err
	}
	// The kernel may hold entries for places hidden now (looked up while
	// they were visible): drop them, so the next access looks them up again
	// and is refused.
	for _, p := range *s.m.host.hidden.Load() {
		if !old[p] {
			s.forgetEntry(p, false)
		}
	}
	return nil
}

// forgetMountsFrom drops the kernel's entries for the mounts whose source
// lies in one of places (a bind mount of a root whose access changed is
// decided by its source, mountGate, when its lookup crosses it: the node is
// dropped from the tree too, so the lookup cannot reuse it, node.revalidate).
func (s *Server) forgetMountsFrom(places []string) {
	table, err := MountTable()
	if err != nil {
		return
	}
	for mp, e := range table {
		for _, src := range mountSources(table, mp, e) {
			if slices.ContainsFunc(places, func(p string) bool { return identity.Within(src, p) }) {
				s.forgetEntry(mp, true)
				break
			}
		}
	}
}

// forgetEntry asks the kernel to drop its dentry for the physical path p
// when the node tree knows it (FUSE_NOTIFY_INVAL_ENTRY), and with drop the
// node tree's own entry too; nothing for a path outside the mount's root, or
// the root itself.
func (s *Server) forgetEntry(p string, drop bool) {
	forgetEntry(s.rootNode, s.m.root, p, drop)
}

// forgetEntry is Server.forgetEntry for the node tree at rootNode, whose
// physical root is root.
func forgetEntry(rootNode *node, root, p string, drop bool) {
	if p == root || !identity.Within(p, root) {
		return
	}
	dir := &rootNode.Inode
	names := strings.Split(strings.TrimPrefix(identity.Rebase(p, root, "/"), "/"), "/")
	for i, name := range names {
		if i == len(names)-1 {
			if drop {
				dir.RmChild(name)
			}
			dir.NotifyEntry(name)
			// A listing the kernel keeps (FOPEN_CACHE_DIR) must not
			// show a name hidden now.
			dir.NotifyContent(0, 0)
			return
		}
		if dir = dir.GetChild(name); dir == nil {
			return
		}
	}
}

// checkHostRead decides a read of n in a host view (0 on a session mount,
// where reads are never refused: no root lies inside the primary one). The
// kernel sends OPEN, OPENDIR and READLINK for dentries it cached under an
// earlier policy; deciding there keeps a narrowing to none in force at once
// for them (README: "the next operation of every process sees it").
func (n *node) checkHostRead(ctx context.Context, op string) syscall.Errno {
	if n.m.host == nil {
		if n.m.cross.active() {
			return n.m.checkCrossRead(ctx, op, n.where())
		}
		return 0
	}
	if n.linkText != "" {
		return 0
	}
	p := n.where()
	if d := n.m.decide(policy.OpRead, p, policy.Object{}); !d.Allow {
		return n.m.deny(ctx, op, p, d)
	}
	return 0
}

// linkAttr fills the attributes of a session link.
func (h *hostView) linkAttr(n *node, a *fuse.Attr) {
	*a = fuse.Attr{
		Ino:   n.StableAttr().Ino,
		Size:  uint64(len(n.linkText)),
		Mode:  syscall.S_IFLNK | 0o777,
		Nlink: 1,
		Owner: fuse.Owner{Uid: h.uid, Gid: h.gid},
	}
	a.SetTimes(&h.created, &h.created, &h.created)
}

// addLinkNode returns the node of the session link at p.
func (n *node) addLinkNode(ctx context.Context, p, text string, out *fuse.EntryOut) *fs.Inode {
	ch, _ := n.m.newNode(-1, p, syscall.S_IFLNK)
	ch.linkText = text
	sa := fs.StableAttr{Mode: syscall.S_IFLNK, Ino: n.m.host.linkIno[p]}
	in := n.NewInode(ctx, ch, sa)
	n.m.host.linkAttr(ch, &out.Attr)
	out.Attr.Ino = n.m.host.linkIno[p]
	return in
}

// MountHostView mounts the host view (DESIGN.md, "Host view"): the host's
// "/" as this process sees it, walked physically and fd-relative with the
// same node tree as a session mount, every operation decided by cfg.Policy
// at the physical path. Hidden places (DefaultHidden, cfg.Hidden) answer
// EACCES as a none root does; mounts of pseudo file systems and every FUSE
// mount are never entered (EACCES); cfg.Links are shown as symlinks. Links
// in the view are presented by the session rules with root "/", so their
// texts stay inside the view. Inode numbers on the device of "/" are the
// backing ones, others are allocated one-to-one.
//
// Errors are one line naming the input: a nil policy, a mountpoint that is
// relative, missing, not a directory or not empty, a relative Hidden or
// Links entry. On error nothing is left mounted.
func MountHostView(cfg HostViewConfig) (*Server, error) {
	if cfg.Policy == nil {
		return nil, errors.New("host view policy: required")
	}
	if cfg.Mountpoint == "" {
		return nil, errors.New("host view mountpoint: required")
	}
	if err := CheckUsers(cfg.Users); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.Mountpoint) {
		return nil, fmt.Errorf("host view mountpoint %q: must be absolute", cfg.Mountpoint)
	}
	var mpCanon string
	var err error
	if cfg.Adopt != nil {
		// Not looked at: it is the adopted connection's, not served yet.
		mpCanon = filepath.Clean(cfg.Mountpoint)
		if cfg.Adopt.Meta.Mountpoint != mpCanon || cfg.Adopt.Meta.Kind != "hostview" {
			return nil, fmt.Errorf("host view mountpoint %q: the connection taken over is %s %q", cfg.Mountpoint, cfg.Adopt.Meta.Kind, cfg.Adopt.Meta.Mountpoint)
		}
	} else if mpCanon, err = checkEmptyDir(cfg.Mountpoint); err != nil {
		return nil, err
	}
	h := &hostView{
		links:   map[string]string{},
		linkIno: map[string]uint64{},
		created: time.Now(),
		uid:     uint32(os.Getuid()),
		gid:     uint32(os.Getgid()),
		shared:  cfg.Shared,
		owner:   cfg.Owner,
	}
	h.mp = mpCanon
	if err := h.setHidden(cfg.Hidden); err != nil {
		return nil, err
	}
	h.defHide = append(h.defHide, DefaultHidden...)
	i := uint64(0)
	for k, v := range cfg.Links {
		if !filepath.IsAbs(k) || !filepath.IsAbs(v) {
			return nil, fmt.Errorf("host view link %q -> %q: both must be absolute", k, v)
		}
		i++
		h.links[filepath.Clean(k)] = v
		h.linkIno[filepath.Clean(k)] = 1<<62 | i
	}
	rootFd, err := hostRootFd()
	if err != nil {
		return nil, fmt.Errorf("host view root: %w", err)
	}
	var st syscall.Stat_t
	if err := fstat(rootFd, &st); err != nil {
		return nil, fmt.Errorf("host view root: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	mp := filepath.Clean(cfg.Mountpoint)
	symlinks := SymlinksContain
	if cfg.Symlinks == SymlinksFollow {
		symlinks = SymlinksFollow
	}
	m := &mount{
		linkRules: linkRules{root: "/", mountpoint: mp, mountCanon: mpCanon, hostView: mp, symlinks: symlinks,
			served: h.servedMounts()},
		dev:     st.Dev,
		log:     logger,
		session: cfg.Session,
		host:    h,
	}
	// A lookup that crosses into a mount decides what is below it at its
	// source as well (crossings, as a session mount does): a directory
	// reached by two paths is hidden whichever name is looked up first.
	m.cross = &crossings{root: "/", byID: map[uint64]*crossed{}, hide: h}
	if cfg.Adopt != nil {
		m.cross.learnTable(func(string) bool { return true })
	}
	m.pol.Store(cfg.Policy)
	srv, err := m.serve(rootFd, &st, serveOpts{
		mountpoint: cfg.Mountpoint, fsName: HostViewSource, allowOther: cfg.AllowOther, users: cfg.Users, debug: cfg.Debug,
		noWatch: cfg.NoWatch, entry: cfg.EntryTimeout, attr: cfg.AttrTimeout, neg: cfg.NegativeTimeout,
		kind: "hostview", keep: cfg.Keep, adopt: cfg.Adopt, transport: cfg.Transport,
		sharedRoot: true,
	})
	if err != nil && h.shared != nil {
		h.shared.unregister(h)
	}
	return srv, err
}

// checkEmptyDir returns the canonical path of an existing, empty directory.
func checkEmptyDir(dir string) (string, error) {
	c, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("host view mountpoint %q: %s", dir, describe(err))
	}
	f, err := os.Open(c)
	if err != nil {
		return "", fmt.Errorf("host view mountpoint %q: %s", dir, describe(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("host view mountpoint %q: not a directory", dir)
	}
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return "", fmt.Errorf("host view mountpoint %q: not empty", dir)
	}
	return c, nil
}

// hostRoot is the O_PATH descriptor of "/" that every host view's root node
// shares (hostRootFd): one descriptor for the process instead of one per
// view (issue 22's descriptor arithmetic). It is never closed.
var hostRoot struct {
	once sync.Once
	fd   int
	err  error
}

// hostRootFd returns hostRoot's descriptor, opening it the first time.
func hostRootFd() (int, error) {
	hostRoot.once.Do(func() { hostRoot.fd, hostRoot.err = identity.OpenCanonical("/") })
	return hostRoot.fd, hostRoot.err
}
