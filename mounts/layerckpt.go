package mounts

// Checkpoints of a layer (layer.go; issue 23): a copy of the layer's upper
// directory and its baseline, kept under <layer>/checkpoints/<name>, and a
// rollback that makes the merged overlay what the session saw when the
// checkpoint was taken (over today's project) while its processes run on.
//
// A checkpoint is copied descriptor-relatively from the raw upper
// directory (never following a symlink; the session writes that tree
// through the overlay), with every attribute overlayfs reads there
// (whiteouts, trusted.overlay.opaque, .redirect, .origin...), so that the
// copy is a valid overlayfs layer itself. It is made in a private
// ".tmp-*" directory and renamed to its name once complete: a crash leaves
// only a ".tmp-*", which OpenLayer removes.
//
// A rollback mounts the copy as the upper one of two lower layers over the
// project, read-only and detached (fsmount(2) without move_mount(2): the
// view is reached through its descriptor alone, is in no mount table, and
// goes with the descriptor, also when the daemon dies midway), and makes
// the merged overlay equal to that view on every path that can differ:
// the paths of the layer's changes and of the checkpoint's, and the whole
// tree below a directory either made, renamed or retyped. The merged
// overlay is changed through its mount only, as Discard does.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
)

// The checkpoints of a layer: <layer>/checkpoints/<name>/{upper,
// baseline.jsonl, meta.json}; a ".tmp-*" entry is one being made or
// removed.
const (
	layerCheckpoints = "checkpoints"
	ckptTmpPrefix    = ".tmp-"
	ckptMeta         = "meta.json"
)

// ckptMaxName bounds a checkpoint's name.
const ckptMaxName = 64

// ckptCopyTries bounds the copies of one file that changed while it was
// copied.
const ckptCopyTries = 5

// checkCheckpointName returns nil when name is a valid checkpoint name:
// 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.'.
func checkCheckpointName(name string) error {
	bad := name == "" || len(name) > ckptMaxName || name[0] == '.'
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			bad = true
		}
	}
	if bad {
		return errorf(CodeInvalid, "checkpoint name %q: must be 1 to %d of A-Z a-z 0-9 . _ - and not start with '.'", name, ckptMaxName)
	}
	return nil
}

// checkpointsDir returns the layer's checkpoint directory.
func (l *Layer) checkpointsDir() string { return filepath.Join(l.Dir, layerCheckpoints) }

// cleanCheckpoints removes what a checkpoint or a removal of one that a
// crash interrupted left (its ".tmp-*" directory).
func (l *Layer) cleanCheckpoints() {
	ents, err := os.ReadDir(l.checkpointsDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ckptTmpPrefix) {
			os.RemoveAll(filepath.Join(l.checkpointsDir(), e.Name()))
		}
	}
}

// ckptMetaFile is a checkpoint's meta.json.
type ckptMetaFile struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
}

// Checkpoint copies the layer's upper directory and its baseline in force
// into a new checkpoint called name (checkCheckpointName). The session
// goes on writing meanwhile: each file is copied whole from one state
// (copied again when it changed during the copy), the tree as the walk
// finds it.
//
// Errors: CodeInvalid (a bad name), CodeExists (a checkpoint of that name),
// else the file system's; nothing is left of a checkpoint that failed.
func (l *Layer) Checkpoint(name string) (api.Checkpoint, error) {
	if err := checkCheckpointName(name); err != nil {
		return api.Checkpoint{}, err
	}
	dir := l.checkpointsDir()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return api.Checkpoint{}, fmt.Errorf("layer %q: %s: %s", l.Dir, layerCheckpoints, identity.ErrnoText(err))
	}
	if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
		return api.Checkpoint{}, errorf(CodeExists, "checkpoint %q: exists (remove it first)", name)
	}
	tmp := filepath.Join(dir, ckptTmpPrefix+randName())
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return api.Checkpoint{}, fmt.Errorf("layer %q: checkpoint %q: %s", l.Dir, name, identity.ErrnoText(err))
	}
	meta, err := l.fillCheckpoint(tmp, name)
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, filepath.Join(dir, name), unix.RENAME_NOREPLACE)
		if err == unix.EEXIST {
			os.RemoveAll(tmp)
			return api.Checkpoint{}, errorf(CodeExists, "checkpoint %q: exists (remove it first)", name)
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return api.Checkpoint{}, fmt.Errorf("layer %q: checkpoint %q: %s", l.Dir, name, identity.ErrnoText(err))
	}
	return api.Checkpoint{Name: meta.Name, Created: meta.Created, Files: meta.Files, Bytes: meta.Bytes}, nil
}

