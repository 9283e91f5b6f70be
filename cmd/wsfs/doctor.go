package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/confine"
	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/transport"
)

func init() { registerCommand(newDoctorCmd) }

// The statuses of a doctor check.
const (
	checkOK   = "ok"
	checkWarn = "warn" // works, with less (or an optional feature is missing)
	checkFail = "fail" // wsfs cannot work until fixed
)

// check is one line of `wsfs doctor`.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do; empty when Status is ok.
	Fix string `json:"fix,omitempty"`
}

// newDoctorCmd returns the `wsfs doctor` verb.
func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this host can run wsfs, one line per check with the fix",
		Long: `Check /dev/fuse, the mount helper (fusermount3, or running as root), the
kernel's FUSE passthrough support (Linux 6.9+), the FUSE transport
--fuse-transport auto picks (FUSE over io_uring when the fuse module's
enable_uring parameter is on, else /dev/fuse), whether sessions can outlive
a daemon restart (root, Linux 6.9+), bubblewrap and the Landlock
ABI (for exec --confine), user_allow_other in /etc/fuse.conf (for --allow-other), the
descriptor limit a server gets (one descriptor per inode the kernel keeps) and
stale wsfs mounts (a daemon that died), hung ones (probed 16 at a time, 2s
each), and mounts whose daemon is down while its holder keeps their
connections (after a crash: they wait for the next wsfs serve). Prints one
line per check, as each ends:
"ok|warn|fail  NAME: DETAIL[ — fix: FIX]"; with --json one object per line
{"name","status","detail","fix"}. Exit code 1 when a check fails (warnings do
not fail).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			failed := false
			// Each line as soon as its check is done: the mounts' probes
			// come last and take up to probeTimeout.
			emit := func(cs ...check) {
				for _, c := range cs {
					if c.Status == checkFail {
						failed = true
					}
					if jsonOutput(cmd) {
						writeJSON(cmd.OutOrStdout(), c)
						continue
					}
					line := fmt.Sprintf("%-4s  %s: %s", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						line += " — fix: " + c.Fix
					}
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
			}
			for _, f := range []func() check{checkDevFuse, checkMountHelper, checkPassthrough,
				func() check { return checkTransport(transport.KernelURing()) }, checkRestarts, checkBwrap, checkLandlock,
				checkAllowOther, func() check { return checkDescriptors(fusefs.RaiseDescriptorLimit()) }} {
				emit(f())
			}
			emit(checkStaleMounts()...)
			if failed {
				return errReported
			}
			return nil
		},
	}
}

// checkDevFuse checks that /dev/fuse is a character device this process can
// open read-write.
func checkDevFuse() check {
	c := check{Name: "/dev/fuse"}
	fi, err := os.Stat("/dev/fuse")
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = checkFail, firstLine(err.Error()), "load the module (modprobe fuse); in a container, pass the device (--device /dev/fuse)"
		return c
	case fi.Mode()&os.ModeCharDevice == 0:
		c.Status, c.Detail, c.Fix = checkFail, "not a character device", "recreate it: mknod /dev/fuse c 10 229"
		return c
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		c.Status, c.Detail, c.Fix = checkFail, "cannot open: "+firstLine(err.Error()), "run as root or give this user access to /dev/fuse (mode 0666 is the usual)"
		return c
	}
	f.Close()
	c.Status, c.Detail = checkOK, "character device, opens read-write"
	return c
}

// checkMountHelper checks that this process can mount: as root it calls
// mount(2) itself, otherwise it needs fusermount3.
func checkMountHelper() check {
	c := check{Name: "mount"}
	if os.Geteuid() == 0 {
		c.Status, c.Detail = checkOK, "running as root: mount(2) directly"
		if p, err := exec.LookPath("fusermount3"); err == nil {
			c.Detail += "; fusermount3 at " + p
		}
		return c
	}
	p, err := exec.LookPath("fusermount3")
	if err != nil {
		c.Status, c.Detail, c.Fix = checkFail, "not root and fusermount3 not in PATH", "install fuse3 (apt-get install fuse3) or run as root"
		return c
	}
	c.Status, c.Detail = checkOK, "fusermount3 at "+p+"; an unprivileged server: no FUSE passthrough (reads and writes go through the server), and objects other users create on an --allow-other mount belong to this user"
	return c
}

// kernelVersion returns the running kernel's major and minor version.
func kernelVersion() (major, minor int, release string, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, 0, "", err
	}
	release = unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, release, fmt.Errorf("kernel release %q: not MAJOR.MINOR", release)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return 0, 0, release, fmt.Errorf("kernel release %q: not MAJOR.MINOR", release)
	}
	return major, minor, release, nil
}

// checkPassthrough checks the kernel's FUSE passthrough support (Linux 6.9,
// FUSE_PASSTHROUGH; it needs CAP_SYS_ADMIN).
func checkPassthrough() check {
	c := check{Name: "fuse passthrough"}
	major, minor, release, err := kernelVersion()
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = checkWarn, firstLine(err.Error()), "check the kernel version by hand: passthrough needs Linux 6.9+"
	case major > 6 || major == 6 && minor >= 9:
		c.Status, c.Detail = checkOK, "kernel "+release+" supports FUSE passthrough"
		if os.Geteuid() != 0 {
			c.Status, c.Detail, c.Fix = checkWarn, c.Detail+", but it needs root (CAP_SYS_ADMIN): not used, reads and writes go through the server", "run the daemon as root for passthrough file data"
		}
	default:
		c.Status, c.Detail, c.Fix = checkWarn, "kernel "+release+" has no FUSE passthrough: file data goes through the server", "upgrade to Linux 6.9+ for native-speed file data"
	}
	return c
}

// checkRestarts says whether wsfs serve's sessions can outlive the daemon
// (README, "Restarts and upgrades"): it needs root (open_by_handle_at(2)
// finds the files again) and Linux 6.9+ (FUSE_NOTIFY_RESEND sends the
// requests a dead daemon read to the next one).
func checkRestarts() check {
	c := check{Name: "restarts"}
	major, minor, release, err := kernelVersion()
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = checkWarn, firstLine(err.Error()), "check the kernel version by hand: keeping sessions over a restart needs Linux 6.9+"
	case !(major > 6 || major == 6 && minor >= 9):
		c.Status, c.Detail, c.Fix = checkWarn, "kernel "+release+" has no FUSE_NOTIFY_RESEND: a restart of wsfs serve ends its sessions' mounts (ENOTCONN) and mounts them again", "upgrade to Linux 6.9+"
	case os.Geteuid() != 0:
		c.Status, c.Detail, c.Fix = checkWarn, "not root: wsfs serve cannot find a session's files again by handle, so a restart ends its mounts (ENOTCONN) and mounts them again", "run the daemon as root"
	case os.Getenv("NOTIFY_SOCKET") != "":
		c.Status, c.Detail = checkOK, "kernel "+release+", root, under systemd: sessions outlive the daemon, their connections in systemd's file descriptor store (FileDescriptorStoreMax= in the unit)"
	default:
		c.Status, c.Detail = checkOK, "kernel "+release+", root: sessions outlive the daemon, their connections kept by a holder process wsfs serve starts (<state-dir>/holder.sock)"
	}
	return c
}

// checkTransport says which FUSE transport `--fuse-transport auto` (the
// default) uses on this host, from transport.KernelURing's present and
// enabled, and how to enable FUSE over io_uring when it is off
// (fs/fuse/dev_uring.c: the enable_uring parameter, default N). A
// missing or disabled ring is a warning: /dev/fuse works, at a longer
// round trip.
func checkTransport(present, enabled bool) check {
	c := check{Name: "fuse transport"}
	switch {
	case !present:
		c.Status, c.Detail, c.Fix = checkWarn, "/dev/fuse: the kernel has no FUSE over io_uring ("+transport.URingParameter+" is missing)", "Linux 6.14+ built with CONFIG_FUSE_IO_URING serves over per-CPU rings"
	case !enabled:
		c.Status, c.Detail, c.Fix = checkWarn, "/dev/fuse: FUSE over io_uring is built but off (enable_uring=N)",
			"echo 1 > "+transport.URingParameter+" (new mounts), and `options fuse enable_uring=1` in /etc/modprobe.d/fuse.conf (at boot); wsfs never changes it itself"
	default:
		c.Status, c.Detail = checkOK, "io-uring: new mounts are served over FUSE over io_uring (enable_uring=Y; --fuse-transport dev opts out)"
	}
	return c
}

// checkDescriptors judges limit, the RLIMIT_NOFILE a server started here
// gets (fusefs.RaiseDescriptorLimit): each inode the kernel keeps looked up
// holds a descriptor in the server, so a low limit is EMFILE on big trees;
// the detail says how many idle sessions fit (sizing).
func checkDescriptors(limit uint64) check {
	c := check{Name: "descriptor limit"}
	switch {
	case limit == 0:
		c.Status, c.Detail, c.Fix = checkWarn, "getrlimit(RLIMIT_NOFILE) failed", "check ulimit -Hn by hand (want >= "+strconv.Itoa(fusefs.LowDescriptorLimit)+")"
	case limit < fusefs.LowDescriptorLimit:
		c.Status = checkWarn
		c.Detail = fmt.Sprintf("%d descriptors: a walk of a tree with more inodes than three quarters of that reopens node descriptors by file handle (slower), and an unprivileged mount gets EMFILE; %s", limit, sizing(limit))
		c.Fix = fmt.Sprintf("raise the hard limit to >= %d (ulimit -Hn, systemd LimitNOFILE=, the container's nofile)", fusefs.LowDescriptorLimit)
	default:
		c.Status, c.Detail = checkOK, fmt.Sprintf("%d descriptors: %s", limit, sizing(limit))
	}
	return c
}

// sizing says how many idle sessions limit descriptors hold (README,
// "Sizing").
func sizing(limit uint64) string {
	return fmt.Sprintf("room for about %d idle sessions in one daemon (%d descriptors each, %d for the daemon; fewer as the kernel keeps inodes looked up)",
		mounts.SessionsFor(limit), mounts.DescriptorsPerSession, mounts.DescriptorReserve)
}

// checkLandlock checks the Landlock ABI that `wsfs exec --confine` needs
// for its second layer.
func checkLandlock() check {
	c := check{Name: "landlock"}
	abi := confine.LandlockABI()
	switch {
	case abi >= confine.MinLandlockABI:
		c.Status, c.Detail = checkOK, fmt.Sprintf("ABI %d: exec --confine's second layer works", abi)
	case abi > 0:
		c.Status, c.Detail, c.Fix = checkWarn, fmt.Sprintf("ABI %d: exec --confine fails, --confine=best-effort runs without Landlock (it cannot allow renames across directories)", abi), "upgrade to Linux 5.19+"
	default:
		c.Status, c.Detail, c.Fix = checkWarn, "not available: exec --confine fails, --confine=best-effort runs without Landlock", "boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK=y)"
	}
	return c
}

// checkBwrap checks that bubblewrap can build exec --confine's jail: bwrap
// in $PATH, and a trial jail (read-only "/", own PID namespace and /proc)
// that runs true.
func checkBwrap() check {
	c := check{Name: "bwrap"}
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		c.Status, c.Detail, c.Fix = checkWarn, "bwrap not found: exec --confine fails, --confine=best-effort applies Landlock alone (no mount namespace)", "install bubblewrap (Debian: apt-get install bubblewrap)"
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bcmd := exec.CommandContext(ctx, bw, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
		"--cap-drop", "ALL", "--", "true")
	// Killed at the timeout; its output pipe may be held by a child it
	// made that is stuck too: wait for that no longer than this.
	bcmd.WaitDelay = time.Second
	out, err := bcmd.CombinedOutput()
	if err != nil {
		c.Status, c.Detail, c.Fix = checkFail, fmt.Sprintf("%s cannot build a jail: %v: %s", bw, err, firstLine(string(out))), "run as root, or allow unprivileged user namespaces (kernel.unprivileged_userns_clone=1)"
		return c
	}
	c.Status, c.Detail = checkOK, bw+": exec --confine builds its jail"
	return c
}

// checkAllowOther checks user_allow_other in /etc/fuse.conf, which a
// non-root --allow-other mount needs.
func checkAllowOther() check {
	c := check{Name: "user_allow_other"}
	f, err := os.Open("/etc/fuse.conf")
	if err != nil {
		if os.Geteuid() == 0 {
			c.Status, c.Detail = checkOK, "/etc/fuse.conf absent; not needed as root"
			return c
		}
		c.Status, c.Detail, c.Fix = checkWarn, "/etc/fuse.conf: "+firstLine(identity.ErrnoText(err)), "add the line user_allow_other to /etc/fuse.conf (only for --allow-other)"
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			c.Status, c.Detail = checkOK, "set in /etc/fuse.conf"
			return c
		}
	}
	if os.Geteuid() == 0 {
		c.Status, c.Detail = checkOK, "not set in /etc/fuse.conf; not needed as root"
		return c
	}
	c.Status, c.Detail, c.Fix = checkWarn, "not set in /etc/fuse.conf: --allow-other mounts are refused", "add the line user_allow_other to /etc/fuse.conf (only for --allow-other)"
	return c
}

// probeTimeout bounds how long doctor waits for one mount to answer;
// probeParallel mounts are probed at once, so that many mounts no daemon
// serves cost seconds, not a timeout each.
const (
	probeTimeout  = 2 * time.Second
	probeParallel = 16
)

// probeMount statfs's mp in a child process (stat -f) and returns ENOTCONN for
// a dead mount, ETIMEDOUT for one that does not answer, else 0. A hung FUSE
// mount leaves a stat(2) waiting: in a child, only the child waits, and
// doctor still reports and exits. The child is killed at the timeout (a
// process waiting for a FUSE request that no server has read yet, as on a
// kept connection no daemon serves, dies of SIGKILL; one whose request a
// stuck server read may not, and is left after a short wait) and when
// doctor dies (PR_SET_PDEATHSIG), so that no probe outlives doctor.
// ECONNABORTED (over io_uring, a request made while the kernel tears a
// dead server's ring down) is asked once more, as fusefs.Statfs does.
func probeMount(mp string) unix.Errno {
	e := probeMountOnce(mp)
	if e == unix.ECONNABORTED {
		e = probeMountOnce(mp)
	}
	if e == unix.ECONNABORTED {
		e = 0
	}
	return e
}

func probeMountOnce(mp string) unix.Errno {
	var out bytes.Buffer
	// stat -f (statfs(2)) always asks the server; stat(2) of a mount root
	// may be answered from the kernel's attribute cache.
	cmd := exec.Command("stat", "-f", "-c", "%i", "--", mp)
	cmd.Dir = "/"
	// stat(1) exits 1 for every failure; only its message (strerror) tells
	// ENOTCONN apart, so it runs in the C locale.
	cmd.Env = []string{"LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		msg := strings.ToLower(out.String())
		switch {
		case err != nil && strings.Contains(msg, unix.ENOTCONN.Error()):
			return unix.ENOTCONN
		case err != nil && strings.Contains(msg, unix.ECONNABORTED.Error()):
			return unix.ECONNABORTED
		}
		return 0
	case <-time.After(probeTimeout):
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(probeReap):
			// Not waited for longer: its request was read by a server
			// that is stuck, and it may never wake.
		}
		return unix.ETIMEDOUT
	}
}

// probeReap bounds the wait for a probe killed at its timeout.
const probeReap = time.Second

// checkStaleMounts finds wsfs mounts (type fuse.wsfs) whose server is gone
// (stat gives ENOTCONN: one check per stale mount) or that do not answer,
// probing them probeParallel at a time. A mount that does not answer and
// whose connection a holder process keeps for a state directory no daemon
// holds is waiting for the next daemon: one check per such state
// directory says so, naming its mounts. Others are hung mounts, named
// with the daemon that holds their state directory when one does. One ok
// line when every mount answers.
func checkStaleMounts() []check {
	table, err := fusefs.MountTable()
	if err != nil {
		return []check{{Name: "stale mounts", Status: checkWarn, Detail: "/proc/self/mountinfo: " + firstLine(err.Error()), Fix: "mount /proc"}}
	}
	var out []check
	live := 0
	var mps []string
	for mp, e := range table {
		if e.FSType == "fuse.wsfs" {
			mps = append(mps, mp)
		}
	}
	sort.Strings(mps) // one line each, in a stable order
	probed := make([]unix.Errno, len(mps))
	var wg sync.WaitGroup
	slots := make(chan struct{}, probeParallel)
	for i, mp := range mps {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			probed[i] = probeMount(mp)
			<-slots
		}()
	}
	wg.Wait()
	stale := map[string]bool{}
	var hung []string
	for i, mp := range mps {
		switch probed[i] {
		case unix.ENOTCONN:
			stale[mp] = true
		case unix.ETIMEDOUT:
			hung = append(hung, mp)
		default:
			live++
		}
	}
	var keepers map[string]keeper
	if len(hung) > 0 {
		keepers = findKeepers()
	}
	waiting := map[string][]string{} // state directory: its mounts no daemon serves
	var downDirs []string
	for _, mp := range hung {
		k, kept := keepers[transport.ConnName(mp)]
		switch {
		case kept && k.daemon == 0:
			if waiting[k.stateDir] == nil {
				downDirs = append(downDirs, k.stateDir)
			}
			waiting[k.stateDir] = append(waiting[k.stateDir], mp)
		case kept:
			out = append(out, check{Name: "hung mount", Status: checkFail,
				Detail: fmt.Sprintf("%s: does not answer within %s; wsfs serve pid %d (state directory %s) serves it, its connection kept by holder pid %d", mp, probeTimeout, k.daemon, k.stateDir, k.holder),
				Fix:    fmt.Sprintf("see that daemon's log; if it is stuck, kill -9 %d and start wsfs serve --state-dir %s again: the next daemon serves the mount on", k.daemon, k.stateDir)})
		default:
			out = append(out, check{Name: "hung mount", Status: checkFail, Detail: mp + ": does not answer within " + probeTimeout.String(),
				Fix: "if a wsfs serve that keeps its connections is down, start it again: it serves this mount on; otherwise abort its FUSE connection (echo 1 > " + abortFile(table[mp].Dev) + ") and wsfs unmount " + mp})
		}
	}
	for _, dir := range downDirs {
		k := keepers[transport.ConnName(waiting[dir][0])]
		out = append(out, check{Name: "daemon not running", Status: checkFail,
			Detail: fmt.Sprintf("no wsfs serve runs for state directory %s: holder pid %d keeps its sessions' connections, waiting for the next daemon; processes in these mounts wait until it starts: %s", dir, k.holder, strings.Join(waiting[dir], ", ")),
			Fix:    fmt.Sprintf("start wsfs serve --state-dir %s (with the --socket and --mount-base it ran with): it serves these mounts on (to end them instead, stop that daemon with SIGINT, the full stop)", dir)})
	}
	for _, mp := range mps {
		if !stale[mp] {
			continue
		}
		if base, ok := strings.CutSuffix(mp, "@host"); ok && stale[base] {
			continue // one unmount of base clears both
		}
		detail, fix := mp+": its server is gone (ENOTCONN)", "wsfs unmount "+mp+" (a restarted wsfs serve clears its own)"
		if stale[mp+"@host"] {
			detail = mp + " and its host view " + mp + "@host: their server is gone (ENOTCONN)"
			fix = "wsfs unmount " + mp + " (clears both; a restarted wsfs serve clears its own)"
		}
		out = append(out, check{Name: "stale mount", Status: checkFail, Detail: detail, Fix: fix})
	}
	if len(out) == 0 {
		out = append(out, check{Name: "stale mounts", Status: checkOK, Detail: fmt.Sprintf("none (%d live wsfs mounts)", live)})
	}
	return out
}

// keeper is who keeps a FUSE connection: the holder process (pid) of a
// daemon's state directory, and the daemon holding that directory (0:
// none runs).
type keeper struct {
	stateDir       string
	holder, daemon int
}

// keeperTimeout bounds the wait for a holder's answer (it does no FUSE
// I/O, but a stopped one would never answer).
const keeperTimeout = 2 * time.Second

// findKeepers returns, by connection name (transport.ConnName of its
// mountpoint), the connections the holder processes running here keep:
// each `wsfs holder --socket <state-dir>/holder.sock` (holderArgv) found in
// /proc that answers names the descriptors it keeps (transport.Holder.Names).
// Connections kept by systemd's file descriptor store are not known here.
func findKeepers() map[string]keeper {
	out := map[string]keeper{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	seen := map[string]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		socket, ok := holderSocketOf(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"))
		if !ok || seen[socket] {
			continue
		}
		seen[socket] = true
		type answer struct {
			pid   int
			names []string
			err   error
		}
		ch := make(chan answer, 1)
		go func() {
			h := &transport.Holder{Socket: socket}
			defer h.Close()
			p, err := h.Ping()
			if err != nil {
				ch <- answer{err: err}
				return
			}
			names, err := h.Names()
			ch <- answer{p, names, err}
		}()
		var a answer
		select {
		case a = <-ch:
		case <-time.After(keeperTimeout):
			continue
		}
		if a.err != nil || a.pid != pid {
			continue
		}
		dir := filepath.Dir(socket)
		k := keeper{stateDir: dir, holder: pid, daemon: mounts.DaemonOf(dir)}
		for _, n := range a.names {
			if conn, ok := strings.CutSuffix(n, ".fuse"); ok {
				out[conn] = k
			}
		}
	}
	return out
}

// abortFile returns the fusectl file that aborts the FUSE connection of the
// mount with device dev ("MAJOR:MINOR"): the connection is named by the
// device's minor number (Documentation/filesystems/fuse.rst, "Control
// filesystem").
func abortFile(dev string) string {
	_, minor, ok := strings.Cut(dev, ":")
	if !ok || minor == "" {
		minor = "N"
	}
	return "/sys/fs/fuse/connections/" + minor + "/abort"
}
