package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// helperArg marks the helper stage's command line: BINARY helperArg CONFIG
// -- ARGS...
const helperArg = "__wsfs-confine-helper"

// helperConfig is what the helper stage needs, passed as JSON in one
// argument.
type helperConfig struct {
	// Writable directories (the views and Spec.Writable) get Landlock's
	// write rights, renames and links between them included.
	Writable []string `json:"writable"`
	// Views are the views' paths with their sources' identities: each
	// path, walked in the jail without following a symlink, must be that
	// object (bwrap follows links: a source or a path swapped for one
	// after Spec.Check would show something else there).
	Views []pinnedView `json:"views"`
	// Binds are the directories bound at their own paths (writable and
	// read-only), pinned as the views are.
	Binds []pinnedView `json:"binds,omitempty"`
	// Cwd is where bwrap started the helper; it must be on FUSE, and be
	// Cwd walked without following a symlink.
	Cwd string `json:"cwd"`
	// BestEffort: warn instead of failing when a layer is unavailable.
	BestEffort bool `json:"best_effort,omitempty"`
	// Private: bwrap kept CAP_SYS_ADMIN so that the helper makes every
	// mount of the jail private (then drops every capability).
	Private bool `json:"private,omitempty"`
	// User is Spec.User: the identity taken after the bounding set is
	// emptied (bwrap kept CAP_SETUID and CAP_SETGID for it).
	User *User `json:"user,omitempty"`
}

func (c helperConfig) encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("confine: %w", err)
	}
	return string(b), nil
}

// ExitConfineFailed is the helper stage's exit status when the jail cannot
// be completed (a layer missing in strict mode, the cwd not on FUSE, a
// refused descriptor); the reason is printed on stderr.
const ExitConfineFailed = 126

// ExitNotFound is the helper stage's exit status when the command cannot
// be found or executed, as shells use it.
const ExitNotFound = 127

// Init runs the helper stage when this process is one (the jail's first
// process after bwrap's set-up), or the pre-stage that starts bwrap in a
// mount namespace without other FUSE mounts (Spec.Command, as root), and
// never returns then; otherwise it returns at once. A binary that starts jails with Spec.Helper unset (itself) calls
// Init first thing in main.
func Init() {
	if len(os.Args) < 5 || os.Args[3] != "--" {
		return
	}
	switch os.Args[1] {
	case helperArg:
		os.Exit(runHelper(os.Args[2], os.Args[4:]))
	case nsArg:
		os.Exit(runNamespaceStage(os.Args[2], os.Args[4:]))
	}
}

// runHelper completes the jail from inside it and execs args.
func runHelper(config string, args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "wsfs: confine: "+format+"\n", a...)
		return ExitConfineFailed
	}
	// Capabilities are per thread: what is dropped below must be dropped
	// on the thread that execs.
	runtime.LockOSThread()
	var cfg helperConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return fail("helper configuration: %v", err)
	}
	// After bwrap's set-up, no mount event of the host reaches the jail (a
	// session mounted later, say) and none leaves it: every mount private.
	// bwrap kept CAP_SYS_ADMIN and CAP_SETPCAP for this step (as root).
	if cfg.Private {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fail("make the jail's mounts private: %v", err)
		}
	}
	if err := checkPinned(cfg); err != nil {
		return fail("%v", err)
	}
	if err := dropCapabilities(cfg.User); err != nil {
		return fail("drop capabilities: %v", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(".", &sfs); err != nil || sfs.Type != FuseSuperMagic {
		return fail("working directory %s is not on FUSE in the jail (statfs type %#x, %v)", cfg.Cwd, sfs.Type, err)
	}
	// Only stdio crosses into the jail, and never as a directory outside
	// FUSE (openat(2) relative to it would lead around every mount here).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("close inherited descriptors: %v", err)
	}
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		var fs unix.Statfs_t
		if unix.Fstatfs(fd, &fs) != nil || fs.Type != FuseSuperMagic {
			return fail("descriptor %d is a directory outside FUSE; a jail does not inherit one", fd)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("no_new_privs: %v", err)
	}
	if err := restrictLandlock(cfg); err != nil {
		if !cfg.BestEffort {
			return fail("%v; --confine=best-effort runs without it", err)
		}
		fmt.Fprintf(os.Stderr, "wsfs: warning: confine: %v; running without it\n", err)
	}
	if err := installSeccomp(); err != nil {
		if !cfg.BestEffort {
			return fail("seccomp: %v; --confine=best-effort runs without it", err)
		}
		fmt.Fprintf(os.Stderr, "wsfs: warning: confine: seccomp: %v; running without it\n", err)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "wsfs: exec %s: %v\n", args[0], err)
		return ExitNotFound
	}
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "wsfs: exec %s: %v\n", path, err)
	return ExitNotFound
}

// checkPinned checks, inside the jail, that each view path of cfg is its
// source's object (st_dev, st_ino), each bound directory the one pinned, and
// that the working directory is cfg.Cwd, each walked without following a
// symlink.
func checkPinned(cfg helperConfig) error {
	for _, v := range cfg.Views {
		st, _, err := statCanonical(v.Path)
		if err != nil {
			return fmt.Errorf("view %s in the jail: %w (the jail follows no symlink)", v.Path, err)
		}
		if st.Dev != v.Dev || st.Ino != v.Ino {
			return fmt.Errorf("view %s in the jail is not its source (swapped while the jail was built)", v.Path)
		}
	}
	for _, b := range cfg.Binds {
		st, _, err := statCanonical(b.Path)
		if err != nil {
			return fmt.Errorf("directory %s in the jail: %w (the jail follows no symlink)", b.Path, err)
		}
		if st.Dev != b.Dev || st.Ino != b.Ino {
			return fmt.Errorf("directory %s in the jail is not the one bound (swapped while the jail was built)", b.Path)
		}
	}
	st, _, err := statCanonical(cfg.Cwd)
	if err != nil {
		return fmt.Errorf("working directory %s in the jail: %w (the jail follows no symlink)", cfg.Cwd, err)
	}
	var dot unix.Stat_t
	if err := unix.Stat(".", &dot); err != nil || dot.Dev != st.Dev || dot.Ino != st.Ino {
		return fmt.Errorf("working directory %s in the jail: not where the jail started (swapped while the jail was built)", cfg.Cwd)
	}
	return nil
}

