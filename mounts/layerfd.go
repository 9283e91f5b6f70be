package mounts

// Descriptor-relative file access for diff, commit and discard
// (layerdiff.go). The daemon runs them as root on trees a session's user
// may change under it (the upper directory, through the mount) or write
// itself (the project, the merged overlay), so each one works on a
// descriptor of the very object it means: directories walked with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), objects opened
// O_PATH|O_NOFOLLOW, checked by fstat and changed through that descriptor
// (fchown, fchmodat2, utimensat, the xattr calls on /proc/self/fd), a
// file read only when it is a regular one. A new regular file is written
// as an O_TMPFILE and given its attributes before it has a name; it, and
// any other new object, reaches its place by a rename from a private
// directory (root's, mode 0700) beside the target, so nothing a session
// can rename or replace is ever changed by name. The private directories
// are journaled (layerstage.go): one renamed within its directory, or left
// by a crash, is found again and removed.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// stagePrefix begins the name of the private directory a commit or
// discard makes beside its target.
const stagePrefix = ".wsfs-commit-"

// openRoot opens the directory dir as an O_PATH descriptor, the root of
// the descriptor walks below.
func openRoot(dir string) (int, error) {
	return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// openAt opens rel below the directory open as root (no symlink in any
// component, never above root; "" or "." is root itself) with flags.
func openAt(root int, rel string, flags int) (int, error) {
	if rel == "" || rel == "." {
		return unix.Openat(root, ".", flags|unix.O_CLOEXEC, 0)
	}
	for {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
}

// parentAt opens rel's parent directory below root (O_PATH) and returns
// it with rel's last name.
func parentAt(root int, rel string) (int, string, error) {
	pd, err := openAt(root, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return pd, filepath.Base(rel), nil
}

// fstatFd is fstat(2).
func fstatFd(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

// procFd is the /proc/self/fd link of fd (a path to the very object).
func procFd(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// errNotRegular is openRegular's error for an object that is no regular
// file (a FIFO, a device, a socket: never opened).
var errNotRegular = errors.New("not a regular file")

// openRegular opens the regular file rel below root for reading, without
// opening anything else: the object is first opened O_PATH|O_NOFOLLOW and
// checked, then reopened through its descriptor, so a name swapped for a
// FIFO or a device never blocks or wakes a driver. It returns the file
// and its fstat; errNotRegular (with the object's stat) for another type.
func openRegular(root int, rel string) (*os.File, unix.Stat_t, error) {
	pfd, err := openAt(root, rel, unix.O_PATH|unix.O_NOFOLLOW)
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
	fd, err := unix.Open(procFd(pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), rel), st, nil
}

// setMeta gives the object open as dfd (any descriptor, O_PATH too) the
// owner, mode, extended attributes (less overlayfs's own) and modification
// time of the object st describes, open as sfd; a symlink only its owner.
func setMeta(sfd int, st *unix.Stat_t, dfd int) error { return setAttrs(sfd, st, dfd, true) }

// setAttrs is setMeta, the modification time only with times. It changes
// only what differs (a user who does not own the object may still set an
// extended attribute it may write; chown(2) and chmod(2) to the values it
// has would be refused).
func setAttrs(sfd int, st *unix.Stat_t, dfd int, times bool) error {
	dt, err := fstatFd(dfd)
	if err != nil {
		return err
	}
	if dt.Uid != st.Uid || dt.Gid != st.Gid {
		uid, gid := -1, -1
		if dt.Uid != st.Uid {
			uid = int(st.Uid)
		}
		if dt.Gid != st.Gid {
			gid = int(st.Gid)
		}
		if err := unix.Fchownat(dfd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
		// chown(2) may have cleared the set-id bits.
		if dt, err = fstatFd(dfd); err != nil {
			return err
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil
	}
	// fchmodat2 on the descriptor: the object itself, whatever its name
	// is now.
	if dt.Mode&0o7777 != st.Mode&0o7777 {
		if err := unix.Fchmodat(dfd, "", st.Mode&0o7777, unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	want, have := xattrsOf(sfd), xattrsOf(dfd)
	dp := procFd(dfd)
	for k := range have {
		if _, ok := want[k]; !ok {
			if err := unix.Removexattr(dp, k); err != nil {
				return fmt.Errorf("removexattr %s: %w", k, err)
			}
		}
	}
	for k, v := range want {
		if have[k] != v {
			if err := unix.Setxattr(dp, k, []byte(v), 0); err != nil {
				return fmt.Errorf("setxattr %s: %w", k, err)
			}
		}
	}
	if !times || dt.Mtim == st.Mtim {
		return nil
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, st.Mtim}
	if err := unix.UtimesNanoAt(dfd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("utimes: %w", err)
	}
	return nil
}

// stageMade, when set (by tests), is called with each private directory
// made, before it is used: a test renames it away there, or stops the
// verb as a crash would.
var stageMade func(pd int, name string)

// threadFsuid returns the calling thread's file system uid (setfsuid(2)
// with an invalid id changes nothing and returns it): the daemon's, or a
// session user's on a thread of fusefs.RunAs.
func threadFsuid() uint32 {
	cur, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(^uint32(0)), 0, 0)
	return uint32(cur)
}

// stage is a private directory beside a target: made by the daemon (root)
// with mode 0700 in the target's parent, so no session can write in it;
// or, for a verb acting with a session user's rights (layerrights.go), by
// that user, so that what the verb does in it is the user's own.
type stage struct {
	pd   int    // the parent directory (not owned)
	name string // the stage's name in pd when made
	fd   int    // the stage directory
	log  *stageLog
}

// newStage makes a private directory in pd and opens it, checking that
// what it opened is the directory it made (owned by the daemon, mode
// 0700): a session may rename entries of pd, never write in such a
// directory. sl records it, before it is made and once it is open.
func newStage(pd int, sl *stageLog) (*stage, error) {
	for range 16 {
		name := stagePrefix + randName()
		if sl != nil {
			sl.add(stageRec{N: name, T: sl.tree, D: sl.dir})
		}
		if err := unix.Mkdirat(pd, name, 0o700); err != nil {
			sl.add(stageRec{N: name, Done: true})
			if err == unix.EEXIST {
				continue
			}
			return nil, fmt.Errorf("mkdir %s: %w", name, err)
		}
		fd, err := unix.Openat(pd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch err {
		case nil:
		case unix.ENOENT, unix.ELOOP, unix.ENOTDIR:
			// Renamed away or replaced: what is there now is not ours
			// to remove.
			return nil, errStageLost
		default:
			unix.Unlinkat(pd, name, unix.AT_REMOVEDIR)
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		s := &stage{pd: pd, name: name, fd: fd, log: sl}
		st, err := fstatFd(fd)
		// The set-group-ID bit may come from pd; the rest must be ours
		// (the user's whose rights the verb acts with: layerrights.go).
		if err != nil || st.Uid != threadFsuid() || st.Mode&0o5777 != 0o700 {
			unix.Close(fd)
			return nil, errStageLost
		}
		if sl != nil {
			r := stageRec{N: name, Dev: st.Dev, Ino: st.Ino, U: st.Uid}
			if h, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil {
				r.HT, r.H = h.Type(), h.Bytes()
			}
			sl.add(r)
		}
		if stageMade != nil {
			stageMade(pd, name)
		}
		return s, nil
	}
	return nil, errors.New("no free private directory name")
}

// close removes what is left in the stage and the stage itself, by
// whatever name it has in pd now (a session may have renamed it there:
// found by its identity), and closes it. One it could not remove stays in
// the journal for the verb's end (endStages).
func (s *stage) close() {
	if removeStage(s.pd, s.fd, s.name) {
		s.log.add(stageRec{N: s.name, Done: true})
	}
	unix.Close(s.fd)
}

// putAt makes dst hold at rel a copy of src's object there (type, content
// or link text, mode, owner, xattrs, modification time), both reached
// beneath their roots without following a symlink. A non-directory is
// made by makeIn and renamed over rel (a directory at rel removed first);
// a missing directory is made by makeIn too (renamed into place, never
// over anything), an existing one gets its attributes through its
// descriptor; with tree the directory's whole content is copied too.
// want, when not "", is the type (typeName) src's object must have; was,
// when not zero, the only directory at rel it removes (none when zero).
// sl, when not nil, journals the private directories made.
func putAt(src, dst int, sl *stageLog, rel string, tree bool, want string, was objID) error {
	_, err := putObj(src, dst, sl, rel, tree, want, was)
	return err
}

// putObj is putAt, and returns the identity of the object it put at rel
// (a link of it may be made by that identity: linkAt).
func putObj(src, dst int, sl *stageLog, rel string, tree bool, want string, was objID) (objID, error) {
	sfd, err := openAt(src, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return objID{}, err
	}
	defer unix.Close(sfd)
	st, err := fstatFd(sfd)
	if err != nil {
		return objID{}, err
	}
	if want != "" && typeName(st.Mode) != want {
		return objID{}, fmt.Errorf("a %s now, not a %s: changed since the diff", typeName(st.Mode), want)
	}
	pd, name, err := parentAt(dst, rel)
	if err != nil {
		return objID{}, err
	}
	defer unix.Close(pd)
	var old unix.Stat_t
	oerr := unix.Fstatat(pd, name, &old, unix.AT_SYMLINK_NOFOLLOW)
	oldDir := oerr == nil && old.Mode&unix.S_IFMT == unix.S_IFDIR
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if oerr == nil && !oldDir {
			// unlink(2) follows nothing; whatever a session renamed here
			// it could have removed itself.
			if err := unix.Unlinkat(pd, name, 0); err != nil {
				return objID{}, err
			}
		}
		var id objID
		if oldDir {
			dfd, err := unix.Openat(pd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return objID{}, err
			}
			dt, err := fstatFd(dfd)
			if err == nil {
				id = objID{dt.Dev, dt.Ino}
				err = setMeta(sfd, &st, dfd)
			}
			unix.Close(dfd)
			if err != nil {
				return objID{}, err
			}
		} else if id, err = makeIn(sl.in(filepath.Dir(rel)), pd, name, sfd, &st, unix.RENAME_NOREPLACE); err != nil {
			return objID{}, err
		}
		if !tree {
			return id, nil
		}
		names, err := readNames(sfd)
		if err != nil {
			return objID{}, err
		}
		for _, n := range names {
			if err := putAt(src, dst, sl, relJoin(rel, n), true, "", objID{}); err != nil {
				return objID{}, err
			}
		}
		return id, nil
	}
	if oldDir {
		if was == (objID{}) {
			// Not the diff's: a directory put there since (a tree the
			// session could not remove, say) is never removed.
			return objID{}, errDirInTheWay
		}
		if err := removeAt(pd, name, was); err != nil {
			return objID{}, err
		}
	}
	return makeIn(sl.in(filepath.Dir(rel)), pd, name, sfd, &st, 0)
}

// errDirInTheWay is putAt's refusal of a directory at a path where none
// was seen.
var errDirInTheWay = errors.New("a dir now: changed since the diff (not removed)")

// errStageLost is the error of a private directory a session renamed,
// replaced or removed while the daemon made it or used it (the daemon
// tries again with a new one, stageTries times in all).
var errStageLost = errors.New("its private directory beside it was replaced while in use")

// stageTries bounds the private directories one object is tried with.
const stageTries = 8

// makeIn makes a copy of the object st describes (open as sfd; a
// directory is made empty) and renames it to name in pd with renameat2's
// flags, given its attributes through its own descriptor before it has a
// name a session could reach. A regular file is written as an O_TMPFILE
// in pd and linked into a private directory in pd only to be renamed from
// there; another object is made in the private directory. Nothing is left
// behind on failure. sl journals the private directories. It returns
// the identity of the object made.
func makeIn(sl *stageLog, pd int, name string, sfd int, st *unix.Stat_t, flags uint) (objID, error) {
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		ofd, err := tmpCopy(pd, sfd)
		if err == nil {
			defer unix.Close(ofd)
			if err := setMeta(sfd, st, ofd); err != nil {
				return objID{}, err
			}
			ot, err := fstatFd(ofd)
			if err != nil {
				return objID{}, err
			}
			return objID{ot.Dev, ot.Ino}, inStage(pd, sl, func(s *stage) error {
				if err := linkFd(ofd, s.fd, "o"); err != nil {
					if err == unix.ENOENT {
						return errStageLost // removed under us
					}
					return err
				}
				return unix.Renameat2(s.fd, "o", pd, name, flags)
			})
		}
		if err != errNoTmpfile {
			return objID{}, err
		}
	}
	var id objID
	// Not "return id, inStage(...)": the order in which a return
	// statement reads id and calls inStage, which sets it, is unspecified.
	err := inStage(pd, sl, func(s *stage) error {
		ofd, err := makeObject(s.fd, sfd, st)
		if err == unix.ENOENT {
			return errStageLost
		}
		if err != nil {
			return err
		}
		defer unix.Close(ofd)
		if err := setMeta(sfd, st, ofd); err != nil {
			return err
		}
		ot, err := fstatFd(ofd)
		if err != nil {
			return err
		}
		id = objID{ot.Dev, ot.Ino}
		return unix.Renameat2(s.fd, "o", pd, name, flags)
	})
	return id, err
}

// linkFd links the object open as fd (O_PATH, or an O_TMPFILE) as name in
// the directory dir, through its /proc/self/fd link (linkat(2)'s way
// without CAP_DAC_READ_SEARCH, so with a session user's rights too: the
// kernel's protected_hardlinks rule applies as to ln(1)).
func linkFd(fd, dir int, name string) error {
	return unix.Linkat(unix.AT_FDCWD, procFd(fd), dir, name, unix.AT_SYMLINK_FOLLOW)
}

// inStage runs f with a new private directory in pd (journaled in sl),
// removed after it, again with a new one while f or the directory's making
// reports errStageLost.
func inStage(pd int, sl *stageLog, f func(*stage) error) error {
	var err error
	for range stageTries {
		var s *stage
		if s, err = newStage(pd, sl); err == nil {
			err = f(s)
			s.close()
		}
		if err != errStageLost {
			return err
		}
	}
	return err
}

// errNoTmpfile is tmpCopy's error on a file system without O_TMPFILE.
var errNoTmpfile = errors.New("no O_TMPFILE")

// tmpCopy writes a copy of the regular file open (O_PATH) as sfd to an
// unnamed file in pd (O_TMPFILE), synced, and returns its descriptor.
func tmpCopy(pd, sfd int) (int, error) {
	fd, err := unix.Openat(pd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == unix.EOPNOTSUPP || err == unix.EISDIR {
		return -1, errNoTmpfile
	}
	if err != nil {
		return -1, err
	}
	if err := copyInto(fd, sfd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// copyInto copies the regular file open (O_PATH) as sfd into the file
// open for writing as fd, and syncs it.
func copyInto(fd, sfd int) error {
	in, err := unix.Open(procFd(sfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	inf := os.NewFile(uintptr(in), "source")
	defer inf.Close()
	// Through a duplicate: the caller keeps fd.
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(dup), "copy")
	defer out.Close()
	if _, err := io.Copy(out, inf); err != nil {
		return err
	}
	return out.Sync()
}

// makeObject makes the object "o" in the private directory sd: a copy of
// sfd's (st) content or link text, type and device number (a directory
// empty); it returns a descriptor of it (O_PATH but for a regular file).
func makeObject(sd, sfd int, st *unix.Stat_t) (int, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		// No O_TMPFILE here: the private directory is no one else's, so
		// a plain name there is as safe.
		fd, err := unix.Openat(sd, "o", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return -1, err
		}
		if err := copyInto(fd, sfd); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	case unix.S_IFDIR:
		if err := unix.Mkdirat(sd, "o", 0o700); err != nil {
			return -1, err
		}
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(sfd, "", buf)
		if err != nil {
			return -1, err
		}
		if err := unix.Symlinkat(string(buf[:n]), sd, "o"); err != nil {
			return -1, err
		}
	default:
		if err := unix.Mknodat(sd, "o", st.Mode&(unix.S_IFMT|0o7777), int(st.Rdev)); err != nil {
			return -1, err
		}
	}
	return unix.Openat(sd, "o", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// readNames returns the names in the directory open (O_PATH) as fd,
// sorted.
func readNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// metaAt gives dst's object at rel the attributes of src's there
// (setMeta), both opened O_NOFOLLOW; an object of another type than
// src's is refused.
func metaAt(src, dst int, rel string, want objID) error {
	sfd, err := openAt(src, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	dfd, err := openAt(dst, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	st, err := fstatFd(sfd)
	if err != nil {
		return err
	}
	dt, err := fstatFd(dfd)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != dt.Mode&unix.S_IFMT {
		return fmt.Errorf("a %s now, not a %s: changed since the diff", typeName(dt.Mode), typeName(st.Mode))
	}
	if want != (objID{}) && (objID{dt.Dev, dt.Ino}) != want {
		// Another object renamed to rel since the diff (one the
		// session's user could not chmod or chown itself).
		return fmt.Errorf("another %s now: changed since the diff", typeName(dt.Mode))
	}
	return setMeta(sfd, &st, dfd)
}

// removeAllAt removes rel below root and, for a directory, everything in
// it (rm -r): each directory opened O_NOFOLLOW and emptied through its
// descriptor. With want (not zero) the object at rel must be that one (the
// diff's): a session that renamed another in its place (a tree it could
// not remove) gets a refusal. A missing rel is no error.
func removeAllAt(root int, rel string, want objID) error {
	pd, name, err := parentAt(root, rel)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pd)
	err = removeAt(pd, name, want)
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// removeAt removes name in the directory pd, with all it holds; with want
// (not zero), only when it is that object. unlink(2) of a non-directory
// by name is safe: whatever a session renamed there it could have
// unlinked itself.
func removeAt(pd int, name string, want objID) error {
	if want != (objID{}) {
		fd, err := unix.Openat(pd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		st, err := fstatFd(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
		if (objID{st.Dev, st.Ino}) != want {
			return errReplaced
		}
	}
	err := unix.Unlinkat(pd, name, 0)
	if err != unix.EISDIR {
		return err
	}
	fd, err := unix.Openat(pd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if want != (objID{}) {
		// The directory opened is the one checked, not one renamed here
		// since.
		if st, err := fstatFd(fd); err != nil || (objID{st.Dev, st.Ino}) != want {
			return errReplaced
		}
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n, objID{}); err != nil && err != unix.ENOENT {
			return err
		}
	}
	return unix.Unlinkat(pd, name, unix.AT_REMOVEDIR)
}

// errReplaced is the refusal of an object that is not the one the diff
// saw.
var errReplaced = errors.New("replaced in the project since the diff (not removed)")
