package fusefs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Sessions for other users (DESIGN.md, "Round 4"): a mount made with a
// users list (Config.Users, HostViewConfig.Users) is mounted allow_other,
// so the kernel lets every uid reach it, and the server itself refuses
// every request whose caller (the FUSE request header's uid, fuse(4)) is
// neither listed, nor root, nor the server's own uid, with EACCES before any
// operation is served. The check is usersGate: one wrapper of the raw file
// system, outermost, so no operation of the node tree (nor a later one)
// runs for an unlisted caller.
//
// What passes unchecked: FORGET and BATCH_FORGET (no reply; the kernel's
// bookkeeping), RELEASE, RELEASEDIR and FLUSH (the end of an open that was
// allowed; the kernel sends RELEASE without credentials, uid 0), INIT and
// DESTROY. Everything else, reads and writes on an open handle included, is
// refused for an unlisted uid, which is stricter than the kernel's own
// owner-only rule (fuse_allow_current_process checks lookups, attributes
// and permissions, not I/O on a passed descriptor); with FUSE passthrough
// a read or write never reaches the server, so a descriptor a listed
// process passes on keeps working there, as without allow_other.

// MaxUsers bounds a mount's users list.
const MaxUsers = 64

// CheckUsers validates a users list: at most MaxUsers uids, none of them
// 0 (root is always served) nor 4294967295 ((uid_t)-1, "no uid" to
// chown(2) and setresuid(2)), no duplicates. The error names the uid and
// the rule.
func CheckUsers(users []uint32) error {
	if len(users) > MaxUsers {
		return fmt.Errorf("users: %d given, at most %d", len(users), MaxUsers)
	}
	for i, u := range users {
		switch {
		case u == 0:
			return fmt.Errorf("users: uid 0: root is always served; list the other uids only")
		case u == ^uint32(0):
			return fmt.Errorf("users: uid %d: not a valid uid ((uid_t)-1)", u)
		case slices.Contains(users[:i], u):
			return fmt.Errorf("users: uid %d: listed twice", u)
		}
	}
	return nil
}

// ParseUsers parses a comma-separated list of uids ("1000,65534"; "" is
// none) and checks it with CheckUsers.
func ParseUsers(s string) ([]uint32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		u, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("users %q: %q is not a uid (a decimal number)", s, f)
		}
		out = append(out, uint32(u))
	}
	if err := CheckUsers(out); err != nil {
		return nil, err
	}
	return out, nil
}

// usersGate serves the wrapped file system to the listed uids, root and
// the server's own uid only; every other caller gets EACCES, logged and
// counted as a denial with rule "users:not-listed". It embeds nothing: each
// method of fuse.RawFileSystem is written out, so the compiler refuses a
// go-fuse that adds an operation this gate does not decide.
type usersGate struct {
	fs    fuse.RawFileSystem
	m     *mount
	users []uint32
}

var _ fuse.RawFileSystem = (*usersGate)(nil)

// ruleUsers is the rule of a refused caller.
const ruleUsers = "users:not-listed"

// refuse reports whether the request h must be refused (and logs it).
func (g *usersGate) refuse(op string, h *fuse.InHeader) bool {
	uid := h.Caller.Uid
	if uid == 0 || uid == self.uid || slices.Contains(g.users, uid) {
		return false
	}
	g.m.stats.denied(ruleUsers)
	g.m.log.Info("denied", g.m.sessionAttr("op", op, "node", h.NodeId, "rule", ruleUsers,
		"errno", "EACCES", "uid", uid, "pid", h.Caller.Pid)...)
	return true
}

func (g *usersGate) String() string      { return g.fs.String() }
func (g *usersGate) SetDebug(debug bool) { g.fs.SetDebug(debug) }
func (g *usersGate) Init(s *fuse.Server) { g.fs.Init(s) }
func (g *usersGate) OnUnmount()          { g.fs.OnUnmount() }

func (g *usersGate) Forget(nodeid, nlookup uint64) { g.fs.Forget(nodeid, nlookup) }

func (g *usersGate) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) { g.fs.Release(cancel, in) }
func (g *usersGate) ReleaseDir(in *fuse.ReleaseIn)                      { g.fs.ReleaseDir(in) }
func (g *usersGate) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return g.fs.Flush(cancel, in)
}

func (g *usersGate) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if g.refuse("lookup", h) {
		return fuse.EACCES
	}
	return g.fs.Lookup(cancel, h, name, out)
}

