package fusefs

import (
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/policy"
)

// linkRules are the symlink rules of one mount (DESIGN.md, "Symlinks"): the
// mount applies them on lookup and readlink, and PresentLink gives them to
// callers that must answer as the mount would without walking it.
type linkRules struct {
	root       string // canonical physical root
	mountpoint string // as given
	mountCanon string // canonical mountpoint
	symlinks   SymlinkMode
}

type linkKind uint8

const (
	// linkShow: the link stays a symlink, with text reaching the same
	// physical object inside the mount.
	linkShow linkKind = iota
	// linkInPlace: the target is outside the root; serve it in place.
	linkInPlace
	// linkBroken: the target cannot be computed (ELOOP, ENOTDIR on the way).
	linkBroken
)

type linkPresentation struct {
	kind linkKind
	key  string // target key (identity.TargetKey), physical
	text string // for linkShow: the text to hand the kernel
}

// mapMountpoint maps a path under the mountpoint to the same path under the
// root: tools inside the mount write absolute links from $PWD, and the
// server must never walk its own mountpoint (it would call itself).
func (r *linkRules) mapMountpoint(p string) string {
	for _, mp := range [2]string{r.mountpoint, r.mountCanon} {
		if identity.Within(p, mp) {
			return r.root + p[len(mp):]
		}
	}
	return p
}

// presentLink decides how the symlink in physical directory dir with the given
// text is shown (DESIGN.md, "Symlinks"). In-root targets keep their text when
// it is relative without "..", and are otherwise rewritten relative to dir;
// both walk, inside the mount, to the physical object the host would reach.
func (r *linkRules) presentLink(dir, text string) linkPresentation {
	plain := text != "" && !filepath.IsAbs(text) && !identity.HasDotDot(text)
	t := r.mapMountpoint(text)
	if !filepath.IsAbs(t) {
		t = join(dir, t)
	}
	key, err := identity.TargetKey(t)
	if err != nil {
		if plain {
			// A loop or a file used as a directory inside the root: the
			// kernel walking the text in the mount meets the same error.
			return linkPresentation{kind: linkShow, text: text}
		}
		return linkPresentation{kind: linkBroken}
	}
	key = r.mapMountpoint(key)
	if !identity.Within(key, r.root) {
		return linkPresentation{kind: linkInPlace, key: key}
	}
	if plain {
		return linkPresentation{kind: linkShow, key: key, text: text}
	}
	rel, err := filepath.Rel(dir, key)
	if err != nil {
		return linkPresentation{kind: linkBroken}
	}
	return linkPresentation{kind: linkShow, key: key, text: rel}
}

// shown reports whether a link in the physical directory dir, presented as
// pres, stays a symlink in the mount; otherwise it is served in place of its
// target (or refused).
func (r *linkRules) shown(dir string, pres linkPresentation) bool {
	return pres.kind == linkShow && r.symlinks == SymlinksContain && identity.Within(dir, r.root)
}

// refusal is the refusal of serving pres in place before its target is
// opened: a target that cannot be walked, or one that holds the mountpoint
// (the server's own calls below it would walk through its own mount, where
// a rename deadlocks on the kernel's rename lock and every descriptor pins
// the mount). Allow when neither applies.
func (r *linkRules) refusal(pres linkPresentation) policy.Decision {
	switch {
	case pres.kind == linkBroken:
		return policy.Decision{Errno: syscall.EACCES, Rule: "symlink:unresolvable"}
	case identity.Within(r.mountCanon, pres.key) || identity.Within(r.mountpoint, pres.key):
		return policy.Decision{Errno: syscall.EACCES, Rule: "symlink:contains-mountpoint"}
	}
	return policy.Decision{Allow: true}
}

// denyDangling refuses a link whose target outside the root is missing: a
// dangling escaping link plus O_CREAT is the classic way out.
var denyDangling = policy.Decision{Errno: syscall.EACCES, Rule: "symlink:dangling"}

// LinkView is how a mount presents one symlink.
type LinkView struct {
	// Text is non-empty when the mount shows the link as a symlink: the
	// text the kernel is handed, which it walks from the link's directory
	// inside the mount (relative; in follow mode the text as stored).
	Text string
	// Key is the physical key of what the link reaches (identity.TargetKey,
	// a path under the mountpoint mapped to the root); empty in follow mode
	// and when Errno is set. Without Text, the mount serves Key in place of
	// the link.
	Key string
	// Errno is non-zero when a lookup of the link fails in the mount:
	// EACCES for a target that cannot be walked, holds the mountpoint, or
	// is missing while not shown as a link.
	Errno syscall.Errno
}

// PresentLink returns how a mount in mode of the canonical root at the
// canonical mountpoint shows the symlink with the given text in the
// canonical physical directory dir: what Lookup and Readlink answer, for a
// caller that must answer as the mount would without walking it (the session
// daemon must never be a client of its own mounts). Policy refusals (a none
// root) are not applied. It walks the host (identity.TargetKey, stat(2)),
// never the mount.
func PresentLink(root, mountpoint string, mode SymlinkMode, dir, text string) LinkView {
	if mode == SymlinksFollow {
		return LinkView{Text: text}
	}
	r := linkRules{root: root, mountpoint: mountpoint, mountCanon: mountpoint, symlinks: mode}
	pres := r.presentLink(dir, text)
	if r.shown(dir, pres) {
		return LinkView{Text: pres.text, Key: pres.key}
	}
	if d := r.refusal(pres); !d.Allow {
		return LinkView{Errno: d.Errno}
	}
	var st unix.Stat_t
	if err := unix.Stat(pres.key, &st); err != nil {
		return LinkView{Errno: denyDangling.Errno}
	}
	return LinkView{Key: pres.key}
}
