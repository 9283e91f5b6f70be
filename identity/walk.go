package identity

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// walk is the kernel's path walk (path_resolution(7), link_path_walk in
// fs/namei.c) done from user space with lstat(2) and readlink(2).
//
// Invariant: cur is the canonical path of a directory (no symlink, ".", ".."
// in it), so lstat(cur/name) asks exactly what the kernel asks at that step,
// and the lexical parent of cur is its physical parent.
//
// When missingOK is set (TargetKey), the first missing component switches to
// lexical mode: components are collected in missing, ".." pops them, and
// once missing is empty again the physical walk resumes from cur.
func walk(ctx context.Context, op, path string, missingOK bool) (string, error) {
	fail := func(errno error) (string, error) {
		return "", &fs.PathError{Op: op, Path: path, Err: errno}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	switch {
	case path == "":
		return fail(unix.ENOENT) // as open(""), see path_resolution(7)
	case len(path) >= unix.PathMax:
		return fail(unix.ENAMETOOLONG) // getname's limit, NUL included
	}

	cur := "/"
	if path[0] != '/' {
		wd, err := unix.Getwd() // getcwd(2): physical, unlike os.Getwd's $PWD
		if err != nil {
			return fail(errnoOf(err))
		}
		cur = wd
	}

	// todo is a stack of the components still to walk, the next one last,
	// so a symlink's target is pushed in front of the rest cheaply.
	todo := pushComponents(nil, path)
	var missing []string
	links := 0
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]

		switch {
		case name == trailingSlash:
			continue // cur is a directory, which is all a trailing "/" asks
		case len(missing) > 0:
			switch name {
			case ".":
			case "..":
				missing = missing[:len(missing)-1]
			default:
				missing = append(missing, name)
			}
			continue
		case name == "." || name == "..":
			// The kernel needs search permission on cur for "." and ".."
			// too (may_lookup in link_path_walk), though it looks nothing up.
			if err := unix.Faccessat(unix.AT_FDCWD, cur, unix.X_OK, unix.AT_EACCESS); err != nil {
				return fail(errnoOf(err))
			}
			if name == ".." {
				cur = parent(cur)
			}
			continue
		}

		next := child(cur, name)
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			if missingOK && errors.Is(err, unix.ENOENT) {
				missing = append(missing, name)
				continue
			}
			return fail(errnoOf(err))
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cur = next
		case unix.S_IFLNK:
			// The kernel counts every link followed in one walk, nested or
			// not, and fails the 41st (MAXSYMLINKS in fs/namei.c).
			links++
			if links > MaxSymlinks {
				return fail(unix.ELOOP)
			}
			target, err := ReadlinkAt(unix.AT_FDCWD, next)
			if err != nil {
				return fail(errnoOf(err))
			}
			if target == "" {
				return fail(unix.ENOENT) // the kernel's answer to an empty link
			}
			if target[0] == '/' {
				cur = "/"
			}
			todo = pushComponents(todo, target)
		default:
			// A non-directory ends the walk; anything after it (a name,
			// ".", ".." or a trailing slash) uses it as a directory.
			if len(todo) > 0 {
				return fail(unix.ENOTDIR)
			}
			cur = next
		}
	}
	for _, m := range missing {
		cur = child(cur, m)
	}
	return cur, nil
}

// trailingSlash stands for a trailing "/" on the component stack; it cannot
// be a file name. Unlike ".", it needs no search permission.
const trailingSlash = "/"

// pushComponents pushes the components of p onto the stack todo so that the
// first component is popped first. Empty components ("//", the leading "/")
// are dropped; a trailing slash becomes trailingSlash so the walk still
// requires the last object to be a directory, as the kernel does.
func pushComponents(todo []string, p string) []string {
	parts := strings.Split(p, "/")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts[len(parts)-1] = trailingSlash
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] != "" {
			todo = append(todo, parts[i])
		}
	}
	return todo
}

// parent is the parent of the canonical directory dir; "/" is its own
// parent, as in the kernel.
func parent(dir string) string {
	i := strings.LastIndexByte(dir, '/')
	if i <= 0 {
		return "/"
	}
	return dir[:i]
}

func child(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