// fillCheckpoint writes the checkpoint's upper, baseline.jsonl and
// meta.json into tmp.
func (l *Layer) fillCheckpoint(tmp, name string) (ckptMetaFile, error) {
	meta := ckptMetaFile{Name: name, Created: time.Now().UTC().Truncate(time.Second)}
	src, err := openNoatime(unix.AT_FDCWD, l.Upper(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return meta, err
	}
	defer unix.Close(src)
	dst, err := unix.Open(tmp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return meta, err
	}
	defer unix.Close(dst)
	c := &ckptCopier{links: map[objID]string{}, dstRoot: dst}
	if err := c.copyEntry(src, ".", dst, layerUpper, layerUpper); err != nil {
		return meta, err
	}
	meta.Files, meta.Bytes = c.files, c.bytes
	base, err := readBaseline(filepath.Join(l.Dir, layerBaseline))
	if err != nil {
		return meta, err
	}
	if err := os.WriteFile(filepath.Join(tmp, layerBaseline), baselineJSONL(base), 0o600); err != nil {
		return meta, err
	}
	b, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(tmp, ckptMeta), append(b, '\n'), 0o600); err != nil {
		return meta, err
	}
	return meta, nil
}

// baselineJSONL returns the records of base as journal lines, by path.
func baselineJSONL(base map[string]baseRec) []byte {
	var out []byte
	for _, p := range slices.Sorted(mapsKeys(base)) {
		b, _ := json.Marshal(base[p])
		out = append(append(out, b...), '\n')
	}
	return out
}

// mapsKeys returns an iterator over m's keys.
func mapsKeys(m map[string]baseRec) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ckptCopier is one copy of an upper directory into a checkpoint.
type ckptCopier struct {
	links   map[objID]string // a source object of several links → its first copy (relative to dstRoot)
	dstRoot int              // the checkpoint's directory
	files   int              // objects copied, the root excepted
	bytes   int64            // bytes of regular files (each object once)
}

