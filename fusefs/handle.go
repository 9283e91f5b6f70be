package fusefs

import (
	"context"
	"syscall"

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

// dirHandle lists a backing directory with stable offsets (go-fuse's
// loopback stream: telldir/seekdir work). Outside follow mode, symlink
// entries report DT_UNKNOWN, since lookup may serve one in place of its
// target; readdir(3) users then stat, as they must for DT_UNKNOWN.
type dirHandle struct {
	ds        fs.DirStream
	hideLinks bool
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	e, errno := d.ds.(fs.FileReaddirenter).Readdirent(ctx)
	if e != nil && d.hideLinks && e.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		e.Mode = 0
	}
	return e, errno
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
