package mounts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
)

// The daemon never walks its own mounts. A thread of the FUSE server blocked
// in a request to its own mount cannot be answered once the server is
// killed, and the kernel then keeps the dying process (and the mount) stuck
// until the connection is aborted by hand. So Chdir and Resolve walk the
// backing tree on the host and ask fusefs.PresentLink how the mount shows
// each symlink (DESIGN.md, "Symlinks"): the result is what the kernel would
// reach in the mount.

// mountWalk is the result of walking a path as a process in a session sees
// it.
type mountWalk struct {
	// InMount is false when the walk left the mount (an absolute path
	// elsewhere, ".." above the mount root, a followed absolute link).
	InMount bool
	// MountPath is the path inside the mount (InMount only).
	MountPath string
	// Key is the physical key: the object reached, or for a missing one the
	// physical path of its nearest existing ancestor plus the missing rest.
	Key string
	// Exists and IsDir describe the object reached.
	Exists, IsDir bool
}

// frame is one step of a walk inside the mount: the name in the mount and
// the physical object it stands for.
type frame struct{ name, phys string }

// mountView is what walkMount needs of a session.
type mountView struct {
	root, mp string
	symlinks fusefs.SymlinkMode
	// avoid are mountpoints a host walk must not enter (every session's):
	// walking them would make the daemon a client of its own mounts.
	avoid func(path string) (string, bool)
}

// walk resolves path relative to the directory cwdRel inside the mount (or
// absolute), without touching the mount.
func (v mountView) walk(ctx context.Context, cwdRel, path string) (mountWalk, error) {
	var todo []string
	switch {
	case filepath.IsAbs(path) && (path == v.mp || strings.HasPrefix(path, v.mp+"/")):
		todo = split(path[len(v.mp):])
	case filepath.IsAbs(path):
		return v.hostWalk(path)
	default:
		todo = append(split(cwdRel), split(path)...)
	}
	frames := []frame{{"", v.root}}
	links := 0
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return mountWalk{}, err
		}
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(frames) == 1 {
				// Above the mount root: the kernel leaves the mount.
				return v.hostWalk(filepath.Dir(v.mp) + "/" + strings.Join(todo, "/"))
			}
			frames = frames[:len(frames)-1]
			continue
		}
		top := frames[len(frames)-1].phys
		p := top + "/" + c
		if top == "/" {
			p = "/" + c
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			suffix := filepath.Clean(strings.Join(append([]string{c}, todo...), "/"))
			if suffix == ".." || strings.HasPrefix(suffix, "../") {
				return mountWalk{}, &fs.PathError{Op: "walk", Path: p, Err: syscall.ENOENT}
			}
			return mountWalk{InMount: true, MountPath: v.mountPath(frames) + "/" + suffix, Key: filepath.Join(top, suffix)}, nil
		}
		if err != nil {
			return mountWalk{}, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			frames = append(frames, frame{c, p})
			continue
		}
		if links++; links > identity.MaxSymlinks {
			return mountWalk{}, &fs.PathError{Op: "walk", Path: p, Err: syscall.ELOOP}
		}
		text, err := os.Readlink(p)
		if err != nil {
			return mountWalk{}, err
		}
		if v.symlinks == fusefs.SymlinksFollow {
			// The link as stored: the kernel walks its text from here.
			switch {
			case !filepath.IsAbs(text):
				todo = append(split(text), todo...)
			case text == v.mp || strings.HasPrefix(text, v.mp+"/"):
				frames = frames[:1]
				todo = append(split(text[len(v.mp):]), todo...)
			default:
				return v.hostWalk(text + "/" + strings.Join(todo, "/"))
			}
			continue
		}
		// The mount's own rules, from the same code (fusefs.PresentLink).
		lv := fusefs.PresentLink(v.root, v.mp, v.symlinks, top, text)
		switch {
		case lv.Errno != 0:
			return mountWalk{}, &fs.PathError{Op: "walk", Path: v.mountPath(frames) + "/" + c, Err: lv.Errno}
		case lv.Text != "":
			// Shown as a link: the kernel walks its (relative) text from
			// this directory inside the mount.
			todo = append(split(lv.Text), todo...)
		default:
			// Served in place, as its target.
			frames = append(frames, frame{c, lv.Key})
		}
	}
	last := frames[len(frames)-1].phys
	fi, err := os.Stat(last)
	if err != nil {
		return mountWalk{}, err
	}
	return mountWalk{InMount: true, MountPath: v.mountPath(frames), Key: last, Exists: true, IsDir: fi.IsDir()}, nil
}

// mountPath returns the path inside the mount of frames.
func (v mountView) mountPath(frames []frame) string {
	p := v.mp
	for _, f := range frames[1:] {
		p += "/" + f.name
	}
	return p
}

// hostWalk resolves an absolute host path (outside the mount) physically.
// A path that lexically enters the session's own mount is walked inside it;
// one that enters another session's mount is refused (the daemon does not
// walk its own mounts).
func (v mountView) hostWalk(path string) (mountWalk, error) {
	clean := filepath.Clean(path)
	if identity.Within(clean, v.mp) {
		return v.walk(context.Background(), "", clean)
	}
	if v.avoid != nil {
		if mp, ok := v.avoid(clean); ok {
			return mountWalk{}, fmt.Errorf("%s: inside the wsfs mount %s, which this daemon serves; resolve it in that session", clean, mp)
		}
	}
	key, err := identity.TargetKey(path)
	if err != nil {
		return mountWalk{}, err
	}
	out := mountWalk{Key: key}
	if fi, err := os.Stat(key); err == nil {
		out.Exists, out.IsDir = true, fi.IsDir()
	}
	return out, nil
}

// split splits a slash-separated path into its components.
func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}
