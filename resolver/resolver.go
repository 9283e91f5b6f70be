// Package resolver turns a path as a tool spells it, plus a base directory,
// into a Target: a display path for messages and a physical key that names the
// same object the kernel would reach.
package resolver

import "context"

// SKELETON: the implementation is filled in by the resolver work item.

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
func (r *Resolver) Resolve(ctx context.Context, path string, opts Options) (Target, error) {
	panic("unimplemented")
}
