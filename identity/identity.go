// Package identity gives the physical identity of a path on Linux: its
// canonical path computed with the kernel's own walk semantics (path_resolution(7)),
// the target key of a path that may not exist yet, and the (dev, ino) identity
// of a file.
//
// The functions here walk the host file system by path; they are meant for
// deciding what a path means (policy, display, keys), not for race-free access.
// Race-free access is fusefs's job (openat2 relative to directory descriptors).
package identity

// SKELETON: the implementation is filled in by the identity work item.

// MaxSymlinks is the number of symlinks one walk may follow before it fails
// with ELOOP; it is the kernel's limit (MAXSYMLINKS, fs/namei.c).
const MaxSymlinks = 40

// Canonical returns the canonical path of path: absolute, with every symlink
// replaced by its target as the kernel does it (component by component, ".."
// moves to the parent of the physical directory reached so far) and no ".",
// ".." or symlink component left. A relative path is taken against the
// process's working directory.
//
// Errors are *fs.PathError wrapping a syscall.Errno: ENOENT (a component is
// missing), ENOTDIR (a non-final component is not a directory), ELOOP (more
// than MaxSymlinks links), EACCES (a directory cannot be searched).
// The result agrees with `realpath P` and `cd P && pwd -P`.
func Canonical(path string) (string, error) { panic("unimplemented") }

// TargetKey returns the key of the object that path names or would name once
// created: the canonical path when it exists; otherwise the canonical path of
// the nearest existing ancestor joined with the missing suffix, cleaned
// lexically. A dangling symlink's key is its target's key, the file
// open(O_CREAT) through the link would create (as `realpath -m` prints).
//
// Errors are *fs.PathError wrapping ENOTDIR (an existing component that is not
// a directory is used as one), ELOOP, or EACCES.
func TargetKey(path string) (string, error) { panic("unimplemented") }

// FileID is the identity of a file: the device and inode numbers from stat(2).
type FileID struct {
	Dev uint64
	Ino uint64
}

// FileIDOf returns the FileID of the object path names, following symlinks
// as stat(2) does. Errors are *fs.PathError wrapping the errno.
func FileIDOf(path string) (FileID, error) { panic("unimplemented") }

// SameFile reports whether a and b name the same file (same FileID), following
// symlinks. An error from either stat is returned as is.
func SameFile(a, b string) (bool, error) { panic("unimplemented") }