// dropCapabilities empties this thread's bounding set (PR_CAPBSET_DROP,
// which needs CAP_SETPCAP: first) and its effective, permitted and
// inheritable sets (capset(2)), and clears the ambient set, so that no
// execve(2) from here regains one, even of a set-user-ID root binary or as
// uid 0 (capabilities(7)). With u, the process takes u's identity between
// the two (no supplementary groups; every thread: syscall.Setresuid), which
// needs CAP_SETUID and CAP_SETGID.
func dropCapabilities(u *User) error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		// EPERM: no CAP_SETPCAP (bwrap already dropped every capability,
		// not as root); no_new_privs then keeps execve from gaining any.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL && err != unix.EPERM {
			return fmt.Errorf("bounding set: capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("ambient set: %w", err)
	}
	if u != nil {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("user %d: setgroups: %w", u.Uid, err)
		}
		if err := syscall.Setresgid(int(u.Gid), int(u.Gid), int(u.Gid)); err != nil {
			return fmt.Errorf("user %d: setresgid %d: %w", u.Uid, u.Gid, err)
		}
		if err := syscall.Setresuid(int(u.Uid), int(u.Uid), int(u.Uid)); err != nil {
			return fmt.Errorf("user %d: setresuid: %w", u.Uid, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// LandlockABI returns the kernel's Landlock ABI version, 0 when Landlock is
// unsupported or disabled (landlock_create_ruleset(2) with
// LANDLOCK_CREATE_RULESET_VERSION).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// MinLandlockABI is the Landlock ABI the jail's second layer needs: 2
// handles renames and links across directories (LANDLOCK_ACCESS_FS_REFER),
// without which every rename between two directories fails with EXDEV.
const MinLandlockABI = 2

// restrictLandlock applies one Landlock ruleset to this process: read and
// execute everywhere; write, renames and links between them (REFER) in the
// writable directories and the terminal devices; from ABI 6 signals and
// abstract Unix sockets scoped to the jail. The network is not handled. One
// ruleset: a second layer that handles REFER without allowing it would turn
// every cross-directory rename into EXDEV.
func restrictLandlock(cfg helperConfig) error {
	abi := LandlockABI()
	if abi < MinLandlockABI {
		return fmt.Errorf("landlock: the kernel's ABI is %d, %d or newer is needed (Linux 5.19+, lsm=landlock)", abi, MinLandlockABI)
	}
	ll := landlock.V9
	ll.HandledAccessNet = 0
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs(cfg.Writable...).WithRefer().WithIoctlDev(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if err := ll.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %v", err)
	}
	return nil
}

// ExecLandlockOnly is the fallback when bwrap is missing: it confines this
// process in place with the helper stage's second layer only (one Landlock
// ruleset: read everywhere, write in the views' sources — the mounts —
// and Spec.Writable; the seccomp filter; no_new_privs) and execs s.Args in
// s.Cwd. There is no mount namespace: absolute paths into a root reach the
// backing store for reading, metadata changes outside the writable places
// (chmod, chown, utimes, xattrs) are not refused, and /proc is the host's.
// s.Cwd is the working directory inside the mount here (a view's Source),
// not the root's physical path. It returns only on failure.
func ExecLandlockOnly(s Spec) error {
	if len(s.Args) == 0 {
		return errors.New("confine: no command")
	}
	cfg := helperConfig{Writable: append(viewSources(s.Views), s.Writable...), Cwd: s.Cwd, BestEffort: s.BestEffort}
	if err := checkStdio(s.Backing); err != nil {
		return err
	}
	if err := os.Chdir(s.Cwd); err != nil {
		return fmt.Errorf("confine: working directory: %w", err)
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("confine: close inherited descriptors: %w", err)
	}
	path, err := lookPathIn(s.Args[0], s.Env)
	if err != nil {
		return err
	}
	runtime.LockOSThread() // capabilities are per thread: drop them on the one that execs
	if err := dropCapabilities(nil); err != nil {
		return fmt.Errorf("confine: drop capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("confine: no_new_privs: %w", err)
	}
	if err := restrictLandlock(cfg); err != nil {
		if !s.BestEffort {
			return err
		}
		fmt.Fprintf(os.Stderr, "wsfs: warning: confine: %v; running without it\n", err)
	}
	if err := installSeccomp(); err != nil {
		if !s.BestEffort {
			return fmt.Errorf("confine: seccomp: %w", err)
		}
		fmt.Fprintf(os.Stderr, "wsfs: warning: confine: seccomp: %v; running without it\n", err)
	}
	err = syscall.Exec(path, s.Args, s.Env)
	return &ExecError{Path: path, Err: err}
}

// ExecError is a command that could not be executed (exit status 127 by
// the shells' convention).
type ExecError struct {
	Path string
	Err  error
}

func (e *ExecError) Error() string { return fmt.Sprintf("exec %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *ExecError) Unwrap() error { return e.Err }

// lookPathIn finds name as exec.LookPath does, with env's PATH.
func lookPathIn(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", &ExecError{Path: name, Err: exec.ErrNotFound}
}

// viewSources returns the views' sources.
func viewSources(vs []View) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Source
	}
	return out
}
