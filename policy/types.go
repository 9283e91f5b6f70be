// Package policy decides, for an operation on a physical path, whether a
// session may perform it and which errno refuses it. A *Policy is compiled
// once from a Spec, is immutable, and is safe for concurrent use; callers swap
// policies atomically (see fusefs) to change them live.
//
// The rules are those of DESIGN.md, "Policy": the mode × access matrix, the
// temp area, the outside-every-root rule, protected subpaths and the errno
// table.
package policy

import (
	"syscall"
)

// Mode is the sandbox mode of a session.
type Mode string

// The sandbox modes.
const (
	ModeReadOnly       Mode = "read-only"
	ModeWorkspaceWrite Mode = "workspace-write" // the default
	ModeFullAccess     Mode = "full-access"
)

// Access is the explicit access level of an additional root.
type Access string

// The access levels.
const (
	AccessNone      Access = "none"
	AccessReadOnly  Access = "read-only"
	AccessReadWrite Access = "read-write"
)

// Root is an additional root: an absolute path and its access level.
type Root struct {
	Path   string `json:"path" yaml:"path"`
	Access Access `json:"access" yaml:"access"`
}

// Spec is a policy as a user writes it (JSON or YAML). Compile checks it.
type Spec struct {
	// Mode defaults to workspace-write when empty.
	Mode Mode `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Primary is the session's project root, absolute. Required.
	Primary string `json:"primary" yaml:"primary"`
	// Additional are further explicit roots; they may not overlap each other
	// or the primary root.
	Additional []Root `json:"additional,omitempty" yaml:"additional,omitempty"`
	// Temp is the platform temp area; nil (absent, or null) means
	// DefaultTemp(), an empty list means none. No omitempty: an empty list
	// must survive a JSON or YAML round trip as "none".
	Temp []string `json:"temp" yaml:"temp"`
	// Protected are subpaths, relative to each writable root, kept read-only;
	// nil means DefaultProtected, an empty list none.
	Protected []string `json:"protected" yaml:"protected"`
	// Outside is the access of paths outside every root: empty means the
	// matrix's (read-only; read-write in full-access), "none" makes them
	// unreachable (EACCES, rule "root:none", reads included), for hosts
	// whose sessions must not read the machine (the CSI plugin's pods).
	Outside Access `json:"outside,omitempty" yaml:"outside,omitempty"`
	// ProtectedOutside are places outside the writable roots (absolute,
	// clean paths) whose objects are protected by identity (DecideAt): a
	// hard link inside a root reaching one, or reaching anything below
	// one that is a directory, is EACCES "protected:<place>" under every
	// name, and so is a write at one of their paths (where the outside's
	// access may allow it: full-access).
	// It is how a sub-session keeps its parent's protected places outside
	// its roots (package mounts fills it); a place inside a root is
	// protected as a protected subpath is. At most MaxProtected.
	ProtectedOutside []string `json:"protected_outside,omitempty" yaml:"protected_outside,omitempty"`
	// ProtectedRepos are directories (absolute, clean paths) whose
	// repository, the one with its top there (a .git directory, symlink
	// or "gitdir:" file) and those enclosing it, has its config and hooks
	// protected by identity, as a writable root's own repository is:
	// those of a sub-session's parent's writable roots that are not its
	// own (package mounts fills it). At most MaxProtected.
	ProtectedRepos []string `json:"protected_repos,omitempty" yaml:"protected_repos,omitempty"`
}

// WritableRoots returns the explicit roots s lets write, as given: the
// primary unless the mode is read-only (an empty mode is workspace-write),
// then each read-write additional root, in order. The protected subpaths
// and the repository rule's identities apply below these.
func (s Spec) WritableRoots() []string {
	var out []string
	if s.Mode != ModeReadOnly {
		out = append(out, s.Primary)
	}
	for _, r := range s.Additional {
		if r.Access == AccessReadWrite {
			out = append(out, r.Path)
		}
	}
	return out
}

// DefaultProtected are the protected subpaths when Spec.Protected is nil:
// none. What git executes (config, config.worktree, commondir and hooks in
// every git directory, and what configs name) is protected by the
// repository rule (git.go) whatever the list says; the list is for other
// paths (".env").
var DefaultProtected = []string{}

// Op is a file system operation, as policy classifies it.
type Op uint8

// The operations. OpRead covers every non-mutating access (lookup, open for
// read, readdir, getattr, getxattr, readlink); the rest are writes.
const (
	OpRead Op = iota
	OpCreate
	OpMkdir
	OpMknod       // fifo or socket
	OpMknodDevice // character or block device, or a whiteout: EPERM except in full-access
	OpSymlink
	OpLink // the new name; DecideLink checks the source too
	OpUnlink
	OpRmdir
	OpRename // one end; DecideRename checks both
	OpOpenWrite
	OpSetattr
	OpSetxattr
	OpRemovexattr
	OpFallocate
	OpCopyFileRange // the destination
	OpWrite         // a generic write (CLI default for `policy check --op write`)
	numOps
)

var opNames = [numOps]string{
	OpRead: "read", OpCreate: "create", OpMkdir: "mkdir", OpMknod: "mknod",
	OpMknodDevice: "mknod-device", OpSymlink: "symlink", OpLink: "link",
	OpUnlink: "unlink", OpRmdir: "rmdir", OpRename: "rename",
	OpOpenWrite: "open-write", OpSetattr: "setattr", OpSetxattr: "setxattr",
	OpRemovexattr: "removexattr", OpFallocate: "fallocate",
	OpCopyFileRange: "copy-file-range", OpWrite: "write",
}

// String returns the op's name as ParseOp accepts it.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "op(" + itoa(int(o)) + ")"
}

// ParseOp returns the Op named s (the names String returns).
func ParseOp(s string) (Op, bool) {
	for i, n := range opNames {
		if n == s {
			return Op(i), true
		}
	}
	return 0, false
}

// Ops returns every op name, in order.
func Ops() []string { return append([]string(nil), opNames[:]...) }

// IsWrite reports whether o mutates the file system.
func (o Op) IsWrite() bool { return o != OpRead }

// Decision is the answer to one question. Errno is 0 when Allow is true.
// Rule names the rule that decided, e.g. "primary:read-write",
// "protected:git:.git/hooks", "outside:read-only", "root:none", "device".
type Decision struct {
	Allow bool
	Errno syscall.Errno
	Rule  string
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
