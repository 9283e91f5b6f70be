package fusefs

import (
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// The project identity of an overlay object (Config.Lower).
//
// The policy protects objects by their (dev, ino) in the project
// (policy.Object). A layered mount serves a merged overlay, whose objects
// show the overlay's st_dev, and whose st_ino is the lower inode number only
// while upper and lower share a file system (xino puts a layer id in the
// high bits otherwise), so a stat of the merged object never names the
// project's object. Its file handle does: overlayfs with index=on and
// nfs_export=on (mounts/layer.go overlayOptions; without the index a
// copied-up object is encoded by its upper handle and would lose its
// identity here) encodes an object that has an origin in the lower layer
// by the origin's own file handle, and an upper-only one by its upper
// handle, flagged (fs/overlayfs/export.c, ovl_check_encode_origin;
// the format is struct ovl_fh in fs/overlayfs/overlayfs.h). The origin's
// handle opened on the project's file system (open_by_handle_at(2)) and
// fstat(2)ed is the project's (dev, ino), exact whatever the file systems.
// An object's origin never changes, so a node asks once (node.projID).
// Two names of one overlay object (hard links, in the project or made in
// the layer) have one origin: a protected file is protected under every
// name. The overlay root is never indexed and is encoded by its upper
// handle; its origin is the lower directory itself.

// overlay file handle constants (fs/overlayfs/overlayfs.h).
const (
	ovlFileIDV0     = 0xfb // struct ovl_fb, unpadded (accepted by the kernel, never made now)
	ovlFileIDV1     = 0xf8 // struct ovl_fh: three bytes of padding, then struct ovl_fb
	ovlFhMagic      = 0xfb
	ovlFhFlagUpper  = 1 << 2 // OVL_FH_FLAG_PATH_UPPER: the fid is the upper object's
	ovlFbHeaderSize = 21     // version, magic, len, flags, type, uuid[16]
)

// ovlOrigin parses an overlay file handle (type htype, body h): the lower
// origin's handle (its type and body), upper true when the object has no
// origin (the fid is its upper object's), ok false when h is not an
// overlay handle.
func ovlOrigin(htype int32, h []byte) (ftype int32, fid []byte, upper, ok bool) {
	switch htype {
	case ovlFileIDV1:
		if len(h) < 3 {
			return 0, nil, false, false
		}
		h = h[3:]
	case ovlFileIDV0:
	default:
		return 0, nil, false, false
	}
	if len(h) < ovlFbHeaderSize || h[0] != 0 || h[1] != ovlFhMagic {
		return 0, nil, false, false
	}
	n := int(h[2])
	if n < ovlFbHeaderSize || n > len(h) {
		return 0, nil, false, false
	}
	if h[3]&ovlFhFlagUpper != 0 {
		return 0, nil, true, true
	}
	return int32(h[4]), h[ovlFbHeaderSize:n], false, true
}

// lowerLayer is the project under a layered mount's overlay
// (Config.Lower): a descriptor of it (not O_PATH: open_by_handle_at(2)
// refuses one), on whose file system origins are opened, and its identity,
// the overlay root's origin. mu guards fd against close: a number closed
// and reused would open handles on another file system.
type lowerLayer struct {
	mu     sync.RWMutex
	fd     int // -1 once closed
	root   identity.FileID
	isRoot bool // the mount's root is the overlay's root (Root is Lower)
}

// openLower opens the canonical directory lower.
func openLower(lower string, isRoot bool) (*lowerLayer, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, lower, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &lowerLayer{fd: fd, root: identity.FileID{Dev: st.Dev, Ino: st.Ino}, isRoot: isRoot}, nil
}

// close closes the descriptor; identities asked later are unknown.
func (l *lowerLayer) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// originOf returns the project identity of the overlay object fd names,
// whose overlay file handle is (htype, h) when htype is an overlay type
// (else it is taken from fd), root saying fd is the mount's root. known
// is false when it could not be told now (the origin removed from the
// project, the mount closed, no handle): the caller must not remember it.
// An object with no origin is known and has the zero identity.
func (l *lowerLayer) originOf(fd int, htype int32, h []byte, root bool) (id identity.FileID, known bool) {
	if root && l.isRoot {
		return l.root, true
	}
	if htype != ovlFileIDV1 && htype != ovlFileIDV0 {
		fh, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
		if err != nil {
			return identity.FileID{}, false
		}
		htype, h = fh.Type(), fh.Bytes()
	}
	ftype, fid, upper, ok := ovlOrigin(htype, h)
	switch {
	case !ok:
		return identity.FileID{}, false
	case upper:
		return identity.FileID{}, true
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.fd < 0 {
		return identity.FileID{}, false
	}
	ofd, err := unix.OpenByHandleAt(l.fd, unix.NewFileHandle(ftype, fid), unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return identity.FileID{}, false
	}
	defer unix.Close(ofd)
	var st syscall.Stat_t
	if fstat(ofd, &st) != nil {
		return identity.FileID{}, false
	}
	return identity.FileID{Dev: st.Dev, Ino: st.Ino}, true
}

// objectAt returns the object a write at the canonical path p acts on,
// identified as the mount's node for it is (node.fileID): Self when p
// exists, else the directory holding its name (Dir, Name), as the
// operations on an existing object and on a new name ask. The object is
// the one the mount serves at p: below the served tree (Backing, else
// Root; "/" for a host view), opened fd-relative without following a
// symlink (a canonical path has none; one now means a swap: unknown).
// Unknown parts are zero (not checked), as when fstat fails for a node.
func (m *mount) objectAt(p string) policy.Object {
	base, rel := "/", strings.TrimPrefix(p, "/")
	if m.host == nil {
		if !identity.Within(p, m.root) {
			return policy.Object{}
		}
		base = m.root
		if m.backing != "" {
			base = m.backing
		}
		rel = "."
		if p != m.root {
			rel = p[len(m.root)+1:]
			if m.root == "/" {
				rel = p[1:]
			}
		}
	}
	if rel == "" {
		rel = "."
	}
	idOf := func(fd int, rel string) identity.FileID {
		if m.lower != nil {
			id, _ := m.lower.originOf(fd, -1, nil, rel == "." && m.host == nil)
			return id
		}
		return fdID(fd)
	}
	return objectBeneath(base, rel, idOf)
}

// ObjectAt returns the object a write at rel below the canonical directory
// base acts on, as the policy identifies objects (policy.Object): Self,
// the (dev, ino) of the object at rel when it exists (no symlink
// followed, none crossed: a canonical path has none), else Dir and Name,
// the directory that would hold it. Unknown parts are zero (not checked).
// It is how a layer's commit asks about the project's objects, as the
// mount asks about its nodes.
func ObjectAt(base, rel string) policy.Object {
	return objectBeneath(base, rel, func(fd int, _ string) identity.FileID { return fdID(fd) })
}

// fdID is the (dev, ino) of fd's object; zero when fstat fails.
func fdID(fd int) identity.FileID {
	var st syscall.Stat_t
	if fstat(fd, &st) != nil {
		return identity.FileID{}
	}
	return identity.FileID{Dev: st.Dev, Ino: st.Ino}
}

// objectBeneath is ObjectAt with the identity of an open object given by
// idOf (rel "." for base itself).
func objectBeneath(base, rel string, idOf func(fd int, rel string) identity.FileID) policy.Object {
	bfd, err := identity.OpenCanonical(base)
	if err != nil {
		return policy.Object{}
	}
	defer unix.Close(bfd)
	open := func(rel string) (int, error) {
		return unix.Openat2(bfd, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	}
	fd, err := open(rel)
	if err == nil {
		defer unix.Close(fd)
		return policy.Object{Self: idOf(fd, rel)}
	}
	if err != unix.ENOENT || rel == "." {
		return policy.Object{}
	}
	dir, name := filepath.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	dfd, err := open(dir)
	if err != nil {
		return policy.Object{}
	}
	defer unix.Close(dfd)
	return policy.Object{Dir: idOf(dfd, dir), Name: name}
}
