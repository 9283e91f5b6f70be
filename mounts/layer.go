package mounts

// Layers: a session on a copy-on-write layer (DESIGN.md, "Round 4",
// Layers; docs/design.md, "Layers"). The kernel's overlayfs does the layer:
// the project is its lower directory, the upper and work directories live
// in the daemon's state, and the merged overlay is mounted in a private
// place (<dir>/merged, under the state directory, which no session can
// reach). The session's FUSE mount serves the merged tree in the project's
// place (fusefs.Config.Backing), so every policy decision, link rule and
// log line still names the project's paths.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// The directories and files of a layer, under its directory.
const (
	layerUpper    = "upper"
	layerWork     = "work"
	layerMerged   = "merged"
	layerBaseline = "baseline.jsonl"
	layerManifest = "layer.json" // LayerInfo
	layerLock     = "lock"       // flock(2): shared by mounts, exclusive for OpenLayerDir
)

// layersDir is the directory of the daemon's layers under its state
// directory: <state>/layers/<id>.
const layersDir = "layers"

// overlayOptions are the overlayfs options of every layer (overlayfs.rst):
// index=on keeps hard links linked across copy-up and gives nfs_export its
// index; redirect_dir=on renames a lower directory without copying its
// tree; nfs_export=on gives overlay objects file handles, by which a
// successor daemon finds its nodes again (fusefs/keep.go) and, with the
// index, the policy the project object of a copied-up one (fusefs/overlay.go:
// a protected file's hard links stay protected); xino=auto keeps
// inode numbers unique when the layers are on different file systems.
var overlayOptions = [][2]string{
	{"index", "on"}, {"redirect_dir", "on"}, {"nfs_export", "on"}, {"xino", "auto"},
}

// Layer is one copy-on-write layer: the project directory Lower (canonical)
// under the layer directory Dir's upper, work and merged directories.
// The methods that record the baseline are safe for concurrent use.
type Layer struct {
	// Dir holds upper/, work/, merged/, the baseline journal and the
	// checkpoints (layerckpt.go).
	Dir string
	// Lower is the project's canonical physical directory.
	Lower string
	// Users, when not empty, are the uids of the session's users (a
	// session created with --users): commit and discard act with their
	// rights on what the session can reach (layerrights.go), never with
	// the daemon's. Empty: the daemon's own (a root-only session).
	Users []uint32

	mu   sync.Mutex
	seen map[string]bool // relative paths with a baseline record
	jf   *os.File        // the baseline journal, appended to
	// subs are the sub-sessions whose mounts serve the layer besides its
	// own session's (Manager: a layered session's descendants), by id:
	// the layer is not removed while one is there.
	subs map[string]bool

	// ops serializes the verbs (diff, commit, discard; Manager's, through
	// run) and Close, so that a verb runs without the session's lock and
	// the layer is never closed under one; closed (ops held) says Close
	// has run.
	ops    sync.Mutex
	closed bool
	// lock holds the layer directory's lock file, flock(2)ed shared by
	// every process serving the layer (a daemon, its successor during a
	// takeover, wsfs mount), exclusively by OpenLayerDir; released by
	// Close (and by the kernel when the process dies).
	lock *os.File
}

// LayerInfo is a layer directory's manifest (layer.json, written by
// OpenLayer and RecordMount): the project the layer was made for, and for
// a layer that `wsfs mount --layer` served, that mount's mountpoint and
// policy, by which the layer verbs outside a daemon apply it
// (OpenLayerDir).
type LayerInfo struct {
	Version int `json:"version"`
	// Lower is the project's canonical path.
	Lower string `json:"lower"`
	// Mountpoint is the last wsfs mount's (canonical); "" for a daemon
	// session's layer.
	Mountpoint string `json:"mountpoint,omitempty"`
	// Policy is the last wsfs mount's policy (compiled: every default
	// filled in); nil for a daemon session's layer, whose policy is its
	// session's.
	Policy *policy.Spec `json:"policy,omitempty"`
}

// layerInfoVersion is LayerInfo's format.
const layerInfoVersion = 1

