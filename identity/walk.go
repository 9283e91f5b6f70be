package identity

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// Walker is the one physical walk (path_resolution(7)) with the hooks a
// caller that serves mounts needs: it never looks into a mount it is told
// about, and it follows a link as a mount presents it. The zero Walker is
// the plain walk of Canonical and TargetKey.
//
// One walk carries one context and one budget of MaxSymlinks links from its
// first component to its last, across mounts and link texts alike.
type Walker struct {
	// Cwd is where a relative path starts: an absolute path with no
	// symlink, "." or ".." component, in the caller's view (so it may lie
	// in a mount Mount maps). Empty means the process's working directory
	// as getcwd(2) reports it.
	Cwd string
	// Mount, when set, is asked about every absolute path the walk is
	// about to look up, before lstat(2) touches it. For a mountpoint the
	// caller serves it returns the canonical physical directory the mount
	// shows there and true: the walk continues there without entering the
	// mount, and ".." from that directory returns to the mountpoint's
	// parent, as the kernel's ".." crosses a mount upwards. A non-nil error
	// (an errno, for *fs.PathError) ends the walk: a place the caller must
	// not look into.
	Mount func(path string) (phys string, ok bool, err error)
	// Link, when set, returns the text the walk follows for the symlink at
	// the canonical path link whose stored text is text (how a mount
	// presents it); nil follows the stored text. An error (an errno) ends
	// the walk.
	Link func(link, text string) (string, error)
}

// Canonical is the package's Canonical with w's hooks; it never returns a
// path inside a mount Mount maps (the physical path the mount shows is
// returned instead).
func (w Walker) Canonical(ctx context.Context, path string) (string, error) {
	return w.walk(ctx, "canonical", path, false)
}

// TargetKey is the package's TargetKey with w's hooks.
func (w Walker) TargetKey(ctx context.Context, path string) (string, error) {
	return w.walk(ctx, "targetkey", path, true)
}

// crossing is a mapped mount the walk is in: phys is the directory the
// mount shows at its mountpoint mp.
type crossing struct{ phys, mp string }

func walk(ctx context.Context, op, path string, missingOK bool) (string, error) {
	return Walker{}.walk(ctx, op, path, missingOK)
}

// walk is the kernel's path walk (path_resolution(7), link_path_walk in
// fs/namei.c) done from user space with lstat(2) and readlink(2).
//
// Invariant: cur is the canonical path of a directory (no symlink, ".", ".."
// in it), so lstat(cur/name) asks exactly what the kernel asks at that step,
// and the lexical parent of cur is its physical parent (but at the top of a
// mapped mount, where ".." leaves for the mountpoint's parent).
//
// When missingOK is set (TargetKey), the first missing component switches to
// lexical mode: components are collected in missing, ".." pops them, and
// once missing is empty again the physical walk resumes from cur.
func (w Walker) walk(ctx context.Context, op, path string, missingOK bool) (string, error) {
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
	// todo is a stack of the components still to walk, the next one last,
	// so a symlink's target is pushed in front of the rest cheaply.
	todo := pushComponents(nil, path)
	var crossings []crossing
	if path[0] != '/' {
		switch {
		case w.Cwd != "" && w.Cwd[0] == '/':
			// Walked first: it has no link, so it costs no budget, and a
			// cwd in a mapped mount enters it as a path would.
			todo = pushComponents(todo, w.Cwd)
		case w.Cwd != "":
			return fail(unix.EINVAL)
		default:
			wd, err := unix.Getwd() // getcwd(2): physical, unlike os.Getwd's $PWD
			if err != nil {
				return fail(ErrnoOf(err))
			}
			cur = wd
		}
	}
	var missing []string
	links := 0
	// todo[linkBase:] came from link texts (-1: none): a ".." there moves
	// physically, since a mount presents a link whose text climbs out of
	// the directory it shows with a text that reaches the same physical
	// object (DESIGN.md, "Links are links").
	linkBase := -1
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		fromLink := linkBase >= 0 && len(todo) >= linkBase
		if !fromLink {
			linkBase = -1
		}

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
				return fail(ErrnoOf(err))
			}
			if name == ".." {
				if n := len(crossings); n > 0 && cur == crossings[n-1].phys {
					if !fromLink {
						cur = parent(crossings[n-1].mp)
					} else {
						cur = parent(cur)
					}
					crossings = crossings[:n-1]
				} else {
					cur = parent(cur)
				}
			}
			continue
		}

		next := child(cur, name)
		if w.Mount != nil {
			phys, ok, err := w.Mount(next)
			if err != nil {
				return fail(ErrnoOf(err))
			}
			if ok {
				crossings = append(crossings, crossing{phys: phys, mp: next})
				cur = phys
				continue
			}
		}
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			if missingOK && errors.Is(err, unix.ENOENT) {
				missing = append(missing, name)
				continue
			}
			return fail(ErrnoOf(err))
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
				return fail(ErrnoOf(err))
			}
			if w.Link != nil {
				if target, err = w.Link(next, target); err != nil {
					return fail(ErrnoOf(err))
				}
			}
			if target == "" {
				return fail(unix.ENOENT) // the kernel's answer to an empty link
			}
			if target[0] == '/' {
				cur, crossings = "/", nil
			}
			if linkBase < 0 {
				linkBase = len(todo)
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
