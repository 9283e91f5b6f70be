package mounts

// Hard links in a layer's diff and commit (issue 23). Names that are one
// file in the session's view must be one file in the project after a
// commit, as a native run leaves them, whether the session linked two new
// files, linked a project file it did not change, or linked one it
// changed; and a project file's other names change with it when the
// session writes it in place.
//
// overlayfs with index=on keeps hard links linked across copy-up: every
// copy-up is indexed (nfs_export=on indexes all), its upper object
// records its project origin (trusted.overlay.origin, a file handle), and
// a project name of that origin the session never touched is served from
// the same upper object (found through the index). So the session's view
// of a file is its upper object: the upper names of one upper inode are
// links of each other, and so is each project name of its origin that
// the merged overlay shows as that object. The first are found by the
// diff's walk of the upper directory; the second only by a walk of the
// project, done when an origin has more names than the upper directory
// shows at their own paths (a project file of several links the session
// changed in place), and checked through the merged overlay.
//
// A commit then makes the first name of a group it applies (in the diff's
// order) as any other change, and links each further name to it; a name
// whose project file already is the session's (not listed) is linked to,
// rather than copied, so that `ln old new` of an unchanged file keeps the
// project's file. Each link is made through the object's descriptor (its
// identity checked: the one put, or the one the diff saw) into a private
// directory beside its target and renamed over it.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// placed is an object put (or found) at a path, by its identity there.
type placed struct {
	path string
	id   objID
}

