// Package identity gives the physical identity of a path on Linux: its
// canonical path computed with the kernel's own walk semantics (path_resolution(7)),
// the target key of a path that may not exist yet, and the (dev, ino) identity
// of a file.
//
// The functions here walk the host file system by path; they are meant for
// deciding what a path means (policy, display, keys), not for race-free access.
// Race-free access is fusefs's job (openat2 relative to directory descriptors).
package identity

import (
	"context"
	"io/fs"

	"golang.org/x/sys/unix"
)

// MaxSymlinks is the number of symlinks one walk may follow before it fails
// with ELOOP; it is the kernel's limit (MAXSYMLINKS, fs/namei.c).
const MaxSymlinks = 40

// Canonical returns the canonical path of path: absolute, with every symlink
// replaced by its target as the kernel does it (component by component, ".."
// moves to the parent of the physical directory reached so far) and no ".",
// ".." or symlink component left. A relative path is taken against the
// process's working directory as getcwd(2) reports it (never $PWD). A final
// symlink is followed; a trailing slash (or a trailing "." or "..") requires
// the object to be a directory, so "file/" fails with ENOTDIR as open(2) does.
//
// Errors are *fs.PathError{Op: "canonical", Path: path} wrapping a
// syscall.Errno: ENOENT (a component is missing, or path is empty), ENOTDIR
// (a non-final component is not a directory), ELOOP (more than MaxSymlinks
// links), EACCES (a directory cannot be searched); other lstat(2)/readlink(2)
// errnos (ENAMETOOLONG, …) are passed through.
// The result agrees with `realpath P` and `cd P && pwd -P`.
func Canonical(path string) (string, error) {
	return CanonicalContext(context.Background(), path)
}

// CanonicalContext is Canonical with cancellation: ctx is checked before each
// component, and ctx.Err() is returned unwrapped once it is done.
func CanonicalContext(ctx context.Context, path string) (string, error) {
	return walk(ctx, "canonical", path, false)
}

// TargetKey returns the key of the object that path names or would name once
// created: the canonical path when it exists; otherwise the canonical path of
// the nearest existing ancestor joined with the missing suffix, cleaned
// lexically. Inside the missing suffix ".." pops the last missing component;
// a ".." that reaches the existing part pops the physical directory, and the
// physical walk resumes from there (so the key is what the kernel reaches
// after `mkdir -p` of the missing part, and stays the same once it exists).
// A dangling symlink's key is its target's key, the file open(O_CREAT)
// through the link would create (as `realpath -m` prints). Unlike
// `realpath -m`, an existing non-directory used as a directory is an error,
// and so is a symlink loop.
//
// Errors are *fs.PathError{Op: "targetkey", Path: path} wrapping ENOTDIR (an
// existing component that is not a directory is used as one), ELOOP (more
// than MaxSymlinks links), EACCES, or ENOENT (empty path, or a relative path
// while the working directory is gone).
func TargetKey(path string) (string, error) {
	return TargetKeyContext(context.Background(), path)
}

// TargetKeyContext is TargetKey with cancellation: ctx is checked before each
// component, and ctx.Err() is returned unwrapped once it is done.
func TargetKeyContext(ctx context.Context, path string) (string, error) {
	return walk(ctx, "targetkey", path, true)
}

// FileID is the identity of a file: the device and inode numbers from stat(2).
type FileID struct {
	Dev uint64
	Ino uint64
}

// FileIDOf returns the FileID of the object path names, following symlinks
// as stat(2) does. Errors are *fs.PathError{Op: "stat", Path: path} wrapping
// the errno (ENOENT, ENOTDIR, ELOOP, EACCES, …).
func FileIDOf(path string) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FileID{}, &fs.PathError{Op: "stat", Path: path, Err: ErrnoOf(err)}
	}
	return FileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// SameFile reports whether a and b name the same file (same FileID), following
// symlinks. An error from either stat is returned as is.
func SameFile(a, b string) (bool, error) {
	ia, err := FileIDOf(a)
	if err != nil {
		return false, err
	}
	ib, err := FileIDOf(b)
	if err != nil {
		return false, err
	}
	return ia == ib, nil
}
