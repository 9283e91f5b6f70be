package identity

import "strings"

// Within reports whether path p is dir or lies below it, on "/" boundaries:
// "/a/b" is within "/a", "/ab" is not. Both must be clean absolute paths
// (filepath.Clean); every absolute path is within "/", a relative one is
// within nothing. It does not touch the file system and does not allocate.
func Within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == '/')
}

// HasDotDot reports whether p has a ".." segment: split on "/" or "\", the
// whole segment only, so "...", "..foo" and "x.." do not count (DESIGN.md,
// "Display path"). On Linux "\" is an ordinary filename byte; it counts as a
// separator here because a Windows-style "..\x" is still meant as a parent
// step by whoever wrote it, and a false positive only costs a lexical
// shortcut (the caller then uses the physical walk), never correctness.
func HasDotDot(p string) bool {
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}

// Rebase replaces the prefix from of the clean absolute path p
// (Within(p, from)) with to.
func Rebase(p, from, to string) string {
	rest := p[len(from):]
	if from == "/" {
		rest = p
	}
	switch {
	case rest == "":
		return to
	case to == "/":
		return rest
	}
	return to + rest
}

// MountSource returns where the directory root of a file system (a
// mountinfo root field: what a mount shows) is visible through another
// mount of the same file system showing otherRoot at otherPoint, when
// otherRoot holds root: a bind mount's source. ok is false otherwise. A
// mount whose source lies in a hidden place or a none root is hidden as
// that place is (the host view's rule, and the jail's).
func MountSource(root, otherRoot, otherPoint string) (string, bool) {
	if !Within(root, otherRoot) {
		return "", false
	}
	return Rebase(root, otherRoot, otherPoint), true
}