// linkAt makes rel below root a hard link of the object at first.path,
// which must be first.id (when not zero): a link made through its
// descriptor in a private directory beside rel (journaled in sl) and
// renamed over rel. A non-directory at rel is replaced; a directory only
// when it is was (removeAt). rel that is the object already is left as
// it is.
func linkAt(root int, sl *stageLog, first placed, rel string, was objID) error {
	sfd, err := openAt(root, first.path, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	st, err := fstatFd(sfd)
	if err != nil {
		return err
	}
	id := objID{st.Dev, st.Ino}
	if first.id != (objID{}) && id != first.id {
		return fmt.Errorf("its link %s is another %s now: changed since the diff", first.path, typeName(st.Mode))
	}
	pd, name, err := parentAt(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(pd)
	var old unix.Stat_t
	if unix.Fstatat(pd, name, &old, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if (objID{old.Dev, old.Ino}) == id {
			return nil
		}
		if old.Mode&unix.S_IFMT == unix.S_IFDIR {
			if was == (objID{}) {
				return errDirInTheWay
			}
			if err := removeAt(pd, name, was); err != nil {
				return err
			}
		}
	}
	return inStage(pd, sl.in(filepath.Dir(rel)), func(s *stage) error {
		if err := linkFd(sfd, s.fd, "o"); err != nil {
			if err == unix.ENOENT {
				if gone(sfd) {
					return fmt.Errorf("its link %s was removed since the diff", first.path)
				}
				return errStageLost // the private directory, removed under us
			}
			return err
		}
		return unix.Renameat2(s.fd, "o", pd, name, 0)
	})
}

// origin is what an upper object's trusted.overlay.origin names: the
// project's object (zero id when it has none, or none any more) and its
// link count.
type origin struct {
	id    objID
	nlink uint64
}

// originOf decodes the origin of the upper object name in the directory
// ufd (overlayfs's struct ovl_fb: version 0, magic 0xfb, its length,
// flags, the file handle's type, the file system's uuid, the handle) and
// opens it by handle below the project (lower: the project's root open
// O_RDONLY, as open_by_handle_at(2) takes it).
func originOf(ufd int, name string, lower int) origin {
	fd, err := unix.Openat(ufd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return origin{}
	}
	defer unix.Close(fd)
	v := make([]byte, 256)
	n, err := unix.Getxattr(procFd(fd), overlayXattr+"origin", v)
	const head = 21 // version, magic, len, flags, type, uuid[16]
	if err != nil || n <= head || v[0] != 0 || v[1] != 0xfb || int(v[2]) != n {
		return origin{}
	}
	h := unix.NewFileHandle(int32(v[4]), v[head:n])
	ofd, err := unix.OpenByHandleAt(lower, h, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return origin{} // gone (ESTALE): no project name shows it
	}
	defer unix.Close(ofd)
	st, err := fstatFd(ofd)
	if err != nil || st.Nlink == 0 {
		return origin{}
	}
	return origin{objID{st.Dev, st.Ino}, uint64(st.Nlink)}
}

// linkInfo is what a diff found of the session's hard links.
type linkInfo struct {
	members map[objID][]string // an upper object of several links → its paths in the session
	origins map[objID]origin   // an upper object of several links → its origin
	proj    map[string]objID   // the project's object at a member's path
}

// member records the upper object at up (ust, in the open upper directory
// ufd as name) as one of its object's names; lst is the project's object
// at the same path (nil: none).
func (d *differ) member(ufd int, name, up string, ust, lst *unix.Stat_t) {
	li := &d.li
	if li.members == nil {
		li.members, li.origins, li.proj = map[objID][]string{}, map[objID]origin{}, map[string]objID{}
	}
	id := objID{ust.Dev, ust.Ino}
	li.members[id] = append(li.members[id], up)
	if lst != nil {
		li.proj[up] = objID{lst.Dev, lst.Ino}
	}
	if _, ok := li.origins[id]; !ok {
		li.origins[id] = originOf(ufd, name, d.lread)
	}
}

// links finds the project's names of an origin the merged overlay shows
// as the session's object (walking the project when an origin has names
// the upper directory does not show at their own paths), lists those
// that differ from the project as modified, and gives every change of a
// name of several its Links.
func (d *differ) links() error {
	li := &d.li
	want := map[objID]objID{} // an origin with names to find → its upper object
	for id, o := range li.origins {
		if o.id == (objID{}) {
			continue
		}
		at := uint64(0)
		for _, p := range li.members[id] {
			if li.proj[p] == o.id {
				at++
			}
		}
		if o.nlink > at {
			want[o.id] = id
		}
	}
	if len(want) > 0 {
		if err := d.aliases(want); err != nil {
			return err
		}
	}
	of := map[string][]string{} // a change's path → every name of its object
	for _, names := range li.members {
		if len(names) < 2 {
			continue
		}
		sort.Strings(names)
		for _, p := range names {
			of[p] = names
		}
	}
	for i, c := range d.out {
		if names, ok := of[c.Path]; ok {
			d.out[i].Links = slices.DeleteFunc(slices.Clone(names), func(p string) bool { return p == c.Path })
		}
	}
	return nil
}

// aliases walks the project for the names of the origins in want and
// takes each the merged overlay shows, at its path in the session (below
// a renamed directory's new path), as want's upper object: a name of that
// object, listed as modified where the project's differs from it.
func (d *differ) aliases(want map[objID]objID) error {
	li := &d.li
	mroot, err := openRoot(d.l.Merged())
	if err != nil {
		return err
	}
	defer unix.Close(mroot)
	var renamed []api.Change // renamed directories, longest origin first
	for _, c := range d.out {
		if c.Kind == ChangeRenamed && c.Type == "dir" && c.From != "" {
			renamed = append(renamed, c)
		}
	}
	sort.Slice(renamed, func(i, j int) bool { return len(renamed[i].From) > len(renamed[j].From) })
	inSession := func(lp string) string {
		for _, c := range renamed {
			if strings.HasPrefix(lp, c.From+"/") {
				return c.Path + lp[len(c.From):]
			}
		}
		return lp
	}
	found := func(lp string, lst *unix.Stat_t) error {
		uid := want[objID{lst.Dev, lst.Ino}]
		p := inSession(lp)
		if slices.Contains(li.members[uid], p) {
			return nil
		}
		first := li.members[uid][0]
		mst, ok, err := lstatAtRoot(mroot, p)
		if err != nil || !ok {
			return nil
		}
		fst, ok, err := lstatAtRoot(mroot, first)
		if err != nil || !ok || mst.Dev != fst.Dev || mst.Ino != fst.Ino {
			return nil // not the session's object there
		}
		ust, err := lstatBeneath(d.upper, first)
		if err != nil || (objID{ust.Dev, ust.Ino}) != uid || ust.Mode&unix.S_IFMT != lst.Mode&unix.S_IFMT {
			return nil // renamed or replaced since the walk (a session racing the diff)
		}
		li.members[uid] = append(li.members[uid], p)
		li.proj[p] = objID{lst.Dev, lst.Ino}
		fields, diff, err := d.compare(first, lp, ust, lst)
		if err != nil {
			return err
		}
		if len(fields) > 0 {
			d.out = append(d.out, api.Change{Path: p, Kind: ChangeModified, Type: typeName(lst.Mode), Fields: fields, Diff: diff})
			d.deleted[p] = objID{lst.Dev, lst.Ino}
		}
		return nil
	}
	return walkProject(d.lread, "", func(lp string, st *unix.Stat_t) error {
		if _, ok := want[objID{st.Dev, st.Ino}]; ok && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return found(lp, st)
		}
		return d.ctx.Err()
	})
}

// fileRenames lists as renamed (From its path in the session) an added
// non-directory whose upper object is the copy-up of the project's object
// at a path the session deleted, and equal to it (content or link text,
// mode, owner, xattrs): a file the session renamed (mv), which a commit
// renames in the project, so that it keeps its inode and its other names.
// One added name per deleted one (a further name is a link of it).
func (d *differ) fileRenames() error {
	li := &d.li
	from := map[objID]string{} // the project's object at a deleted path → that path
	for _, c := range d.out {
		if c.Kind == ChangeDeleted && c.Type != "dir" {
			if id, ok := d.deleted[c.Path]; ok {
				from[id] = c.Path
			}
		}
	}
	if len(from) == 0 {
		return nil
	}
	upperOf := map[string]objID{}
	for id, names := range li.members {
		for _, p := range names {
			upperOf[p] = id
		}
	}
	used := map[string]bool{}
	for i, c := range d.out {
		if c.Kind != ChangeAdded || c.Type == "dir" {
			continue
		}
		id, ok := upperOf[c.Path]
		if !ok {
			continue
		}
		o := li.origins[id].id
		f, ok := from[o]
		if o == (objID{}) || !ok || used[f] {
			continue
		}
		ust, err := lstatBeneath(d.upper, c.Path)
		if err != nil {
			return err
		}
		lst, err := lstatBeneath(d.l.Lower, d.gone[f])
		if err != nil || (objID{lst.Dev, lst.Ino}) != o {
			continue // changed since the walk
		}
		fields, _, err := d.compare(c.Path, d.gone[f], ust, lst)
		if err != nil {
			return err
		}
		if len(fields) == 0 {
			d.out[i].Kind, d.out[i].From = ChangeRenamed, f
			used[f] = true
		}
	}
	return nil
}

// walkProject calls f with the path (relative to the project) and lstat
// of every object below the directory open for reading as dir (rel its
// path), each directory read through its own descriptor, never following
// a symlink.
func walkProject(dir int, rel string, f func(string, *unix.Stat_t) error) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // gone meanwhile
		}
		p := relJoin(rel, n)
		if err := f(p, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := unix.Openat(dir, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		err = walkProject(sub, p, f)
		unix.Close(sub)
		if err != nil && !os.IsPermission(err) {
			return err
		}
	}
	return nil
}

