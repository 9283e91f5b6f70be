package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// noOpendir serves directories without OPENDIR and RELEASEDIR round trips
// (DESIGN.md, "Performance"). It wraps go-fuse's node bridge: OPENDIR answers
// ENOSYS once, after which the kernel (fs/fuse/file.c, fuse_do_open) sets
// fc->no_opendir, opens every directory locally with FOPEN_KEEP_CACHE |
// FOPEN_CACHE_DIR and file handle 0, and never sends RELEASEDIR. Listings then
// live in the kernel's page cache; they are dropped by the kernel itself when
// the directory changes through the mount (fuse_dir_changed), by the watcher's
// NOTIFY_INVAL_INODE when it changes on the host, and by a changed mtime when
// attributes are refreshed (FUSE_AUTO_INVAL_DATA).
//
// The bridge lists only through a handle, so a READDIR(PLUS) or FSYNCDIR with
// handle 0 is served on a handle opened for that one request inside this
// process (the node's OpendirHandle, then a seek to the request's offset:
// go-fuse's loopback stream offsets are the backing file system's d_off
// cookies, which lseek(2) on a fresh descriptor accepts) and released at its
// end. The kernel fills its cache with few such requests per directory.
type noOpendir struct {
	fuse.RawFileSystem
}

// OpenDir answers ENOSYS: the kernel opens directories without the server.
func (r *noOpendir) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (r *noOpendir) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.withHandle(cancel, &in.InHeader, in.Fh, func(fh uint64) fuse.Status {
		rin := *in
		rin.Fh = fh
		return r.RawFileSystem.ReadDir(cancel, &rin, out)
	})
}

func (r *noOpendir) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.withHandle(cancel, &in.InHeader, in.Fh, func(fh uint64) fuse.Status {
		rin := *in
		rin.Fh = fh
		return r.RawFileSystem.ReadDirPlus(cancel, &rin, out)
	})
}

// FsyncDir syncs through a handle of its own: fsync(2) on a directory
// works on ext4, and go-fuse's bridge has nothing to sync without a handle.
func (r *noOpendir) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return r.withHandle(cancel, &in.InHeader, in.Fh, func(fh uint64) fuse.Status {
		fin := *in
		fin.Fh = fh
		return r.RawFileSystem.FsyncDir(cancel, &fin)
	})
}

// withHandle runs f on fh, or, for handle 0 (a directory the kernel opened
// itself), on a handle opened for this request and released afterwards.
func (r *noOpendir) withHandle(cancel <-chan struct{}, h *fuse.InHeader, fh uint64, f func(fh uint64) fuse.Status) fuse.Status {
	if fh != 0 {
		return f(fh)
	}
	var oo fuse.OpenOut
	oin := fuse.OpenIn{InHeader: *h, Flags: syscall.O_RDONLY | syscall.O_DIRECTORY}
	if st := r.RawFileSystem.OpenDir(cancel, &oin, &oo); !st.Ok() {
		return st
	}
	st := f(oo.Fh)
	r.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: *h, Fh: oo.Fh})
	return st
}