// copyEntry copies the object name in the source directory spd (open
// O_RDONLY; "." for spd itself) to dname in the destination directory dpd
// (O_PATH), rel being its path below dstRoot: its type, content or link
// text or device number, owner, mode, every extended attribute and its
// access and modification times; a directory with all it holds; a second
// link of an object copied already as a link to that copy. An entry gone
// meanwhile is no error (nothing is copied).
func (c *ckptCopier) copyEntry(spd int, name string, dpd int, dname, rel string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(spd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT && name != "." {
			return nil
		}
		return err
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	id := objID{st.Dev, st.Ino}
	if !isDir && st.Nlink > 1 {
		if first, ok := c.links[id]; ok {
			c.files++
			return unix.Linkat(c.dstRoot, first, dpd, dname, 0)
		}
	}
	if name != "." {
		c.files++
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dpd, dname, 0o700); err != nil {
			return err
		}
		sfd, err := openNoatime(spd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP {
			return nil // gone or replaced since: the empty directory stays
		}
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		dfd, err := unix.Openat(dpd, dname, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		if st, err = fstatFd(sfd); err != nil {
			return err
		}
		names, err := readOpenDir(sfd)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := c.copyEntry(sfd, n, dfd, n, rel+"/"+n); err != nil {
				return err
			}
		}
		// Attributes last: making the entries changed the times.
		return copyAllMeta(sfd, ".", &st, dfd, ".")
	case unix.S_IFREG:
		got, err := c.copyFile(spd, name, dpd, dname)
		if err == errVanished {
			c.files--
			return nil
		}
		if err != nil {
			return err
		}
		st = got
		c.bytes += st.Size
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(spd, name, buf)
		if err == unix.ENOENT {
			c.files--
			return nil
		}
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(string(buf[:n]), dpd, dname); err != nil {
			return err
		}
	default:
		// Whiteouts (0/0 character devices), FIFOs, sockets, devices.
		if err := unix.Mknodat(dpd, dname, st.Mode&(unix.S_IFMT|0o7777), int(st.Rdev)); err != nil {
			return err
		}
	}
	if err := copyAllMeta(spd, name, &st, dpd, dname); err != nil {
		return err
	}
	if !isDir && st.Nlink > 1 {
		c.links[id] = rel
	}
	return nil
}

// readOpenDir returns the names in the directory open for reading as fd
// (through a duplicate, so its own open flags, O_NOATIME, apply), sorted.
func readOpenDir(fd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// openNoatime is openat(2) of name in dir with flags and O_NOATIME (a
// copy leaves the source's access times as they were), without it where
// the file system refuses it.
func openNoatime(dir int, name string, flags int) (int, error) {
	fd, err := unix.Openat(dir, name, flags|unix.O_NOATIME|unix.O_CLOEXEC, 0)
	if err == unix.EPERM {
		fd, err = unix.Openat(dir, name, flags|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// openRegularNoatime is openRegular (the object checked through an
// O_PATH descriptor before it is opened) with O_NOATIME.
func openRegularNoatime(dir int, name string) (*os.File, unix.Stat_t, error) {
	pfd, err := openAt(dir, name, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	defer unix.Close(pfd)
	st, err := fstatFd(pfd)
	if err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, errNotRegular
	}
	fd, err := openNoatime(unix.AT_FDCWD, procFd(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), name), st, nil
}

// ckptCopied, when set (by tests), is called after each copy of a
// checkpoint's file, before its source is looked at again: a test writes
// the source there, as a session would meanwhile.
var ckptCopied func(name string)

// errVanished is copyFile's error for a file removed or retyped while it
// was about to be copied.
var errVanished = errors.New("gone while copied")

// copyFile copies the regular file name in spd to a new file dname in dpd
// (FICLONE, else copy_file_range(2), else read and write), again while
// the source's size, modification or change time differ after the copy
// from before it (a file the session wrote meanwhile), ckptCopyTries
// times at most. It returns the source's stat that the copy holds.
func (c *ckptCopier) copyFile(spd int, name string, dpd int, dname string) (unix.Stat_t, error) {
	for range ckptCopyTries {
		in, before, err := openRegularNoatime(spd, name)
		if err == unix.ENOENT || err == errNotRegular {
			return before, errVanished
		}
		if err != nil {
			return before, err
		}
		ofd, err := unix.Openat(dpd, dname, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			in.Close()
			return before, err
		}
		err = cloneInto(ofd, in)
		unix.Close(ofd)
		if ckptCopied != nil {
			ckptCopied(name)
		}
		after, serr := fstatFd(int(in.Fd()))
		in.Close()
		if err != nil {
			return before, err
		}
		if serr != nil {
			return before, serr
		}
		if after.Size == before.Size && after.Mtim == before.Mtim && after.Ctim == before.Ctim {
			return after, nil
		}
	}
	return unix.Stat_t{}, fmt.Errorf("%s: changed while copied, %d times", name, ckptCopyTries)
}

// cloneInto makes the file open as ofd (empty) hold in's content (read
// from its start to its end, whatever its size is by then): a reflink
// (FICLONE) where the file system shares extents, else copy_file_range(2),
// else a plain copy.
func cloneInto(ofd int, in *os.File) error {
	ifd := int(in.Fd())
	if unix.IoctlFileClone(ofd, ifd) == nil {
		return nil
	}
	var copied int64
	for {
		n, err := unix.CopyFileRange(ifd, nil, ofd, nil, 1<<30, 0)
		if err != nil {
			if copied == 0 && (err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) {
				break // a plain copy below
			}
			return err
		}
		if n == 0 {
			return nil
		}
		copied += int64(n)
	}
	// Through a duplicate: the caller keeps ofd.
	dup, err := unix.Dup(ofd)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(dup), "copy")
	defer out.Close()
	_, err = io.Copy(out, in)
	return err
}

// xattrList returns every extended attribute of the object at p
// (overlayfs's own included); with follow a last symlink is followed (a
// /proc/self/fd link, which names the object), else not.
func xattrList(p string, follow bool) (map[string][]byte, error) {
	list, get := unix.Llistxattr, unix.Lgetxattr
	if follow {
		list, get = unix.Listxattr, unix.Getxattr
	}
	sz, err := list(p, nil)
	if err != nil {
		if err == unix.ENOTSUP {
			return nil, nil
		}
		return nil, err
	}
	if sz == 0 {
		return nil, nil
	}
	buf := make([]byte, sz)
	n, err := list(p, buf)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range strings.Split(string(buf[:n]), "\x00") {
		if k == "" {
			continue
		}
		vs, err := get(p, k, nil)
		if err == unix.ENODATA {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("getxattr %s: %w", k, err)
		}
		v := make([]byte, vs)
		m, err := get(p, k, v)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s: %w", k, err)
		}
		out[k] = v[:m]
	}
	return out, nil
}

// copyAllMeta gives the object dname in dpd (the daemon's own tree) the
// owner, every extended attribute, the mode and the access and
// modification times of the object name in spd (st), both reached through
// their parent's descriptor ("." is the directory itself), never following
// a last symlink.
func copyAllMeta(spd int, name string, st *unix.Stat_t, dpd int, dname string) error {
	flags := unix.AT_SYMLINK_NOFOLLOW
	dn, sn := dname, name
	if dname == "." {
		dn = ""
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(dpd, dn, int(st.Uid), int(st.Gid), flags); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	// The object by its parent's descriptor and its name, not followed;
	// "." by its own descriptor's link, followed (to the object).
	sp, dp := procFd(spd)+"/"+sn, procFd(dpd)+"/"+dn
	if name == "." {
		sp = procFd(spd)
	}
	set := unix.Lsetxattr
	if dname == "." {
		dp, set = procFd(dpd), unix.Setxattr
	}
	xs, err := xattrList(sp, name == ".")
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range xs {
			if !yield(k) {
				return
			}
		}
	}) {
		if err := set(dp, k, xs[k], 0); err != nil {
			return fmt.Errorf("setxattr %s: %w", k, err)
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		// After chown (which clears the set-id bits) and the ACLs.
		if err := unix.Fchmodat(dpd, dn, st.Mode&0o7777, flags&^unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(dpd, dn, ts, flags); err != nil {
		return fmt.Errorf("utimes: %w", err)
	}
	return nil
}

// Checkpoints lists the layer's checkpoints, oldest first (then by name).
func (l *Layer) Checkpoints() ([]api.Checkpoint, error) {
	out := []api.Checkpoint{}
	ents, err := os.ReadDir(l.checkpointsDir())
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("layer %q: %s: %s", l.Dir, layerCheckpoints, identity.ErrnoText(err))
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := l.checkpointMeta(e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, api.Checkpoint{Name: m.Name, Created: m.Created, Files: m.Files, Bytes: m.Bytes})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// checkpointMeta reads checkpoint name's meta.json; CodeNotFound when
// there is no such checkpoint.
func (l *Layer) checkpointMeta(name string) (ckptMetaFile, error) {
	var m ckptMetaFile
	if err := checkCheckpointName(name); err != nil {
		return m, err
	}
	b, err := os.ReadFile(filepath.Join(l.checkpointsDir(), name, ckptMeta))
	if errors.Is(err, os.ErrNotExist) {
		return m, errorf(CodeNotFound, "checkpoint %q: no such checkpoint", name)
	}
	if err != nil {
		return m, fmt.Errorf("layer %q: checkpoint %q: %s", l.Dir, name, identity.ErrnoText(err))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("layer %q: checkpoint %q: %s: %v", l.Dir, name, ckptMeta, err)
	}
	m.Name = name
	return m, nil
}

// DeleteCheckpoint removes checkpoint name: renamed to a ".tmp-*" name
// first (so a crash midway leaves what OpenLayer removes), then deleted.
// Errors: CodeInvalid (a bad name), CodeNotFound.
func (l *Layer) DeleteCheckpoint(name string) error {
	if _, err := l.checkpointMeta(name); err != nil {
		return err
	}
	dir := l.checkpointsDir()
	tmp := filepath.Join(dir, ckptTmpPrefix+randName())
	if err := os.Rename(filepath.Join(dir, name), tmp); err != nil {
		return fmt.Errorf("layer %q: checkpoint %q: %s", l.Dir, name, identity.ErrnoText(err))
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("layer %q: checkpoint %q: %s", l.Dir, name, identity.ErrnoText(err))
	}
	return nil
}

// openView mounts the view of checkpoint dir (its upper over the
// project), read-only and detached, and returns its root's descriptor:
// close it to unmount.
func (l *Layer) openView(dir string) (int, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlayfs: %s", identity.ErrnoText(err))
	}
	defer unix.Close(fsfd)
	set := [][2]string{
		// The first lowerdir+ is the top layer.
		{"lowerdir+", filepath.Join(dir, layerUpper)},
		{"lowerdir+", l.Lower},
		// The checkpoint's renamed directories (redirects), followed.
		{"redirect_dir", "follow"},
		{"index", "off"}, {"nfs_export", "off"}, {"metacopy", "off"}, {"xino", "auto"},
	}
	for _, kv := range set {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("checkpoint view: overlayfs option %s=%s: %s", kv[0], kv[1], identity.ErrnoText(err))
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("checkpoint view: overlayfs: %s", identity.ErrnoText(err))
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("checkpoint view: fsmount: %s", identity.ErrnoText(err))
	}
	return mfd, nil
}

// Rollback makes the merged overlay what the session saw when checkpoint
// name was taken, over the project as it is now, and the baseline the
// checkpoint's. Paths equal in both are not touched (a process's open
// files and directories there go on as they are); a path the checkpoint
// lacks is removed (rm -r), one of another type replaced, one whose
// content differs replaced by a copy made apart and renamed over it, one
// whose attributes alone differ changed in place. The session's processes
// run on: a directory one of them is in that is removed gives it ENOENT
// as after an rm -rf. Applied lists the paths changed, parents first; a
// path that could not be changed is listed in Refused (and what lies below
// it is not looked at).
//
// Errors: CodeInvalid (a bad name), CodeNotFound (no such checkpoint), else
// the file system's.
func (l *Layer) Rollback(name string) (api.RollbackResult, error) {
	res := api.RollbackResult{Checkpoint: name, Applied: []string{}}
	if _, err := l.checkpointMeta(name); err != nil {
		return res, err
	}
	dir := filepath.Join(l.checkpointsDir(), name)
	ckBase, err := readBaseline(filepath.Join(dir, layerBaseline))
	if err != nil {
		return res, fmt.Errorf("layer %q: checkpoint %q: baseline: %s", l.Dir, name, identity.ErrnoText(err))
	}
	view, err := l.openView(dir)
	if err != nil {
		return res, fmt.Errorf("layer %q: checkpoint %q: %v", l.Dir, name, err)
	}
	defer unix.Close(view)
	cur, err := l.changesOf(l.Upper())
	if err != nil {
		return res, err
	}
	then, err := l.changesOf(filepath.Join(dir, layerUpper))
	if err != nil {
		return res, err
	}
	merged, err := openRoot(l.Merged())
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, l.Merged(), identity.ErrnoText(err))
	}
	defer unix.Close(merged)
	sl, err := l.openStages(stageMerged)
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, layerStages, identity.ErrnoText(err))
	}
	r := &roller{view: view, merged: merged, sl: sl, res: &res, now: originsOf(cur), then: originsOf(then), rights: l.rights(),
		copy: &linkedCopy{src: view, dst: merged, sl: sl}}
	paths := map[string]bool{".": true}
	deep := map[string]bool{}
	for _, c := range append(cur, then...) {
		paths[c.Path] = true
		if c.From != "" {
			paths[c.From] = true
		}
		if c.Type == "dir" && (c.Kind == ChangeAdded || c.Kind == ChangeRenamed || c.Kind == ChangeTypeChanged) {
			deep[c.Path] = true
		}
	}
	r.renames(then, cur)
	list := make([]api.Change, 0, len(paths))
	for p := range paths {
		list = append(list, api.Change{Path: p})
	}
	sortChanges(list)
	var done []string // paths whose whole tree was handled
	for _, c := range list {
		if c.Path != "." && skippedBy(c.Path, done) != "" {
			continue
		}
		if r.path(c.Path, deep[c.Path]) {
			done = append(done, c.Path)
		}
	}
	l.endStages(sl)
	l.restoreBaseline(ckBase)
	return res, nil
}

// restoreBaseline makes base (a checkpoint's) the baseline in force: a
// Forget record for each path recorded now that base lacks, then each of
// base's records again as a Reset.
func (l *Layer) restoreBaseline(base map[string]baseRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.jf == nil {
		return
	}
	for _, rel := range slices.Sorted(func(yield func(string) bool) {
		for k := range l.seen {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := base[rel]; !ok {
			l.appendLocked(baseRec{P: rel, Forget: true})
		}
	}
	l.seen = map[string]bool{}
	for _, rel := range slices.Sorted(mapsKeys(base)) {
		r := base[rel]
		// A Reset, so that it replaces what is in force; the stamp of a
		// committed copy stays: it names an upper object by inode and
		// change time, which a copy the rollback made cannot match.
		r.Reset, r.Forget = true, false
		l.appendLocked(r)
		l.seen[rel] = true
	}
}

// roller is one rollback's walk: the view (what to have) and the merged
// overlay (what is changed).
type roller struct {
	view, merged int
	sl           *stageLog
	res          *api.RollbackResult
	// now and then are the origins of the directories made or renamed
	// in the merged overlay and in the checkpoint (originsOf).
	now, then map[string]string
	// copy puts the view's objects in the merged overlay, hard links
	// linked.
	copy *linkedCopy
	// rights are the session users' (layerrights.go): what the rollback
	// removes, renames or changes in the merged overlay is what they
	// could; the checkpoint's objects are copied by the daemon.
	rights rights
}

// originsOf returns, per directory path that changes lists as made anew
// or renamed, what it merges with: "from:" and the project's directory
// it was renamed from, or "new" (nothing of the project's). A directory
// not listed merges with the project's at its own path.
func originsOf(changes []api.Change) map[string]string {
	out := map[string]string{}
	for _, c := range changes {
		if c.Type != "dir" {
			continue
		}
		switch {
		case c.From != "":
			out[c.Path] = "from:" + c.From
		case c.Kind == ChangeAdded || c.Kind == ChangeTypeChanged:
			out[c.Path] = "new"
		}
	}
	return out
}

// renames gives the merged overlay the checkpoint's renamed directories
// by renaming there (overlayfs records the redirect), not by copying
// their trees: a directory that merges with the same project directory
// (renamed elsewhere since, or still at its own path and unchanged) is
// renamed into place, so that what the session did not change below it
// stays the project's and Diff lists the rename again. A directory no
// rename can give is left to the walk, which copies it.
func (r *roller) renames(then, cur []api.Change) {
	changed := map[string]bool{} // paths the layer changes other than in attributes
	for _, c := range cur {
		if c.Kind != ChangeModified {
			changed[c.Path] = true
		}
	}
	for _, c := range then {
		if c.Type != "dir" || c.From == "" || r.now[c.Path] == r.then[c.Path] {
			continue
		}
		want := r.then[c.Path]
		src := ""
		for p, o := range r.now {
			if o == want && p != c.Path {
				src = p
				break
			}
		}
		if src == "" && !changed[c.From] && skippedBy(c.From, slices.Collect(mapKeysBool(changed))) == "" {
			if st, ok, err := lstatAtRoot(r.merged, c.From); err == nil && ok && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				src = c.From
			}
		}
		if src == "" || identity.Within(c.Path, src) || identity.Within(src, c.Path) {
			continue // nothing to rename, or one inside the other
		}
		if err := removeNonDirAs(r.rights, r.merged, c.Path); err != nil {
			continue
		}
		if err := r.rights.do(ownerAt(r.merged, src), func() error { return renameAt(r.merged, src, c.Path) }); err != nil {
			continue
		}
		delete(r.now, src)
		r.now[c.Path] = want
		changed[src] = true
		r.res.Applied = append(r.res.Applied, src, c.Path)
	}
}

// mapKeysBool returns an iterator over m's keys.
func mapKeysBool(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// renameAt renames from to to below root (RENAME_NOREPLACE), both
// parents opened beneath root.
func renameAt(root int, from, to string) error {
	fpd, fname, err := parentAt(root, from)
	if err != nil {
		return err
	}
	defer unix.Close(fpd)
	tpd, tname, err := parentAt(root, to)
	if err != nil {
		return err
	}
	defer unix.Close(tpd)
	return unix.Renameat2(fpd, fname, tpd, tname, unix.RENAME_NOREPLACE)
}

// lstatAtRoot is fstatat(2) of rel below root without following it ("."
// is root itself); ok false when it does not exist.
func lstatAtRoot(root int, rel string) (unix.Stat_t, bool, error) {
	var st unix.Stat_t
	if rel == "." || rel == "" {
		err := unix.Fstat(root, &st)
		return st, err == nil, err
	}
	pd, name, err := parentAt(root, rel)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(pd)
	err = unix.Fstatat(pd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return st, false, nil
	}
	return st, err == nil, err
}

// path makes the merged overlay equal to the view at rel (with deep, the
// whole tree below a directory too); it reports whether rel's whole tree
// was handled (removed, copied whole, compared deep, or refused).
func (r *roller) path(rel string, deep bool) bool {
	refuse := func(err error) bool {
		r.res.Refused = append(r.res.Refused, api.PathError{Path: rel, Reason: identity.ErrnoText(err)})
		return true
	}
	vst, vok, err := lstatAtRoot(r.view, rel)
	if err != nil {
		return refuse(err)
	}
	mst, mok, err := lstatAtRoot(r.merged, rel)
	if err != nil {
		return refuse(err)
	}
	applied := func() { r.res.Applied = append(r.res.Applied, rel) }
	if layerActing != nil && (vok || mok) {
		layerActing(rel)
	}
	switch {
	case !vok && !mok:
		return true
	case !vok:
		if err := removeNonDirAs(r.rights, r.merged, rel); err != nil {
			return refuse(err)
		}
		applied()
		return true
	case !mok || vst.Mode&unix.S_IFMT != mst.Mode&unix.S_IFMT || isDevice(&vst) && vst.Rdev != mst.Rdev ||
		vst.Mode&unix.S_IFMT == unix.S_IFDIR && r.now[rel] != r.then[rel]:
		// Missing, of another type, or a directory that merges with
		// another of the project's (or with none): made anew.
		if rel == "." {
			return refuse(errors.New("the root is of another type"))
		}
		if mok {
			if err := removeNonDirAs(r.rights, r.merged, rel); err != nil {
				return refuse(err)
			}
		}
		if err := r.copy.put(rel, true); err != nil {
			return refuse(err)
		}
		applied()
		return true
	}
	content, meta, err := r.differs(rel, &vst, &mst)
	if err != nil {
		return refuse(err)
	}
	switch {
	case content:
		err = r.copy.put(rel, false)
	case meta:
		err = r.rights.do(mst.Uid, func() error { return metaAt(r.view, r.merged, rel, objID{}) })
	}
	if err != nil {
		return refuse(err)
	}
	if content || meta {
		applied()
	}
	if !deep || vst.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	vn, err := namesAt(r.view, rel)
	if err != nil {
		return refuse(err)
	}
	mn, err := namesAt(r.merged, rel)
	if err != nil {
		return refuse(err)
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(append(vn, mn...)))) {
		r.path(relJoin(relOf(rel), n), true)
	}
	return true
}

// relOf is rel with the root as "".
func relOf(rel string) string {
	if rel == "." {
		return ""
	}
	return rel
}

// isDevice reports whether st is a character or block device.
func isDevice(st *unix.Stat_t) bool {
	t := st.Mode & unix.S_IFMT
	return t == unix.S_IFCHR || t == unix.S_IFBLK
}

// namesAt returns the names in the directory rel below root, sorted.
func namesAt(root int, rel string) ([]string, error) {
	fd, err := openAt(root, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readNames(fd)
}

// differs reports whether the merged overlay's object at rel (mst) differs
// from the view's (vst), of the same type: in content or link text, and
// in mode, owner or extended attributes (overlayfs's own aside).
func (r *roller) differs(rel string, vst, mst *unix.Stat_t) (content, meta bool, err error) {
	switch vst.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		vf, vs, err := openRegular(r.view, rel)
		if err != nil {
			return false, false, err
		}
		defer vf.Close()
		mf, ms, err := openRegular(r.merged, rel)
		if err != nil {
			return false, false, err
		}
		defer mf.Close()
		same, err := sameContent(vf, mf, vs.Size, ms.Size)
		if err != nil {
			return false, false, err
		}
		content = !same
	case unix.S_IFLNK:
		vt, verr := readlinkAt(r.view, rel)
		mt, merr := readlinkAt(r.merged, rel)
		if err := errors.Join(verr, merr); err != nil {
			return false, false, err
		}
		content = vt != mt
	}
	if vst.Uid != mst.Uid || vst.Gid != mst.Gid {
		meta = true
	}
	if vst.Mode&unix.S_IFMT != unix.S_IFLNK {
		if vst.Mode&0o7777 != mst.Mode&0o7777 {
			meta = true
		}
		vx, verr := xattrsAtRoot(r.view, rel)
		mx, merr := xattrsAtRoot(r.merged, rel)
		if err := errors.Join(verr, merr); err != nil {
			return false, false, err
		}
		if !mapsEqual(vx, mx) {
			meta = true
		}
	}
	return content, meta, nil
}

// readlinkAt reads the symlink rel below root.
func readlinkAt(root int, rel string) (string, error) {
	pd, name, err := parentAt(root, rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(pd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(pd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// xattrsAtRoot returns the extended attributes of the non-symlink rel
// below root, less overlayfs's own.
func xattrsAtRoot(root int, rel string) (map[string]string, error) {
	fd, err := openAt(root, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return xattrsOf(fd), nil
}