// linker is a commit's view of the session's hard links: which name of
// each file it put in the project, and which names need none.
type linker struct {
	names  map[string][]string // a path → every name of its file (of several)
	listed map[string]bool     // the diff's paths
	proj   map[string]objID    // the project's object at a name, when the diff ran
	placed map[string]placed   // a file (its first name) → the name a commit put it at
}

// newLinker returns the linker of a diff's changes and its links.
func newLinker(changes []api.Change, li linkInfo) *linker {
	k := &linker{names: map[string][]string{}, listed: map[string]bool{}, proj: li.proj, placed: map[string]placed{}}
	for _, c := range changes {
		k.listed[c.Path] = true
	}
	for _, names := range li.members {
		if len(names) > 1 {
			for _, p := range names {
				k.names[p] = names
			}
		}
	}
	return k
}

// target returns the project's object p must become a link of: the one
// this commit put at another name of its file, else the project's object
// at a name the diff does not list (the project holds the session's file
// there already); false when there is none (p is made as any change).
func (k *linker) target(p string) (placed, bool) {
	names := k.names[p]
	if len(names) == 0 {
		return placed{}, false
	}
	if pl, ok := k.placed[names[0]]; ok {
		return pl, true
	}
	for _, m := range names {
		if id, ok := k.proj[m]; ok && m != p && !k.listed[m] {
			return placed{m, id}, true
		}
	}
	return placed{}, false
}

// put records that the commit put p's file at p, as id.
func (k *linker) put(p string, id objID) {
	if names := k.names[p]; len(names) > 0 && id != (objID{}) {
		k.placed[names[0]] = placed{p, id}
	}
}

// linkedCopy copies objects from src to dst (a discard's from the
// project into the merged overlay, a rollback's from a checkpoint's view):
// a file of several names of which it copied another name already, in a
// directory's tree too, is linked to that copy (linkAt), so that hard
// links stay linked; one it cannot link is copied.
type linkedCopy struct {
	src, dst int
	sl       *stageLog
	links    map[objID]placed // a src file → where its copy was put
}

// put copies src's object at rel to dst (putObj), with tree a
// directory's whole tree, entry by entry through put.
func (c *linkedCopy) put(rel string, tree bool) error {
	st, ok, err := lstatAtRoot(c.src, rel)
	switch {
	case err != nil:
		return err
	case !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink < 2:
		return putAt(c.src, c.dst, c.sl, rel, false, "", objID{})
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if err := putAt(c.src, c.dst, c.sl, rel, false, "", objID{}); err != nil || !tree {
			return err
		}
		fd, err := openAt(c.src, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		names, err := readNames(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := c.put(relJoin(rel, n), true); err != nil {
				return err
			}
		}
		return nil
	}
	id := objID{st.Dev, st.Ino}
	if first, ok := c.links[id]; ok && linkAt(c.dst, c.sl, first, rel, objID{}) == nil {
		return nil
	}
	got, err := putObj(c.src, c.dst, c.sl, rel, false, "", objID{})
	if err != nil {
		return err
	}
	if c.links == nil {
		c.links = map[objID]placed{}
	}
	c.links[id] = placed{rel, got}
	return nil
}