func (g *usersGate) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if g.refuse("getattr", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.GetAttr(cancel, in, out)
}

func (g *usersGate) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if g.refuse("setattr", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.SetAttr(cancel, in, out)
}

func (g *usersGate) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.refuse("mknod", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Mknod(cancel, in, name, out)
}

func (g *usersGate) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.refuse("mkdir", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Mkdir(cancel, in, name, out)
}

func (g *usersGate) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if g.refuse("unlink", h) {
		return fuse.EACCES
	}
	return g.fs.Unlink(cancel, h, name)
}

func (g *usersGate) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if g.refuse("rmdir", h) {
		return fuse.EACCES
	}
	return g.fs.Rmdir(cancel, h, name)
}

func (g *usersGate) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if g.refuse("rename", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Rename(cancel, in, oldName, newName)
}

func (g *usersGate) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if g.refuse("link", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Link(cancel, in, name, out)
}

func (g *usersGate) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if g.refuse("symlink", h) {
		return fuse.EACCES
	}
	return g.fs.Symlink(cancel, h, target, name, out)
}

func (g *usersGate) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if g.refuse("readlink", h) {
		return nil, fuse.EACCES
	}
	return g.fs.Readlink(cancel, h)
}

func (g *usersGate) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if g.refuse("access", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Access(cancel, in)
}

func (g *usersGate) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if g.refuse("getxattr", h) {
		return 0, fuse.EACCES
	}
	return g.fs.GetXAttr(cancel, h, attr, dest)
}

func (g *usersGate) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if g.refuse("listxattr", h) {
		return 0, fuse.EACCES
	}
	return g.fs.ListXAttr(cancel, h, dest)
}

func (g *usersGate) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if g.refuse("setxattr", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.SetXAttr(cancel, in, attr, data)
}

func (g *usersGate) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if g.refuse("removexattr", h) {
		return fuse.EACCES
	}
	return g.fs.RemoveXAttr(cancel, h, attr)
}

func (g *usersGate) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if g.refuse("create", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Create(cancel, in, name, out)
}

func (g *usersGate) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if g.refuse("tmpfile", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Tmpfile(cancel, in, out)
}

func (g *usersGate) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if g.refuse("open", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Open(cancel, in, out)
}

func (g *usersGate) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if g.refuse("read", &in.InHeader) {
		return nil, fuse.EACCES
	}
	return g.fs.Read(cancel, in, buf)
}

func (g *usersGate) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if g.refuse("lseek", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Lseek(cancel, in, out)
}

func (g *usersGate) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if g.refuse("getlk", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.GetLk(cancel, in, out)
}

func (g *usersGate) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.refuse("setlk", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.SetLk(cancel, in)
}

func (g *usersGate) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if g.refuse("setlkw", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.SetLkw(cancel, in)
}

func (g *usersGate) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if g.refuse("write", &in.InHeader) {
		return 0, fuse.EACCES
	}
	return g.fs.Write(cancel, in, data)
}

func (g *usersGate) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if g.refuse("write", &in.InHeader) {
		return 0, fuse.EACCES
	}
	return g.fs.Writev(cancel, in, data)
}

func (g *usersGate) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if g.refuse("copy_file_range", &in.InHeader) {
		return 0, fuse.EACCES
	}
	return g.fs.CopyFileRange(cancel, in)
}

func (g *usersGate) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if g.refuse("ioctl", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (g *usersGate) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if g.refuse("fsync", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Fsync(cancel, in)
}

func (g *usersGate) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if g.refuse("fallocate", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Fallocate(cancel, in)
}

func (g *usersGate) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if g.refuse("opendir", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.OpenDir(cancel, in, out)
}

func (g *usersGate) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.refuse("readdir", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.ReadDir(cancel, in, out)
}

func (g *usersGate) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if g.refuse("readdirplus", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.ReadDirPlus(cancel, in, out)
}

func (g *usersGate) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if g.refuse("fsyncdir", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.FsyncDir(cancel, in)
}

func (g *usersGate) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if g.refuse("statfs", h) {
		return fuse.EACCES
	}
	return g.fs.StatFs(cancel, h, out)
}

func (g *usersGate) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if g.refuse("statx", &in.InHeader) {
		return fuse.EACCES
	}
	return g.fs.Statx(cancel, in, out)
}
