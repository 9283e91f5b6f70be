package fusefs

import (
	"path/filepath"

	"github.com/wsfs/wsfs/identity"
)

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
func (m *mount) mapMountpoint(p string) string {
	for _, mp := range [2]string{m.mountpoint, m.mountCanon} {
		if within(p, mp) {
			return m.root + p[len(mp):]
		}
	}
	return p
}

// presentLink decides how the symlink in physical directory dir with the given
// text is shown (DESIGN.md, "Symlinks"). In-root targets keep their text when
// it is relative without "..", and are otherwise rewritten relative to dir;
// both walk, inside the mount, to the physical object the host would reach.
func (m *mount) presentLink(dir, text string) linkPresentation {
	plain := text != "" && !filepath.IsAbs(text) && !hasDotDot(text)
	t := m.mapMountpoint(text)
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
	key = m.mapMountpoint(key)
	if !within(key, m.root) {
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
