package mounts

// The rights a layer verb acts with (layer.go, layerdiff.go,
// layerckpt.go). The daemon is root, but what a commit does to the
// project, and what a discard or a rollback does to the session's view,
// must never be more than the session itself could do through its own
// mount: its policy (the verb's decider) and the host permissions of
// the users it serves. In a session with users (--users) the verb's
// file system work on the project or the merged overlay runs with a
// user's identity and no capability (fusefs.RunAs): the kernel decides
// it as for that user (mode bits, ACLs, sticky directories, the owner
// rules of chmod, chown and utimensat, protected_hardlinks), so a tree
// the user could not remove is not removed, an object it could not
// chmod is not re-owned, whatever the session renames under the verb. A
// session without users (root-only) acts with the daemon's rights, as
// its root processes could.
//
// Three steps run as the daemon: reading the layer's own state (the
// diff, the baseline, overlayfs's marks in the upper directory);
// putting the project's objects back in the layer (a discard's copy: it
// gives the session nothing the project does not hold; a rollback's of
// the checkpoint's, the layer's own earlier state) and removing a
// non-directory there (whatever the session renamed to that name it
// could have removed itself); and the commit of a content change of a
// file the user may write but could not replace (owned by another user,
// or in a directory it cannot write): checked first with the user's
// rights (it may write the project's very file, and make its attributes
// the layer's), then written as a replacement by the daemon: the content
// an in-place write would have left, in a new inode.

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/fusefs"
)

// rights are the identities a verb acts with: none is the daemon's own.
type rights []fusefs.Cred

// rights returns the rights of the layer's verbs: its users' (Users), or
// the daemon's when it has none or the daemon is not root (it has no
// other rights to give up).
func (l *Layer) rights() rights {
	if len(l.Users) == 0 || os.Geteuid() != 0 {
		return nil
	}
	r := make(rights, 0, len(l.Users))
	for _, u := range l.Users {
		r = append(r, fusefs.UserCred(u))
	}
	return r
}

// denied reports whether err is a permission refusal (EACCES, EPERM).
func denied(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}

// do runs f with the rights r: with no users as the daemon; else as the
// user owner first (when it is one of them: objects belong to their
// creator), then as each other user in turn while f is refused (EACCES,
// EPERM), since any of them could have done it through the mount. It
// returns f's error; when every user was refused, the refusal of the one
// that got furthest (EPERM, an owner rule, over EACCES, a permission),
// the first such.
func (r rights) do(owner uint32, f func() error) error {
	if len(r) == 0 {
		return f()
	}
	order := make([]fusefs.Cred, 0, len(r))
	for _, c := range r {
		if c.Uid == owner {
			order = append(order, c)
		}
	}
	for _, c := range r {
		if c.Uid != owner {
			order = append(order, c)
		}
	}
	var first error
	for _, c := range order {
		err := fusefs.RunAs(c, f)
		if !denied(err) {
			return err
		}
		if first == nil || errors.Is(err, unix.EPERM) && !errors.Is(first, unix.EPERM) {
			first = err
		}
	}
	return first
}

// ownerAt returns the owner of rel below root (the daemon's lstat), or
// noOwner.
func ownerAt(root int, rel string) uint32 {
	st, ok, err := lstatAtRoot(root, rel)
	if err != nil || !ok {
		return noOwner
	}
	return st.Uid
}

// noOwner is an owner hint that names no user.
const noOwner = ^uint32(0)

// removeNonDirAs removes rel below root (removeAllAt) with the rights r;
// refused there, a non-directory is removed by the daemon, as the session
// could have (see above): a directory, never.
func removeNonDirAs(r rights, root int, rel string) error {
	err := r.do(ownerAt(root, rel), func() error { return removeAllAt(root, rel, objID{}) })
	if !denied(err) {
		return err
	}
	pd, name, perr := parentAt(root, rel)
	if perr != nil {
		return err
	}
	defer unix.Close(pd)
	var st unix.Stat_t
	if unix.Fstatat(pd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return err
	}
	if uerr := unix.Unlinkat(pd, name, 0); uerr != nil && uerr != unix.ENOENT {
		return uerr
	}
	return nil
}