// readLayerInfo reads dir's manifest; os.ErrNotExist when it has none.
func readLayerInfo(dir string) (LayerInfo, error) {
	var info LayerInfo
	b, err := os.ReadFile(filepath.Join(dir, layerManifest))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Lower == "" {
		return info, fmt.Errorf("%s: not a layer manifest (want {\"version\":1,\"lower\":...})", layerManifest)
	}
	if info.Version != layerInfoVersion {
		return info, fmt.Errorf("%s: version %d, want %d", layerManifest, info.Version, layerInfoVersion)
	}
	return info, nil
}

// writeInfo writes the layer's manifest atomically.
func (l *Layer) writeInfo(info LayerInfo) error {
	info.Version, info.Lower = layerInfoVersion, l.Lower
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := writeFileAtomic(l.Dir, layerManifest, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("layer %q: %s: %s", l.Dir, layerManifest, identity.ErrnoText(err))
	}
	return nil
}

// RecordMount records in the layer's manifest the mountpoint (canonical)
// and the policy (its compiled spec) of the wsfs mount serving it: what
// the layer verbs outside a daemon apply (OpenLayerDir). The last mount's
// replaces an earlier one's.
func (l *Layer) RecordMount(mountpoint string, spec policy.Spec) error {
	return l.writeInfo(LayerInfo{Mountpoint: mountpoint, Policy: &spec})
}

// lockDir takes the layer directory's lock (layerLock): shared, or with
// exclusive alone; without waiting. Held elsewhere: ErrBusy, saying who
// holds it.
func (l *Layer) lockDir(exclusive bool) error {
	f, err := os.OpenFile(filepath.Join(l.Dir, layerLock), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("layer %q: %s: %s", l.Dir, layerLock, identity.ErrnoText(err))
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if err != unix.EWOULDBLOCK {
			return fmt.Errorf("layer %q: %s: %s", l.Dir, layerLock, identity.ErrnoText(err))
		}
		if exclusive {
			return errorf(CodeBusy, "layer %q: in use by a running mount (wsfs mount --layer, or a daemon's session); stop it first: the mount keeps the layer's baseline and kernel caches, which a change from another process would leave stale", l.Dir)
		}
		return errorf(CodeBusy, "layer %q: in use by a wsfs layer diff, commit or discard; start again once it is done", l.Dir)
	}
	l.lock = f
	return nil
}

// errLayerClosed is run's error once the layer is closed (its session
// removed or stopped).
var errLayerClosed = errors.New("the session's layer was closed (the session was removed or stopped)")

// run runs f with the layer's verbs serialized, unless the layer is closed
// (errLayerClosed).
func (l *Layer) run(f func() error) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	if l.closed {
		return errLayerClosed
	}
	return f()
}

// Upper returns the layer's upper directory (what the session changed).
func (l *Layer) Upper() string { return filepath.Join(l.Dir, layerUpper) }

// Merged returns the merged overlay's mountpoint (what the session sees).
func (l *Layer) Merged() string { return filepath.Join(l.Dir, layerMerged) }

// OpenLayer makes (when missing) the layer directory dir for the project
// lower (canonical, a directory) and mounts the overlay at dir/merged
// (Layer.Dir is dir's physical path),
// unless an overlay is mounted there already (a daemon that restarts finds
// its predecessor's: a kernel mount outlives the process). dir must be
// absolute, on a file system that supports trusted extended attributes
// and whiteouts (ext4, xfs, btrfs, tmpfs), and neither inside lower nor
// containing it. Needs root (CAP_SYS_ADMIN) and Linux 6.8 or later
// (overlayfs's "lowerdir+", which takes any path).
//
// Errors name dir and the rule; nothing is mounted after an error (the
// directories made stay, empty, for the caller's cleanup).
func OpenLayer(dir, lower string) (*Layer, error) {
	return openLayer(dir, lower, false)
}

