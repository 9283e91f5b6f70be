// Package confine runs a command in a jail built the way bubblewrap builds
// one (it runs the bwrap binary): a new mount namespace in which the host's
// "/" is read-only, each authorized root's physical path shows a FUSE view of
// it (so absolute paths into a root go through the mount's policy and the
// backing store is never reached directly), only a few directories are
// writable directly, hidden places are covered by empty read-only tmpfs
// mounts, every mount is private (no host mount event reaches the jail), no
// FUSE mount the jail does not use is in its namespace at all (as root:
// bwrap starts from a namespace of its own without them, detach.go; a copy
// would keep another session's server alive after its unmount), and the command gets its own PID namespace and
// /proc, no capabilities (the bounding set emptied) and no_new_privs. Inside, before the command starts, a helper
// stage (Init, in the same binary) applies Landlock as a second layer (one
// ruleset) and a seccomp filter that refuses io_uring and socket(AF_UNIX).
//
// The package takes plain values (paths), never a session: a Go host fills
// a Spec from whatever it knows and calls Command or Exec. A host binary
// that uses the package must call Init first thing in main (it returns at
// once unless the process is the helper stage).
//
// What is guaranteed, and what not (DESIGN.md, "Sessions and the daemon"):
//
//   - Writes outside the views, Spec.Writable and /dev/{null,zero,full,tty}
//     fail: EROFS from the read-only bind of "/" (metadata changes too:
//     chmod, chown, setxattr, utimes), EACCES from Landlock where it sees
//     them first. Writes inside a view are the FUSE server's decisions.
//   - Hidden paths are empty read-only directories in the jail.
//   - /proc lists only the jail's processes; the jail cannot signal or
//     ptrace anything outside it.
//   - No capabilities: mount, chown to another user, mknod, raw I/O fail.
//   - Not covered: the network (TCP/UDP stays usable), descriptors the
//     caller passes other than stdin, stdout and stderr (closed by Exec;
//     stdio refused when it is a directory outside FUSE or a file in a
//     backing root),
//     what the read-only host "/" lets anyone read (secrets outside every
//     root must be hidden explicitly or be unreadable to the caller).
package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/identity"
	"golang.org/x/sys/unix"
)

// View is one FUSE view shown in the jail: at Path (an authorized root's
// physical path) the directory Source is bound (a FUSE mount, or a directory
// inside one: the session mount, or the host view's directory of an
// additional root). Writes through it are the FUSE server's decisions.
type View struct {
	Path   string `json:"path"`
	Source string `json:"source"`
}

// Spec describes one jail. Every path is absolute and clean; Check says
// which rule a bad one breaks.
type Spec struct {
	// Args is the command and its arguments; Args[0] is looked up in the
	// jail's PATH (Env) when it has no slash. Required.
	Args []string
	// Env is the command's environment (nil: none).
	Env []string
	// Cwd is where the command starts; it must lie in a view (on FUSE),
	// which the helper checks inside the jail. Required.
	Cwd string
	// Views are the FUSE views; at least one (the session's root).
	Views []View
	// Writable directories are bound read-write directly (not through
	// FUSE): the session's private temp directory and each --allow-write
	// directory. They may not lie in a view nor contain one, nor lie in a
	// hidden path other than by being bound over it.
	Writable []string
	// ReadOnly paths inside a Writable directory are bound read-only over
	// themselves (the protected subpaths of a root made writable directly,
	// when no host view can show it through FUSE); missing ones are skipped.
	ReadOnly []string
	// Hidden paths are covered by an empty read-only tmpfs: none roots, the
	// daemon's state and socket directories, the mount base, other
	// sessions. A hidden path inside a view is refused (a tmpfs on a FUSE
	// dentry is detached by the next entry invalidation; the view's policy
	// hides it instead); a missing one is skipped.
	Hidden []string
	// Backing are the backing roots served by the views: Exec refuses an
	// inherited stdin, stdout or stderr that is a file inside one (not
	// through FUSE). Any directory descriptor not on FUSE is refused too.
	Backing []string
	// Bwrap is the bubblewrap binary; "" looks up "bwrap" in $PATH.
	Bwrap string
	// Helper is the binary run inside the jail as the helper stage (it must
	// call Init); "" is this executable (/proc/self/exe). It is opened on
	// the host and executed in the jail through that descriptor
	// (/proc/self/fd/N), so its path need not be visible there: a binary
	// in a hidden directory (beside the daemon's socket), in /tmp, or
	// built by `go run` and since removed all work.
	Helper string
	// BestEffort runs with what the kernel has when Landlock or the seccomp
	// filter cannot be applied (a warning on stderr) instead of failing.
	BestEffort bool
	// User, when set, is the identity the command runs as (real, effective
	// and saved uid and gid, no supplementary groups), taken by the helper
	// stage after the bounding set is emptied and before Landlock (setresuid(2),
	// setresgid(2), setgroups(2)). Only as root; the mounts must serve the
	// uid (a session's users).
	User *User
}

