package fusefs

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// linkRules are the symlink rules of one mount (DESIGN.md, "Links are
// links"): a symlink is always shown as a symlink; in contain mode only its
// text is rewritten, so that the kernel, walking it inside the mount, reaches
// the physical object the host would reach, and never leaves the session's
// mounts. The session mount and the host view apply the same rules (the
// host view with root "/").
type linkRules struct {
	root       string // canonical physical root
	mountpoint string // as given
	mountCanon string // canonical mountpoint
	// hostView is the host view's mountpoint (clean, absolute), or "" when
	// the mount has none: escaping links then keep their stored text.
	hostView string
	symlinks SymlinkMode
	// served maps the mountpoints of the other mounts this server stands
	// for (a host view's session mount) to the physical directory they
	// show; the walk never looks into them.
	served map[string]string
}

// walker is the physical walk (identity.Walker) with every mount this
// server serves mapped to what it shows, so computing a key never makes the
// server a client of its own mounts (a link on the host may lead into one).
func (r *linkRules) walker() identity.Walker {
	return identity.Walker{Mount: func(p string) (string, bool, error) {
		switch {
		case p == r.mountpoint || p == r.mountCanon:
			return r.root, true, nil
		case r.hostView != "" && p == r.hostView:
			return "/", true, nil
		}
		if phys, ok := r.served[p]; ok {
			return phys, true, nil
		}
		return "", false, nil
	}}
}

// mapServed maps a path under a mount this server serves (the mountpoint,
// the host view) to the physical path it shows: tools inside the mount write
// absolute links from $PWD, and the server must never walk its own mounts
// (it would call itself).
func (r *linkRules) mapServed(p string) string {
	for _, mp := range [2]string{r.mountpoint, r.mountCanon} {
		if mp != "" && identity.Within(p, mp) {
			return identity.Rebase(p, mp, r.root)
		}
	}
	if r.hostView != "" && identity.Within(p, r.hostView) {
		return identity.Rebase(p, r.hostView, "/")
	}
	return p
}

// plainText reports whether a link text is relative without a ".."
// component: walked from the link's directory it goes only down, so inside
// the mount it reaches what it reaches on the host (each link on the way is
// itself presented so that it does).
func plainText(text string) bool {
	return text != "" && !filepath.IsAbs(text) && !identity.HasDotDot(text)
}

// present returns the text the mount shows for the symlink with the stored
// text in the canonical physical directory dir (DESIGN.md, "Links are
// links"), and the key of what it reaches ("" when the target cannot be
// walked):
//   - follow mode: the stored text;
//   - a text naming an object inside the root: the stored text when it is
//     relative without "..", else the path from dir to that object (the
//     mount's tree is physical, so ".." there is the physical parent). The
//     object is the one the text names, its own final link not followed
//     (lstat(2) semantics on the last component, lastKey): when it is a
//     link, the mount presents that link on its own, so a venv's
//     python -> python3 stays "python3" whatever python3 points to;
//   - a target outside the root, existing or not: HostView + key (the key
//     itself when the mount has no host view), unless it is a device,
//     socket or fifo (kept as stored: /dev/null);
//   - a target that cannot be walked (ELOOP, ENOTDIR): a plain text as
//     stored, otherwise the same text walked from dir inside the host view,
//     so following it gives the kernel's own errno.
func (r *linkRules) present(dir, text string) (shown, key string) {
	if r.symlinks == SymlinksFollow {
		return text, ""
	}
	t := r.mapServed(text)
	if !filepath.IsAbs(t) {
		t = dir + "/" + t
	}
	key, err := r.walker().TargetKey(context.Background(), t)
	if err != nil {
		key = ""
	} else {
		key = r.mapServed(key)
	}
	if named, ok := r.lastKey(t); ok && identity.Within(named, r.root) {
		if plainText(text) {
			return text, key
		}
		if rel, err := filepath.Rel(dir, named); err == nil {
			return rel, key
		}
		return text, key
	}
	if err != nil {
		if plainText(text) || r.hostView == "" {
			return text, ""
		}
		return r.hostView + t, ""
	}
	if identity.Within(key, r.root) {
		if plainText(text) {
			return text, key
		}
		rel, err := filepath.Rel(dir, key)
		if err != nil {
			return text, key
		}
		return rel, key
	}
	if special(key) {
		return text, key
	}
	if r.hostView == "" {
		// No host view: the physical path, which reaches on the host
		// what the stored text reaches (a relative text would not: the
		// mount's root is not the backing root).
		return key, key
	}
	return InHostView(r.hostView, key), key
}

