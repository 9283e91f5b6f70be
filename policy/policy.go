package policy

// SKELETON: the implementation is filled in by the policy work item.

// Policy is a compiled, immutable Spec. Safe for concurrent use.
type Policy struct{}

// Compile checks spec and canonicalizes every root.
func Compile(spec Spec) (*Policy, error) { panic("unimplemented") }

// Spec returns the compiled spec: canonical roots, defaults filled in.
func (p *Policy) Spec() Spec { panic("unimplemented") }

// Mode returns the policy's mode.
func (p *Policy) Mode() Mode { panic("unimplemented") }

// Writable reports whether any path can be written under p; a mount of a
// policy with nothing writable is mounted read-only (EROFS from the kernel).
func (p *Policy) Writable() bool { panic("unimplemented") }

// Decide answers op on physicalPath, a canonical absolute path.
func (p *Policy) Decide(op Op, physicalPath string) Decision { panic("unimplemented") }

// DecideRename answers a rename from src to dst.
func (p *Policy) DecideRename(src, dst string) Decision { panic("unimplemented") }

// DecideLink answers a hard link of src at dst.
func (p *Policy) DecideLink(src, dst string) Decision { panic("unimplemented") }