// User is a uid and gid a jail runs as.
type User struct {
	Uid uint32 `json:"uid"`
	Gid uint32 `json:"gid"`
}

// FuseSuperMagic is statfs(2)'s f_type of a FUSE mount (linux/magic.h).
const FuseSuperMagic = 0x65735546

// Check validates s: absolute clean paths, a command, a cwd inside a view,
// views that are directories on FUSE, writable directories apart from the
// views, hidden paths not inside a view.
func (s Spec) Check() error {
	if len(s.Args) == 0 || s.Args[0] == "" {
		return errors.New("confine: no command")
	}
	if len(s.Views) == 0 {
		return errors.New("confine: no view (the session's root is required)")
	}
	abs := func(what, p string) error {
		if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("confine: %s %q: must be an absolute, clean path", what, p)
		}
		return nil
	}
	for _, v := range s.Views {
		if err := abs("view path", v.Path); err != nil {
			return err
		}
		if err := abs("view source", v.Source); err != nil {
			return err
		}
		if v.Path == "/" {
			return fmt.Errorf("confine: view path %q: the file system root cannot be a view", v.Path)
		}
	}
	if _, err := s.pinViews(); err != nil {
		return err
	}
	if err := abs("cwd", s.Cwd); err != nil {
		return err
	}
	if s.viewOf(s.Cwd) < 0 {
		return fmt.Errorf("confine: cwd %s: not inside a view (the jail starts on FUSE)", s.Cwd)
	}
	for _, w := range s.Writable {
		if err := abs("writable directory", w); err != nil {
			return err
		}
		if w == "/" {
			return errors.New(`confine: writable directory "/": the whole file system cannot be writable`)
		}
		for _, v := range s.Views {
			if identity.Within(w, v.Path) || identity.Within(v.Path, w) {
				return fmt.Errorf("confine: writable directory %s overlaps the view at %s (writes there are the mount's to decide)", w, v.Path)
			}
		}
		if fi, err := os.Stat(w); err != nil || !fi.IsDir() {
			return fmt.Errorf("confine: writable directory %s: not an existing directory", w)
		}
	}
	for _, h := range s.Hidden {
		if err := abs("hidden path", h); err != nil {
			return err
		}
		if h == "/" {
			return errors.New(`confine: hidden path "/": cannot hide everything`)
		}
		if i := s.viewOf(h); i >= 0 {
			return fmt.Errorf("confine: hidden path %s lies in the view at %s (the mount's policy hides it there)", h, s.Views[i].Path)
		}
	}
	for _, r := range s.ReadOnly {
		if err := abs("read-only path", r); err != nil {
			return err
		}
	}
	for _, b := range s.Backing {
		if err := abs("backing root", b); err != nil {
			return err
		}
	}
	_, err := s.pinBinds()
	return err
}

