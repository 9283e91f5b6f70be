package mounts

// Small path and error helpers shared by the files of this package.

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/wsfs/wsfs/identity"
)

// inMount returns the path inside mountpoint mp of rel ("." is mp).
func inMount(mp, rel string) string {
	if rel == "." || rel == "" {
		return mp
	}
	return mp + "/" + rel
}

// physicalOf returns the physical path of the directory rel inside a mount
// of root: the host walk of root/rel (an escaping link served in place leads
// to its target). When the walk fails, the lexical join is returned.
func physicalOf(root, rel string) string {
	if root == "" {
		return "" // an unreadable record
	}
	p := filepath.Join(root, rel)
	if c, err := identity.Canonical(p); err == nil {
		return c
	}
	return p
}

// dirEmpty reports whether directory dir has no entries.
func dirEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// isDir reports whether path is (or links to) a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// mkdirAll is os.MkdirAll with mode exact on each directory it makes, not
// narrowed by the process umask (only fusefs.Mount sets the umask to 0): the
// mount base must stay searchable by the users of --allow-other sessions
// whatever umask the daemon was started with. Existing directories keep
// their mode. It returns the directories it made, innermost first (for an
// undo).
func mkdirAll(path string, mode os.FileMode) (made []string, err error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			break
		}
		made = append(made, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	if err := os.MkdirAll(path, mode); err != nil {
		return made, err
	}
	for _, p := range made {
		if err := os.Chmod(p, mode); err != nil {
			return made, err
		}
	}
	return made, nil
}

// makeTmpDir makes a session's private temp directory dir (its parent
// exists), or keeps the one there: mode 0700 (root's, the daemon's), or 1777
// (sticky, as /tmp) for a session with users, whose jails run as a listed
// uid and must write their TMPDIR. dir lies in the daemon's state
// directory (mode 0700), so outside a jail no other user reaches it.
func makeTmpDir(dir string, users []uint32) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	mode := os.FileMode(0o700)
	if len(users) > 0 {
		mode = 0o777 | os.ModeSticky
	}
	return os.Chmod(dir, mode)
}

// systemDirs are the directories every process needs to run (binaries,
// the dynamic loader and libraries, /etc's passwd, ld.so.cache and
// resolv.conf).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// SystemDir reports whether the canonical path p is, contains or lies
// inside a system directory (/usr, /bin, /sbin, /lib, /lib32, /lib64,
// /libx32, /etc; "/" contains them all). A session root there is not
// hidden from other sessions (their host views and jails show it
// read-only, as the host has it): hiding it would take the loader, the
// libraries or the very binary away from every other session's jail.
// What such a session may do is its own policy's to decide, as for any
// root.
func SystemDir(p string) bool {
	for _, d := range systemDirs {
		if identity.Within(p, d) || identity.Within(d, p) {
			return true
		}
	}
	return false
}

// reversed returns a copy of s, last first.
func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}
