package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileHandle is an open backing file. go-fuse's LoopbackFile does the data
// path (read, write, locks, lseek, fsync, passthrough registration); this
// type adds access to the descriptor and drops FLUSH.
type fileHandle struct {
	*fs.LoopbackFile
	fd int
}

func newFileHandle(fd int) *fileHandle {
	return &fileHandle{LoopbackFile: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), fd: fd}
}

// Flush answers ENOSYS once so the kernel stops sending FLUSH on every
// close(2) (fc->no_flush): the kernel writes dirty pages back itself before
// it would send one, and locks are released on RELEASE, as LoopbackFile's
// OFD locks are.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno { return syscall.ENOSYS }

// PassthroughFd offers the descriptor for FUSE passthrough only where the
// kernel can take it: a regular file on a file system that is not a pseudo
// or stacked one. go-fuse turns passthrough off for the whole mount after
// one failed registration (a procfs file, an overlayfs file past the stack
// depth), and one odd file must not slow down every other.
func (h *fileHandle) PassthroughFd() (int, bool) {
	var st unix.Stat_t
	if unix.Fstat(h.fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, false
	}
	var sfs unix.Statfs_t
	if unix.Fstatfs(h.fd, &sfs) != nil {
		return -1, false
	}
	switch int64(sfs.Type) {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.FUSE_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC,
		unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.CGROUP_SUPER_MAGIC,
		unix.CGROUP2_SUPER_MAGIC, unix.BPF_FS_MAGIC, unix.EFIVARFS_MAGIC, unix.ECRYPTFS_SUPER_MAGIC,
		unix.PSTOREFS_MAGIC, 0x62656570 /* configfs */ :
		return -1, false
	}
	return h.LoopbackFile.PassthroughFd()
}

// dirHandle lists a backing directory with stable offsets (go-fuse's
// loopback stream: telldir/seekdir work). In a host view, a directory that
// is hidden but leads to a visible place lists only the names on the way.
type dirHandle struct {
	ds   fs.DirStream
	keep func(name string) bool // nil: every name
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (n *node) newDirHandle(ds fs.DirStream) *dirHandle {
	d := &dirHandle{ds: ds}
	if n.m.host != nil {
		d.keep = n.m.host.listFilter(n.m.policy(), n.phys())
	}
	return d
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	for {
		e, errno := d.ds.(fs.FileReaddirenter).Readdirent(ctx)
		if e == nil || d.keep == nil || d.keep(e.Name) {
			return e, errno
		}
	}
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.ds.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.ds.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.ds.(fs.FileFsyncdirer).Fsyncdir(ctx, flags)
}