// pinnedView is a view's path with the identity (st_dev, st_ino) of its
// source: the helper finds that very object at the path inside the jail,
// or refuses to start.
type pinnedView struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// pinViews opens every view source without following any symlink
// (identity.OpenCanonical: a source is a physical path; a link in it now
// means a swap, which could lead bwrap to another session's mount or a
// none root) and returns its identity; a source not on FUSE is refused.
func (s Spec) pinViews() ([]pinnedView, error) {
	out := make([]pinnedView, 0, len(s.Views))
	for _, v := range s.Views {
		st, sfs, err := statCanonical(v.Source)
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("confine: view source %s: a symlink in its path (the jail follows none)", v.Source)
		}
		if err != nil {
			return nil, fmt.Errorf("confine: view source %s: %w", v.Source, err)
		}
		if sfs.Type != FuseSuperMagic {
			return nil, fmt.Errorf("confine: view source %s: not on FUSE (the jail shows roots only through their mount)", v.Source)
		}
		out = append(out, pinnedView{Path: v.Path, Dev: st.Dev, Ino: st.Ino})
	}
	return out, nil
}

// pinBinds pins, as pinViews does views, every directory bwrap binds at its
// own path (Spec.Writable, and the Spec.ReadOnly ones that exist): bwrap
// follows symlinks in both the source and the destination of a bind, so a
// writable directory whose path a jail could reach and change (a parent
// that is itself writable, another session's allow-write directory) would
// otherwise let the next jail bind any host directory read-write.
func (s Spec) pinBinds() ([]pinnedView, error) {
	var out []pinnedView
	pin := func(what, p string) error {
		st, _, err := statCanonical(p)
		if errors.Is(err, unix.ELOOP) {
			return fmt.Errorf("confine: %s directory %s: a symlink in its path (the jail follows none)", what, p)
		}
		if err != nil {
			return fmt.Errorf("confine: %s directory %s: %w", what, p, err)
		}
		out = append(out, pinnedView{Path: p, Dev: st.Dev, Ino: st.Ino})
		return nil
	}
	for _, w := range s.Writable {
		if err := pin("writable", w); err != nil {
			return nil, err
		}
	}
	for _, r := range s.ReadOnly {
		if _, err := os.Lstat(r); err != nil {
			continue // not bound (BwrapArgs skips it too)
		}
		if err := pin("read-only", r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// statCanonical stats and statfs's the object at the canonical path p,
// refusing a symlink in any component (ELOOP).
func statCanonical(p string) (unix.Stat_t, unix.Statfs_t, error) {
	var st unix.Stat_t
	var sfs unix.Statfs_t
	fd, err := identity.OpenCanonical(p)
	if err != nil {
		return st, sfs, err
	}
	defer unix.Close(fd)
	if err := unix.Fstatat(fd, "", &st, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, sfs, err
	}
	err = unix.Fstatfs(fd, &sfs)
	return st, sfs, err
}

// coveredHidden reports whether the hidden path h lies inside another
// hidden path with no writable directory between them that shows what is
// under the outer one again: the outer tmpfs already hides h, and a tmpfs
// of its own would only make h's name appear in the empty outer directory
// (bwrap creates the mountpoint), naming another session in the mount
// base, say.
func (s Spec) coveredHidden(h string) bool {
	for _, outer := range s.Hidden {
		if outer == h || !identity.Within(h, outer) {
			continue
		}
		shown := false
		for _, w := range s.Writable {
			if identity.Within(w, outer) && identity.Within(h, w) {
				shown = true
			}
		}
		if !shown {
			return true
		}
	}
	return false
}

// mountTable returns this process's mount table (/proc/self/mountinfo),
// which the jail's --ro-bind of "/" copies; nil when it cannot be read.
func mountTable() []identity.Mount {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return identity.ParseMountinfo(string(data))
}

// withAliases is Aliases for s: an alias in a view is left out (the
// view's policy decides there, at the source), and one in a place the jail
// mounts afresh (identity.JailOwn).
func (s Spec) withAliases(hidden []string, table []identity.Mount) []string {
	return identity.Aliases(hidden, table, func(p string) bool { return s.viewOf(p) >= 0 || identity.JailOwn(p) })
}

// viewOf returns the index of the innermost view containing p, or -1.
func (s Spec) viewOf(p string) int {
	best := -1
	for i, v := range s.Views {
		if identity.Within(p, v.Path) && (best < 0 || len(v.Path) > len(s.Views[best].Path)) {
			best = i
		}
	}
	return best
}

// BwrapPath returns the bubblewrap binary s uses, or an error saying how to
// install it.
func (s Spec) BwrapPath() (string, error) {
	if s.Bwrap != "" {
		return s.Bwrap, nil
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("confine: bwrap (bubblewrap) not found in $PATH: install it (Debian: apt-get install bubblewrap)")
	}
	return p, nil
}

// BwrapArgs returns bwrap's arguments for s (without the binary), up to and
// including "--" and the helper stage's command line. helper is what bwrap
// executes in the jail as the helper stage: a path that must be visible
// there, or /proc/self/fd/N for a descriptor bwrap inherits (as Command and
// Exec pass it).
func (s Spec) BwrapArgs(helper string) ([]string, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--proc", "/proc",
		// No --new-session: an interactive shell keeps its terminal (job
		// control); TIOCSTI and TIOCLINUX, what --new-session guards
		// against, are refused by the seccomp filter instead.
		"--die-with-parent",
		"--cap-drop", "ALL",
	}
	// As root, bwrap keeps two capabilities for the helper stage, which
	// makes the jail's mounts private after the set-up and then drops
	// every capability, the bounding set included.
	private := os.Geteuid() == 0
	if private {
		a = append(a, "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP")
	}
	if s.User != nil {
		if !private {
			return nil, errors.New("confine: user: a jail runs as another user only when started by root")
		}
		// For the helper stage's setresuid(2) and setresgid(2).
		a = append(a, "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
	}
	// Hidden places first, so that a writable directory or a view inside
	// one (the session's temp directory under the state directory) is
	// bound on top; each tmpfs is made read-only last.
	var hidden []string
	s.Hidden = s.withAliases(s.Hidden, mountTable())
	for _, h := range sortedByDepth(s.Hidden) {
		if s.coveredHidden(h) {
			continue // an outer tmpfs hides it, and its name with it
		}
		if _, err := os.Lstat(h); err != nil {
			continue // nothing to hide
		}
		if fi, err := os.Stat(h); err == nil && !fi.IsDir() {
			a = append(a, "--ro-bind", "/dev/null", h)
			continue
		}
		a = append(a, "--perms", "0555", "--tmpfs", h)
		hidden = append(hidden, h)
	}
	a = append(a, s.passages(hidden)...)
	for _, v := range sortedViews(s.Views) {
		a = append(a, "--bind", v.Source, v.Path)
	}
	for _, w := range sortedByDepth(s.Writable) {
		a = append(a, "--bind", w, w)
	}
	for _, r := range sortedByDepth(s.ReadOnly) {
		if _, err := os.Lstat(r); err == nil {
			a = append(a, "--ro-bind", r, r)
		}
	}
	for _, h := range hidden {
		a = append(a, "--remount-ro", h)
	}
	a = append(a, "--chdir", s.Cwd)
	if s.Env != nil {
		a = append(a, "--clearenv")
		for _, kv := range s.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				continue
			}
			a = append(a, "--setenv", k, v)
		}
	} else {
		a = append(a, "--clearenv")
	}
	pinned, err := s.pinViews()
	if err != nil {
		return nil, err
	}
	binds, err := s.pinBinds()
	if err != nil {
		return nil, err
	}
	cfg := helperConfig{
		Writable:   append(viewPaths(s.Views), s.Writable...),
		Views:      pinned,
		Binds:      binds,
		Cwd:        s.Cwd,
		BestEffort: s.BestEffort,
		Private:    private,
		User:       s.User,
	}
	enc, err := cfg.encode()
	if err != nil {
		return nil, err
	}
	a = append(a, "--", helper, helperArg, enc, "--")
	return append(a, s.Args...), nil
}

// Command returns the jail as a command to start (bwrap with the helper
// stage, then s.Args; as root, the helper binary's pre-stage first, which
// execs bwrap from a mount namespace without the FUSE mounts the jail does
// not use). Its Stdin, Stdout and Stderr are the caller's to set;
// other descriptors are not passed. Cancel or kill the returned process to
// end the whole jail (bwrap's --die-with-parent and the PID namespace take
// every process in it down).
//
// The helper binary is passed as descriptor 3 (ExtraFiles) and executed
// through /proc/self/fd/3; the returned command holds that *os.File (closed
// when it is garbage collected, or by the caller through cmd.ExtraFiles
// after Start).
func (s Spec) Command() (*exec.Cmd, error) {
	f, err := os.Open(s.helperPath())
	if err != nil {
		return nil, helperError(err)
	}
	const self = "/proc/self/fd/3" // ExtraFiles[0] in the child
	bw, args, err := s.prepare(self)
	if err != nil {
		f.Close()
		return nil, err
	}
	cmd := exec.Command(bw, args...)
	if os.Geteuid() == 0 {
		// bwrap starts from a namespace without the FUSE mounts the jail
		// does not use (detach.go): the pre-stage, in the helper binary,
		// executed through the same descriptor (Path is not looked up
		// here: /proc/self/fd/3 is the child's).
		enc, err := json.Marshal(nsConfig{Keep: s.keepPaths(bw, s.helperPath()), Hidden: s.Hidden})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("confine: %w", err)
		}
		cmd = &exec.Cmd{Path: self, Args: append([]string{self, nsArg, string(enc), "--", bw}, args...)}
	}
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// helperPath is the helper binary to open: Spec.Helper, or this process's
// executable through /proc/self/exe (whatever its path, deleted included).
func (s Spec) helperPath() string {
	if s.Helper != "" {
		return s.Helper
	}
	return "/proc/self/exe"
}

// helperError is the error for a helper binary that cannot be opened.
func helperError(err error) error {
	return &RefusedDescriptorError{fmt.Sprintf("confine: helper binary: %v (the jail runs it through a descriptor)", err)}
}

// Exec replaces the calling process with the jail (execve(2) of bwrap):
// the caller's pid becomes bwrap's, so a pidfd taken on the caller before
// Exec reaches the jail. Descriptors above stderr are closed first; as
// root, the calling thread then moves to a mount namespace of its own
// without the FUSE mounts the jail does not use, which bwrap copies. It
// returns only on failure (the thread may then be in that namespace: exit).
//
// The helper binary is opened here (Spec.Helper, or /proc/self/exe) into a
// descriptor bwrap inherits, and bwrap executes it in the jail through
// /proc/self/fd/N: its path need not be visible in the jail.
func (s Spec) Exec() error {
	if _, _, err := s.prepare("/proc/self/fd/0"); err != nil {
		return err // bad input, before anything is closed
	}
	if err := checkStdio(s.Backing); err != nil {
		return err
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("confine: close inherited descriptors: %w", err)
	}
	fd, err := unix.Open(s.helperPath(), unix.O_RDONLY, 0) // no O_CLOEXEC: bwrap and the jail inherit it
	if err != nil {
		return helperError(err)
	}
	bw, args, err := s.prepare("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		// bwrap starts from a namespace without the FUSE mounts the jail
		// does not use (detach.go); this thread execs it.
		if err := isolateMounts(s.keepPaths(bw, s.helperPath()), s.Hidden); err != nil {
			return fmt.Errorf("confine: %w", err)
		}
	}
	err = syscall.Exec(bw, append([]string{bw}, args...), []string{})
	return fmt.Errorf("confine: exec %s: %w", bw, err)
}

// prepare finds bwrap and builds the arguments, with helper as what bwrap
// executes in the jail.
func (s Spec) prepare(helper string) (bw string, args []string, err error) {
	if bw, err = s.BwrapPath(); err != nil {
		return "", nil, err
	}
	args, err = s.BwrapArgs(helper)
	return bw, args, err
}

// passages returns bwrap's arguments that make, mode 0555, each directory
// between a hidden tmpfs (one of hidden) and a view, writable or read-only
// bind inside it, when that tmpfs is the innermost mount around the bind:
// bwrap would make them 0700, and a jail run as another user (Spec.User)
// could then not reach its temp directory or a view by its path.
func (s Spec) passages(hidden []string) []string {
	var dests []string
	dests = append(dests, viewPaths(s.Views)...)
	dests = append(dests, s.Writable...)
	dests = append(dests, s.ReadOnly...)
	mounts := append(append(slices.Clone(hidden), viewPaths(s.Views)...), s.Writable...)
	var out []string
	made := map[string]bool{}
	for _, d := range sortedByDepth(dests) {
		enclosing := ""
		for _, m := range mounts {
			if m != d && identity.Within(d, m) && len(m) > len(enclosing) {
				enclosing = m
			}
		}
		if enclosing == "" || !slices.Contains(hidden, enclosing) {
			continue
		}
		var between []string
		for x := filepath.Dir(d); x != enclosing; x = filepath.Dir(x) {
			between = append(between, x)
		}
		for i := len(between) - 1; i >= 0; i-- {
			if x := between[i]; !made[x] {
				made[x] = true
				out = append(out, "--perms", "0555", "--dir", x)
			}
		}
	}
	return out
}

// viewPaths returns the views' paths.
func viewPaths(vs []View) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Path
	}
	return out
}