// openLayer is OpenLayer, with exclusive the layer directory's lock taken
// alone (OpenLayerDir), else shared.
func openLayer(dir, lower string, exclusive bool) (*Layer, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("layer %q: must be an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if identity.Within(dir, lower) || identity.Within(lower, dir) {
		return nil, fmt.Errorf("layer %q: overlaps the project %s (the layer must be outside it)", dir, lower)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("layer %q: %s", dir, identity.ErrnoText(err))
	}
	// Its physical path: a mount serves the merged tree by it
	// (fusefs.Config.Backing, which must have no symlink on the way).
	given := dir
	dir, err := identity.Canonical(dir)
	if err != nil {
		return nil, fmt.Errorf("layer %q: %s", given, identity.ErrnoText(err))
	}
	if identity.Within(dir, lower) || identity.Within(lower, dir) {
		return nil, fmt.Errorf("layer %q: overlaps the project %s physically (the layer must be outside it)", given, lower)
	}
	l := &Layer{Dir: dir, Lower: lower, seen: map[string]bool{}}
	if err := l.lockDir(exclusive); err != nil {
		return nil, err
	}
	switch info, err := readLayerInfo(dir); {
	case errors.Is(err, os.ErrNotExist):
		// A new layer, or one made before manifests: it is this project's
		// from now on.
		if err := l.writeInfo(LayerInfo{}); err != nil {
			l.unlock()
			return nil, err
		}
	case err != nil:
		l.unlock()
		return nil, fmt.Errorf("layer %q: %v", dir, err)
	case info.Lower != lower:
		// Its upper directory holds another project's changes.
		l.unlock()
		return nil, fmt.Errorf("layer %q: made for the project %s, not %s", dir, info.Lower, lower)
	}
	ok := false
	defer func() {
		if !ok {
			l.unlock()
		}
	}()
	for _, d := range []string{layerUpper, layerWork, layerMerged} {
		err := os.Mkdir(filepath.Join(dir, d), 0o700)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("layer %q: %s: %s", dir, d, identity.ErrnoText(err))
		}
		if err == nil && d == layerUpper {
			// The merged root shows the upper root's owner and mode:
			// the project's.
			var st unix.Stat_t
			if err := unix.Stat(lower, &st); err != nil {
				return nil, fmt.Errorf("layer %q: project %s: %s", dir, lower, identity.ErrnoText(err))
			}
			up := filepath.Join(dir, d)
			if err := os.Lchown(up, int(st.Uid), int(st.Gid)); err != nil {
				return nil, fmt.Errorf("layer %q: %s", dir, identity.ErrnoText(err))
			}
			if err := os.Chmod(up, os.FileMode(st.Mode&0o777)|modeBits(st.Mode)); err != nil {
				return nil, fmt.Errorf("layer %q: %s", dir, identity.ErrnoText(err))
			}
		}
	}
	if err := l.mount(); err != nil {
		return nil, err
	}
	// What a commit or discard of a daemon that crashed left, and a
	// checkpoint it was making or removing.
	l.cleanStages()
	l.cleanCheckpoints()
	if err := l.loadBaseline(); err != nil {
		l.Close()
		return nil, err
	}
	ok = true
	return l, nil
}

// unlock releases the layer directory's lock (lockDir).
func (l *Layer) unlock() {
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
}

// mounted reports whether an overlay is mounted at the merged directory.
func (l *Layer) mounted() bool {
	e, ok, err := fusefs.MountAt(l.Merged())
	return err == nil && ok && e.FSType == "overlay"
}

// mount mounts the overlay at merged, unless one is there.
func (l *Layer) mount() error {
	if l.mounted() {
		return nil
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("layer %q: overlayfs: %s (needs root and a kernel with overlayfs)", l.Dir, identity.ErrnoText(err))
	}
	defer unix.Close(fsfd)
	set := [][2]string{
		{"lowerdir+", l.Lower},
		{"upperdir", l.Upper()},
		{"workdir", filepath.Join(l.Dir, layerWork)},
	}
	for _, kv := range append(set, overlayOptions...) {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return fmt.Errorf("layer %q: overlayfs option %s=%s: %s", l.Dir, kv[0], kv[1], identity.ErrnoText(err))
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("layer %q: overlayfs on %s: %s (the layer's directory must be on a file system with trusted xattrs, not inside an overlay)", l.Dir, l.Lower, identity.ErrnoText(err))
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("layer %q: fsmount: %s", l.Dir, identity.ErrnoText(err))
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, l.Merged(), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("layer %q: mount at %s: %s", l.Dir, l.Merged(), identity.ErrnoText(err))
	}
	return nil
}