// lastKey returns the key of the object the absolute path t names without
// following its final component when that is a link (lstat(2) semantics):
// the key of t's directory part joined with its last name, or what a mount
// this server serves shows there. ok is false when the last component must
// be followed to be named (".", "..", a trailing slash) or the directory
// part cannot be walked.
func (r *linkRules) lastKey(t string) (string, bool) {
	i := strings.LastIndexByte(t, '/')
	name := t[i+1:]
	if name == "" || name == "." || name == ".." {
		return "", false
	}
	dir := t[:i]
	if dir == "" {
		dir = "/"
	}
	w := r.walker()
	pk, err := w.TargetKey(context.Background(), dir)
	if err != nil {
		return "", false
	}
	named := pk + "/" + name
	if pk == "/" {
		named = "/" + name
	}
	if phys, ok, _ := w.Mount(named); ok {
		return phys, true
	}
	return r.mapServed(named), true
}

// InHostView returns the path of the canonical physical path p inside the
// host view mounted at hv: hv itself for "/", else hv+p. It is where the
// host view shows p (DESIGN.md, "Host view").
func InHostView(hv, p string) string {
	if p == "/" {
		return hv
	}
	return hv + p
}

// special reports whether the object at the canonical path key is a device,
// socket or fifo: links to them keep their stored text.
func special(key string) bool {
	var st unix.Stat_t
	if unix.Lstat(key, &st) != nil {
		return false
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFSOCK, unix.S_IFIFO:
		return true
	}
	return false
}

// storedText is the text a symlink(2) through the mount stores: a text naming
// a host-view path is stored with the physical path, so the disk never holds
// host-view texts (they mean nothing once the session is gone).
func (r *linkRules) storedText(text string) string {
	if r.hostView != "" && filepath.IsAbs(text) && identity.Within(filepath.Clean(text), r.hostView) {
		if rest := filepath.Clean(text)[len(r.hostView):]; rest != "" {
			if strings.HasSuffix(text, "/") {
				rest += "/"
			}
			return rest
		}
		return "/"
	}
	return text
}

// LinkView is how a mount presents one symlink.
type LinkView struct {
	// Text is the text the mount hands the kernel for the link (a symlink
	// is always shown as a symlink).
	Text string
	// Key is the physical key of what the link reaches (identity.TargetKey,
	// a path under the mountpoint or host view mapped back); empty in
	// follow mode and when the target cannot be walked.
	Key string
	// Errno is always 0: lstat of a link never fails in the mount, and
	// following one that cannot be walked gives the kernel's own errno.
	// Kept for callers that switch on it.
	Errno syscall.Errno
}

// PresentLink returns how a mount in mode of the canonical root at the
// canonical mountpoint, with the host view at hostView ("" for none), shows
// the symlink with the given text in the canonical physical directory dir:
// what Readlink answers, for a caller that must answer as the mount would
// without walking it (the session daemon must never be a client of its own
// mounts). It walks the host (identity.TargetKey, lstat(2)), never the mount.
func PresentLink(root, mountpoint, hostView string, mode SymlinkMode, dir, text string) LinkView {
	r := linkRules{root: root, mountpoint: mountpoint, mountCanon: mountpoint, hostView: cleanOrEmpty(hostView), symlinks: mode}
	shown, key := r.present(dir, text)
	return LinkView{Text: shown, Key: key}
}

func cleanOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Clean(p)
}
