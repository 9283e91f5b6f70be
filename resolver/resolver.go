// Package resolver turns a path as a tool spells it, plus a base directory,
// into a Target: a display path for messages and a physical key that names the
// same object the kernel would reach.
//
// The rules are DESIGN.md's "Path semantics": the key is the physical walk
// of base + path (path_resolution(7)), the display path is the lexical join
// unless a ".." segment could make the lexical join name another object.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/wsfs/wsfs/identity"
)

// Options are the per-call inputs of Resolve.
type Options struct {
	// Cwd is the base for a relative path; empty means Resolver.Default.
	Cwd string
}

// Target is a resolved path.
type Target struct {
	// Display is the path as the user spelled it, joined to the base and
	// cleaned; equal to Key when the base or the path has a ".." segment.
	Display string
	// Key is identity.TargetKey of the physical walk of base + path.
	Key string
}

// Resolver holds the one default base directory.
type Resolver struct {
	// Default is the base for relative paths when Options.Cwd is empty.
	Default string
}

// Resolve resolves path against opts.Cwd (or r.Default).
//
// Base: an absolute path ignores both bases; a relative one uses opts.Cwd,
// else r.Default, which must then be absolute (a relative base would
// silently mean the process's cwd, which callers must never invent).
//
// Shapes: Key is identity.TargetKey(base + "/" + path), the kernel's walk of
// the whole string, so "sub/link/../x" resolves physically and a trailing
// slash still requires a directory. Display is filepath.Join(base, path)
// (filepath.Clean(path) when absolute), except that when base or path has a
// ".." segment — split on "/" or "\", the whole segment only, so "...",
// "..foo" and "x.." do not count — Display is Key, because a lexical join
// could then name a different object ("b/link/../f" is not "b/f"). On Linux
// "\" is an ordinary filename byte for the key; it only counts as a separator
// for this ".." test, so a Windows-style "..\x" never gets a lexical display.
//
// Errors: ctx.Err() (unwrapped) when ctx is done before or during the walk;
// a one-line error naming the input when path is blank (empty or only
// white space) or there is no absolute base; otherwise an *fs.PathError{Op:
// "resolve", Path: base + "/" + path} wrapping the errno from
// identity.TargetKey (ENOTDIR, ELOOP, EACCES, …), usable with errors.Is.
func (r *Resolver) Resolve(ctx context.Context, path string, opts Options) (Target, error) {
	if err := ctx.Err(); err != nil {
		return Target{}, err
	}
	if strings.TrimSpace(path) == "" {
		return Target{}, fmt.Errorf("resolve %q: path is blank", path)
	}

	walked, base := path, ""
	if !filepath.IsAbs(path) {
		base = opts.Cwd
		if base == "" {
			base = r.Default
		}
		switch {
		case base == "":
			return Target{}, fmt.Errorf("resolve %q: no base directory (Options.Cwd and Resolver.Default are empty)", path)
		case !filepath.IsAbs(base):
			return Target{}, fmt.Errorf("resolve %q: base directory %q is not absolute", path, base)
		}
		// Not filepath.Join: cleaning would fold "link/.." lexically
		// before the walk sees it.
		walked = base + "/" + path
	}

	key, err := identity.TargetKeyContext(ctx, walked)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Target{}, ctxErr
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return Target{}, &fs.PathError{Op: "resolve", Path: walked, Err: pe.Err}
		}
		return Target{}, err
	}
	return Target{Display: Display(base, path, key), Key: key}, nil
}

// Display is the display-path rule (DESIGN.md, "Display path") for path
// resolved against the absolute directory base (ignored when path is
// absolute) to key: filepath.Join(base, path), or filepath.Clean(path) when
// path is absolute, except that when base or path has a ".." segment
// (identity.HasDotDot: "/" or "\" separated, the whole segment) it is key,
// because a lexical join could then name a different object ("b/link/../f"
// is not "b/f"). key is whatever names the object the walk reached in the
// caller's namespace: the physical key for Resolve, the path inside the
// mount for a session's Resolve. It does not touch the file system.
func Display(base, path, key string) string {
	if filepath.IsAbs(path) {
		if identity.HasDotDot(path) {
			return key
		}
		return filepath.Clean(path)
	}
	if identity.HasDotDot(path) || identity.HasDotDot(base) {
		return key
	}
	return filepath.Join(base, path)
}

// SessionCwd is the session-cwd rule ("the seeds' rule") for hosts that keep
// their own tools and only need the next working directory of a session
// after a `cd requested` issued in cwd. It never fails:
//
//   - requested empty: cwd, unchanged;
//   - requested absolute: filepath.Clean(requested), except that with a ".."
//     segment it is identity.TargetKey(requested), the physical walk
//     (DESIGN.md: a session cwd like /w/link/.. means what the kernel means);
//   - otherwise filepath.Join(cwd, requested), except that when cwd or
//     requested has a ".." segment (as in Resolve: "/" or "\" separated,
//     whole segment) the result is identity.TargetKey(cwd + "/" + requested),
//     the physical walk, because the lexical join of "link/.." names the
//     directory holding link, not the parent of its target. It falls back to
//     the lexical join when the key cannot be computed (ENOTDIR, ELOOP,
//     EACCES) or when cwd is not absolute (the key would then depend on the
//     process's cwd).
//
// The result is not checked to exist or to be a directory; the caller
// validates it (DESIGN.md "Working directory").
func SessionCwd(cwd, requested string) string {
	switch {
	case requested == "":
		return cwd
	case filepath.IsAbs(requested):
		if identity.HasDotDot(requested) {
			if key, err := identity.TargetKey(requested); err == nil {
				return key
			}
		}
		return filepath.Clean(requested)
	}
	lexical := filepath.Join(cwd, requested)
	if !filepath.IsAbs(cwd) || !(identity.HasDotDot(cwd) || identity.HasDotDot(requested)) {
		return lexical
	}
	key, err := identity.TargetKey(cwd + "/" + requested)
	if err != nil {
		return lexical
	}
	return key
}