// Close closes the baseline journal and unmounts the overlay (lazily: the
// session's server may still hold descriptors in it), after a verb that
// runs (run) has finished. The layer's directories stay.
func (l *Layer) Close() error {
	l.ops.Lock()
	defer l.ops.Unlock()
	l.closed = true
	l.mu.Lock()
	if l.jf != nil {
		l.jf.Close()
		l.jf = nil
	}
	l.mu.Unlock()
	defer l.unlock()
	if !l.mounted() {
		return nil
	}
	if err := unix.Unmount(l.Merged(), unix.MNT_DETACH); err != nil && err != unix.EINVAL {
		return fmt.Errorf("layer %q: unmount %s: %s", l.Dir, l.Merged(), identity.ErrnoText(err))
	}
	return nil
}

// Remove closes the layer and deletes its directory: what the session
// changed and did not commit is gone.
func (l *Layer) Remove() error {
	if err := l.Close(); err != nil {
		return err
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		return fmt.Errorf("layer %q: remove: %s", l.Dir, identity.ErrnoText(err))
	}
	return nil
}

// baseRec is one line of the baseline journal: what the project held at
// path P (relative to the project) just before the session's first write
// there, or, with Reset, after a commit or discard made the project and the
// layer agree. Absent: there was nothing at P.
type baseRec struct {
	P      string `json:"p"`
	Absent bool   `json:"absent,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"` // ns
	Ctime  int64  `json:"ctime,omitempty"` // ns
	Reset  bool   `json:"reset,omitempty"`
	Forget bool   `json:"forget,omitempty"`
	// UIno and UCtime (ns) identify the layer's own copy at P when a
	// commit applied it (Reset): while that copy is unchanged, what
	// differs from the project there is the host's change since, not the
	// session's (Diff does not list it, so no commit undoes it).
	UIno   uint64 `json:"uino,omitempty"`
	UCtime int64  `json:"uctime,omitempty"`
}

// committedCopy reports whether the upper object at rel (ust) is the copy a
// commit applied there (base's stamp), unchanged since.
func committedCopy(base map[string]baseRec, rel string, ust *unix.Stat_t) bool {
	b, ok := base[rel]
	return ok && b.UIno != 0 && b.UIno == ust.Ino && b.UCtime == ust.Ctim.Nano()
}

// loadBaseline reads the journal (a line cut short by a crash is the last
// and is ignored) and opens it for appending.
func (l *Layer) loadBaseline() error {
	p := filepath.Join(l.Dir, layerBaseline)
	recs, err := readBaseline(p)
	if err != nil {
		return fmt.Errorf("layer %q: baseline: %s", l.Dir, identity.ErrnoText(err))
	}
	for rel := range recs {
		l.seen[rel] = true
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("layer %q: baseline: %s", l.Dir, identity.ErrnoText(err))
	}
	l.jf = f
	return nil
}

// readBaseline returns the baseline in force per relative path: the first
// record, unless a later Reset replaced it or a Forget dropped it.
func readBaseline(p string) (map[string]baseRec, error) {
	out := map[string]baseRec{}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r baseRec
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.P == "" {
			continue
		}
		_, had := out[r.P]
		switch {
		case r.Forget:
			delete(out, r.P)
		case r.Reset || !had:
			out[r.P] = r
		}
	}
	return out, sc.Err()
}