// sortedViews returns vs with outer paths first, so an inner view is bound
// on top of an outer one.
func sortedViews(vs []View) []View {
	out := slices.Clone(vs)
	slices.SortStableFunc(out, func(a, b View) int { return depth(a.Path) - depth(b.Path) })
	return out
}

// sortedByDepth returns ps with outer paths first.
func sortedByDepth(ps []string) []string {
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b string) int { return depth(a) - depth(b) })
	return out
}

// depth is the number of components of the clean absolute path p.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// RefusedDescriptorError is Exec's and ExecLandlockOnly's error when
// stdin, stdout or stderr may not enter the jail (the refusal the helper
// stage exits ExitConfineFailed for): a directory outside FUSE, or a file
// in a backing root reached without the mount.
type RefusedDescriptorError struct{ msg string }

func (e *RefusedDescriptorError) Error() string { return e.msg }

// checkStdio refuses stdin, stdout or stderr when it is a directory not on
// FUSE (a directory descriptor leads around the jail's mounts) or a file
// inside a backing root reached without the mount (its path, as
// /proc/self/fd says, lies in one), with a *RefusedDescriptorError.
func checkStdio(backing []string) error {
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			continue
		}
		var sfs unix.Statfs_t
		if unix.Fstatfs(fd, &sfs) == nil && sfs.Type == FuseSuperMagic {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return &RefusedDescriptorError{fmt.Sprintf("confine: descriptor %d is a directory outside FUSE; a jail does not inherit one", fd)}
		}
		p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !filepath.IsAbs(p) {
			continue // a pipe, a socket, a terminal
		}
		for _, b := range backing {
			if identity.Within(p, b) {
				return &RefusedDescriptorError{fmt.Sprintf("confine: descriptor %d is %s in the backing root %s, not through the mount; a jail does not inherit it", fd, p, b)}
			}
		}
	}
	return nil
}