// Before is fusefs.Config.BeforeWrite for a layered session: the first
// write at a path of the project records what the project holds there now
// (its identity and times, or its absence), so that commit can tell a host
// change made since (a conflict). Paths outside the project are ignored.
func (l *Layer) Before(p string) {
	if !identity.Within(p, l.Lower) || p == l.Lower {
		return
	}
	rel := p[len(l.Lower)+1:]
	if l.Lower == "/" {
		rel = p[1:]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[rel] || l.jf == nil {
		return
	}
	l.seen[rel] = true
	l.appendLocked(l.stateOf(rel, false))
}

// stateOf returns the project's state at rel as a baseline record.
func (l *Layer) stateOf(rel string, reset bool) baseRec {
	r := baseRec{P: rel, Reset: reset}
	st, err := lstatBeneath(l.Lower, rel)
	if err != nil {
		r.Absent = true
		return r
	}
	r.Ino, r.Mode, r.Size = st.Ino, st.Mode, st.Size
	r.Mtime, r.Ctime = st.Mtim.Nano(), st.Ctim.Nano()
	return r
}

// appendLocked writes r to the journal (l.mu held). The journal is not
// synced: it must outlive the daemon's process, not the machine (as the
// layer's own page cache).
func (l *Layer) appendLocked(r baseRec) {
	b, _ := json.Marshal(r)
	l.jf.Write(append(b, '\n'))
}

// reset records the project's state at rel as the new baseline (after a
// commit, with the stamp of the layer's copy there), or forgets rel (after
// a discard).
func (l *Layer) reset(rel string, forget bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jf == nil {
		return
	}
	if forget {
		delete(l.seen, rel)
		l.appendLocked(baseRec{P: rel, Forget: true})
		return
	}
	l.seen[rel] = true
	r := l.stateOf(rel, true)
	if ust, err := lstatBeneath(l.Upper(), rel); err == nil {
		r.UIno, r.UCtime = ust.Ino, ust.Ctim.Nano()
	}
	l.appendLocked(r)
}

// clearOpaque makes the layer's directory at rel merge with the project's
// again once a commit made the project hold it: overlayfs marks every
// directory made in the layer opaque, which would hide from the session,
// and make Diff list as deleted (and a commit delete), what the host adds
// there after the commit.
func (l *Layer) clearOpaque(rel string) error {
	fd, err := openBeneath(l.Upper(), rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Removexattr(procFd(fd), overlayXattr+"opaque"); err != nil && err != unix.ENODATA {
		return err
	}
	return nil
}

// conflict reports whether the project changed at rel since its baseline
// (no baseline: not known to conflict), with a one-line reason.
func (l *Layer) conflict(base map[string]baseRec, rel string) (bool, string) {
	b, ok := base[rel]
	if !ok {
		return false, ""
	}
	now := l.stateOf(rel, false)
	switch {
	case b.Absent && now.Absent:
		return false, ""
	case b.Absent:
		return true, "made on the host since the session's first change there"
	case now.Absent:
		return true, "removed on the host since the session's first change there"
	case b.Ino != now.Ino:
		return true, "replaced on the host since the session's first change there"
	case b.Mode != now.Mode || b.Size != now.Size || b.Mtime != now.Mtime || b.Ctime != now.Ctime:
		return true, "changed on the host since the session's first change there"
	}
	return false, ""
}

// openBeneath is openAt below the directory at the path dir: rel relative,
// no symlink in any component, never above dir.
func openBeneath(dir, rel string, flags int) (int, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	return openAt(dfd, rel, flags)
}

// lstatBeneath is lstat(2) of rel below dir: its parent opened beneath dir,
// then fstatat(2) of the last name without following it.
func lstatBeneath(dir, rel string) (*unix.Stat_t, error) {
	pfd, err := openBeneath(dir, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, filepath.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &st, nil
}

// isWhiteout reports whether st is an overlayfs whiteout (a 0/0 character
// device in the upper directory).
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// overlayXattr is the prefix of overlayfs's own attributes in the upper
// directory: never part of the session's changes.
const overlayXattr = "trusted.overlay."

// xattrsOf returns the extended attributes of the object open as fd
// (O_PATH is enough: read through its /proc/self/fd link), less
// overlayfs's own.
func xattrsOf(fd int) map[string]string {
	p := "/proc/self/fd/" + fmt.Sprint(fd)
	buf := make([]byte, 64<<10)
	// Followed: the link names the object (never a symlink here).
	n, err := unix.Listxattr(p, buf)
	out := map[string]string{}
	if err != nil {
		return out
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || strings.HasPrefix(name, overlayXattr) {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Getxattr(p, name, v)
		if err != nil {
			continue
		}
		out[name] = string(v[:m])
	}
	return out
}

// overlayAttr returns overlayfs's attribute name of the object at fd, or
// "" when it has none.
func overlayAttr(fd int, name string) string {
	v := make([]byte, 4096)
	n, err := unix.Getxattr("/proc/self/fd/"+fmt.Sprint(fd), overlayXattr+name, v)
	if err != nil {
		return ""
	}
	return string(v[:n])
}

// modeBits returns the set-id and sticky bits of a stat mode as
// os.FileMode bits.
func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}
