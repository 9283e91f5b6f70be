package mounts

// Diff, commit and discard of a layer (layer.go).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// The change kinds (api.Change.Kind).
const (
	ChangeAdded       = "added"
	ChangeDeleted     = "deleted"
	ChangeModified    = "modified"
	ChangeTypeChanged = "type_changed"
	ChangeRenamed     = "renamed"
)

// typeName names a file type as api.Change.Type does.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char"
	case unix.S_IFBLK:
		return "block"
	}
	return "unknown"
}

// join joins a relative directory ("" is the top) and a name.
func relJoin(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// Diff lists what the session changed in the project (walking the upper
// directory against the project), sorted by path with parents first. With
// text, a modified text file gets its unified diff. Each change whose path
// the project changed at since the session's first write there carries
// Conflict.
func (l *Layer) Diff(text bool) ([]api.Change, error) {
	out, _, err := l.diff(text)
	return out, err
}

// DiffUnder is Diff with the unified diffs computed only under paths
// (relative to the project; none: everywhere) and the walk stopped with
// ctx's error once ctx is done (a client that went away).
func (l *Layer) DiffUnder(ctx context.Context, paths []string, text bool) ([]api.Change, error) {
	out, _, err := l.diffWith(ctx, paths, text)
	return out, err
}

// objID is an object's device and inode number.
type objID struct{ dev, ino uint64 }

// diffInfo is what a commit needs of a diff besides its changes.
type diffInfo struct {
	// deleted holds the identity of the project's object at each deleted
	// path, each path where a non-directory replaces it (what a commit
	// may remove there), each modified path (the only object a commit
	// may change there) and each renamed directory whose own attributes
	// changed (its origin: the only object a commit may give them).
	deleted map[string]objID
	// li holds the session's hard links (layerlinks.go).
	li linkInfo
}

// diff is Diff, with the diffInfo a commit needs.
func (l *Layer) diff(text bool) ([]api.Change, *diffInfo, error) {
	return l.diffWith(context.Background(), nil, text)
}

// diffWith is diff with DiffUnder's paths and ctx.
func (l *Layer) diffWith(ctx context.Context, textUnder []string, text bool) ([]api.Change, *diffInfo, error) {
	base, err := readBaseline(filepath.Join(l.Dir, layerBaseline))
	if err != nil {
		return nil, nil, fmt.Errorf("layer %q: baseline: %s", l.Dir, identity.ErrnoText(err))
	}
	d := &differ{l: l, upper: l.Upper(), base: base, ctx: ctx, text: text, textUnder: textUnder, textLeft: maxDiffTotal, deleted: map[string]objID{}, withLinks: true, gone: map[string]string{}}
	if err := d.run(); err != nil {
		return nil, nil, err
	}
	for i := range d.out {
		if ok, why := l.conflict(base, d.out[i].Path); ok {
			d.out[i].Conflict = why
		}
	}
	return d.out, &diffInfo{deleted: d.deleted, li: d.li}, nil
}

// changesOf lists what the upper directory upper (the layer's own, or a
// checkpoint's copy of one) holds that differs from the project now,
// sorted as Diff sorts: without the baseline, so a copy a commit applied
// is listed wherever it differs from the project (more paths than Diff,
// never fewer), and without conflicts or unified diffs.
func (l *Layer) changesOf(upper string) ([]api.Change, error) {
	d := &differ{l: l, upper: upper, base: map[string]baseRec{}, ctx: context.Background(), deleted: map[string]objID{}, gone: map[string]string{}}
	if err := d.run(); err != nil {
		return nil, err
	}
	return d.out, nil
}

// run walks d.upper against the project into d.out, sorted.
func (d *differ) run() error {
	l := d.l
	var err error
	if d.uroot, err = openRoot(d.upper); err != nil {
		return fmt.Errorf("layer %q: diff: %s: %s", l.Dir, d.upper, identity.ErrnoText(err))
	}
	defer unix.Close(d.uroot)
	if d.lroot, err = openRoot(l.Lower); err != nil {
		return fmt.Errorf("layer %q: diff: project %s: %s", l.Dir, l.Lower, identity.ErrnoText(err))
	}
	defer unix.Close(d.lroot)
	// The root's own attributes (chmod -R, say, reaches it too).
	ust, uerr := lstatBeneath(d.upper, ".")
	lst, lerr := lstatBeneath(l.Lower, ".")
	if uerr != nil || lerr != nil {
		return fmt.Errorf("layer %q: diff: the root: %s", l.Dir, identity.ErrnoText(errors.Join(uerr, lerr)))
	}
	if fields, _, _ := d.compare(".", ".", ust, lst); len(fields) > 0 {
		d.out = append(d.out, api.Change{Path: ".", Kind: ChangeModified, Type: "dir", Fields: fields})
	}
	if d.withLinks {
		if d.lread, err = unix.Open(l.Lower, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("layer %q: diff: project %s: %s", l.Dir, l.Lower, identity.ErrnoText(err))
		}
		defer unix.Close(d.lread)
	}
	if err := d.walk("", "", true, false); err != nil {
		return fmt.Errorf("layer %q: diff: %s", l.Dir, identity.ErrnoText(err))
	}
	if d.withLinks {
		if err := d.links(); err != nil {
			return fmt.Errorf("layer %q: diff: hard links: %s", l.Dir, identity.ErrnoText(err))
		}
		if err := d.fileRenames(); err != nil {
			return fmt.Errorf("layer %q: diff: renamed files: %s", l.Dir, identity.ErrnoText(err))
		}
	}
	sortChanges(d.out)
	return nil
}

// sortChanges sorts by path, component by component (a directory before
// everything below it).
func sortChanges(cs []api.Change) {
	key := func(p string) string {
		if p == "." {
			return "" // the root first
		}
		return "\x01" + strings.ReplaceAll(p, "/", "\x00")
	}
	sort.SliceStable(cs, func(i, j int) bool { return key(cs[i].Path) < key(cs[j].Path) })
}

// differ is one Diff walk.
type differ struct {
	l            *Layer
	upper        string // the upper directory walked (the layer's, or a checkpoint's copy)
	text         bool
	out          []api.Change
	uroot, lroot int              // the upper directory and the project, open O_PATH
	deleted      map[string]objID // the project's object a commit removes at a path
	base         map[string]baseRec
	ctx          context.Context
	textUnder    []string // unified diffs only below these (none: all)
	textLeft     int      // bytes of diff text left in this answer (maxDiffTotal)
	// withLinks: find the session's hard links (layerlinks.go) into li,
	// reading the project by handle through lread (its root, O_RDONLY).
	withLinks bool
	li        linkInfo
	lread     int
	gone      map[string]string // a deleted path → its project path
}

// walk compares the upper directory urel with the project's directory lrel
// (the same path, or a renamed directory's origin). lowerDir says the
// project has a directory there; opaque that the upper one hides it (the
// session removed and made it again): the project's names missing from it
// are deleted.
func (d *differ) walk(urel, lrel string, lowerDir, opaque bool) error {
	ufd, err := openBeneath(d.upper, urel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(ufd), urel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := d.ctx.Err(); err != nil {
			return err
		}
		up, lp := relJoin(urel, name), relJoin(lrel, name)
		var ust unix.Stat_t
		if err := unix.Fstatat(ufd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		var lst *unix.Stat_t
		if lowerDir && !opaque {
			lst, _ = lstatBeneath(d.l.Lower, lp)
		} else if lowerDir && opaque {
			// The project's object at the same path, compared so that a
			// tree removed and made again equal is no change.
			lst, _ = lstatBeneath(d.l.Lower, lp)
		}
		if d.withLinks && ust.Nlink > 1 && ust.Mode&unix.S_IFMT != unix.S_IFDIR && !isWhiteout(&ust) {
			// Maybe one of several names of one file (an indexed copy-up
			// has a link in the index too).
			d.member(ufd, name, up, &ust, lst)
		}
		if ust.Mode&unix.S_IFMT != unix.S_IFDIR && committedCopy(d.base, up, &ust) {
			// The copy a commit applied, unchanged since: a
			// difference is the host's.
			continue
		}
		if isWhiteout(&ust) {
			if lst != nil {
				d.out = append(d.out, api.Change{Path: up, Kind: ChangeDeleted, Type: typeName(lst.Mode), Diff: d.wholeDiff(up, lp, false)})
				d.deleted[up] = objID{lst.Dev, lst.Ino}
				d.gone[up] = lp
			}
			continue
		}
		if ust.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := d.dir(ufd, name, up, lp, lst); err != nil {
				return err
			}
			continue
		}
		switch {
		case lst == nil:
			d.out = append(d.out, api.Change{Path: up, Kind: ChangeAdded, Type: typeName(ust.Mode), Diff: d.wholeDiff(up, lp, true)})
		case lst.Mode&unix.S_IFMT != ust.Mode&unix.S_IFMT:
			d.out = append(d.out, api.Change{Path: up, Kind: ChangeTypeChanged, Type: typeName(ust.Mode)})
			d.deleted[up] = objID{lst.Dev, lst.Ino}
		default:
			fields, diff, err := d.compare(up, lp, &ust, lst)
			var rt errRetyped
			if errors.As(err, &rt) {
				d.out = append(d.out, api.Change{Path: up, Kind: ChangeTypeChanged, Type: typeName(rt.mode)})
				continue
			}
			if err != nil {
				return err
			}
			if len(fields) > 0 {
				d.out = append(d.out, api.Change{Path: up, Kind: ChangeModified, Type: typeName(ust.Mode), Fields: fields, Diff: diff})
				d.deleted[up] = objID{lst.Dev, lst.Ino}
			}
		}
	}
	if opaque && lowerDir {
		// The project's names the session's new directory lacks.
		lfd, err := openBeneath(d.l.Lower, lrel, unix.O_RDONLY|unix.O_DIRECTORY)
		if err == nil {
			lf := os.NewFile(uintptr(lfd), lrel)
			lnames, _ := lf.Readdirnames(-1)
			lf.Close()
			for _, name := range lnames {
				if slices.Contains(names, name) {
					continue
				}
				if st, err := lstatBeneath(d.l.Lower, relJoin(lrel, name)); err == nil {
					d.out = append(d.out, api.Change{Path: relJoin(urel, name), Kind: ChangeDeleted, Type: typeName(st.Mode)})
					d.deleted[relJoin(urel, name)] = objID{st.Dev, st.Ino}
					d.gone[relJoin(urel, name)] = relJoin(lrel, name)
				}
			}
		}
	}
	return nil
}

// dir handles an upper directory name (up) in the open upper directory
// ufd: added, a type change, renamed (overlayfs's redirect), made again
// (opaque), or changed below and perhaps in its own attributes.
func (d *differ) dir(ufd int, name, up, lp string, lst *unix.Stat_t) error {
	cfd, err := unix.Openat(ufd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	redirect := overlayAttr(cfd, "redirect")
	opaque := overlayAttr(cfd, "opaque") == "y"
	unix.Close(cfd)
	lowerIsDir := lst != nil && lst.Mode&unix.S_IFMT == unix.S_IFDIR
	if redirect != "" && !opaque {
		from := strings.TrimPrefix(redirect, "/")
		if !strings.HasPrefix(redirect, "/") {
			from = relJoin(filepath.Dir(lp), redirect)
			if filepath.Dir(lp) == "." {
				from = redirect
			}
		}
		if fst, err := lstatBeneath(d.l.Lower, from); err == nil && fst.Mode&unix.S_IFMT == unix.S_IFDIR {
			switch {
			case lst == nil:
				// Its own attributes against its origin's: a commit
				// renames the project's directory, then gives it these.
				var ust unix.Stat_t
				if err := unix.Fstatat(ufd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return err
				}
				fields, _, err := d.compare(up, from, &ust, fst)
				if err != nil {
					return err
				}
				d.out = append(d.out, api.Change{Path: up, Kind: ChangeRenamed, Type: "dir", From: from, Fields: fields})
				if len(fields) > 0 {
					d.deleted[up] = objID{fst.Dev, fst.Ino}
				}
			case !lowerIsDir:
				d.out = append(d.out, api.Change{Path: up, Kind: ChangeTypeChanged, Type: "dir", From: from})
			}
			return d.walk(up, from, true, false)
		}
	}
	switch {
	case lst == nil:
		d.out = append(d.out, api.Change{Path: up, Kind: ChangeAdded, Type: "dir"})
		return d.walk(up, lp, false, false)
	case !lowerIsDir:
		d.out = append(d.out, api.Change{Path: up, Kind: ChangeTypeChanged, Type: "dir"})
		return d.walk(up, lp, false, false)
	}
	var ust unix.Stat_t
	if err := unix.Fstatat(ufd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	fields, _, err := d.compare(up, lp, &ust, lst)
	if err != nil {
		return err
	}
	if len(fields) > 0 && !committedCopy(d.base, up, &ust) {
		d.out = append(d.out, api.Change{Path: up, Kind: ChangeModified, Type: "dir", Fields: fields})
		d.deleted[up] = objID{lst.Dev, lst.Ino}
	}
	return d.walk(up, lp, true, opaque)
}

// compare returns what differs between the upper object up and the
// project's lp (same type): content or link text, mode, owner, xattrs;
// and, for text content asked for, the unified diff.
func (d *differ) compare(up, lp string, ust, lst *unix.Stat_t) ([]string, string, error) {
	var fields []string
	var diff string
	switch ust.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		same, text, err := d.compareFiles(up, lp)
		if err != nil {
			return nil, "", err
		}
		if !same {
			fields = append(fields, "content")
			diff = text
		}
	case unix.S_IFLNK:
		ut, _ := readlinkBeneath(d.upper, up)
		lt, _ := readlinkBeneath(d.l.Lower, lp)
		if ut != lt {
			fields = append(fields, "target")
		}
	}
	if ust.Mode&0o7777 != lst.Mode&0o7777 && ust.Mode&unix.S_IFMT != unix.S_IFLNK {
		fields = append(fields, "mode")
	}
	if ust.Uid != lst.Uid || ust.Gid != lst.Gid {
		fields = append(fields, "owner")
	}
	if ust.Mode&unix.S_IFMT != unix.S_IFLNK {
		ux, lx := xattrsAt(d.upper, up), xattrsAt(d.l.Lower, lp)
		if !mapsEqual(ux, lx) {
			fields = append(fields, "xattr")
		}
	}
	return fields, diff, nil
}

// mapsEqual reports whether a and b hold the same pairs.
func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// errRetyped is compareFiles's error when a side is no regular file
// any more (a session swapped it, for a FIFO say): it is then reported by
// its type, never opened.
type errRetyped struct{ mode uint32 }

func (e errRetyped) Error() string { return "now a " + typeName(e.mode) }

// compareFiles reports whether the upper regular file up and the
// project's lp hold the same bytes, streaming (sizes first, then equal
// sizes chunk by chunk; neither side is ever read whole), and, for text
// asked for and both sides within maxDiffText, their unified diff. A side
// no longer a regular file: errRetyped (the upper's) or different content
// (the project's).
func (d *differ) compareFiles(up, lp string) (bool, string, error) {
	uf, ust, err := openRegular(d.uroot, up)
	if err == errNotRegular {
		return false, "", errRetyped{ust.Mode}
	}
	if err != nil {
		return false, "", err
	}
	defer uf.Close()
	lf, lst, err := openRegular(d.lroot, lp)
	if err != nil {
		return false, "", nil
	}
	defer lf.Close()
	same, err := sameContent(uf, lf, ust.Size, lst.Size)
	if err != nil || same {
		return same, "", err
	}
	if !d.text || !within(up, d.textUnder) || ust.Size > maxDiffText || lst.Size > maxDiffText || d.textLeft <= 0 {
		return false, "", nil
	}
	ub, err := io.ReadAll(io.NewSectionReader(uf, 0, maxDiffText+1))
	if err != nil {
		return false, "", err
	}
	lb, err := io.ReadAll(io.NewSectionReader(lf, 0, maxDiffText+1))
	if err != nil {
		return false, "", err
	}
	return false, d.spend(unifiedDiff("a/"+lp, "b/"+up, lb, ub)), nil
}

// wholeDiff returns, for text asked for, the unified diff of a regular
// file the session added (added: the upper up against /dev/null) or
// deleted (the project's lp to /dev/null), as git diff shows a new or
// removed file; "" for any other object or one not shown (unifiedDiff).
func (d *differ) wholeDiff(up, lp string, added bool) string {
	if !d.text || !within(up, d.textUnder) || d.textLeft <= 0 {
		return ""
	}
	root, rel := d.lroot, lp
	if added {
		root, rel = d.uroot, up
	}
	f, st, err := openRegular(root, rel)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st.Size > maxDiffText {
		return ""
	}
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxDiffText+1))
	if err != nil {
		return ""
	}
	if added {
		return d.spend(unifiedDiff("/dev/null", "b/"+up, nil, b))
	}
	return d.spend(unifiedDiff("a/"+lp, "/dev/null", b, nil))
}

// spend counts diff against the answer's budget (textLeft) and returns it.
func (d *differ) spend(diff string) string {
	d.textLeft -= len(diff)
	return diff
}

// sameContent reports whether a (size as) and b (bs) hold the same bytes,
// read in chunks from the start.
func sameContent(a, b *os.File, as, bs int64) (bool, error) {
	if as != bs {
		return false, nil
	}
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	ra, rb := io.NewSectionReader(a, 0, as+1), io.NewSectionReader(b, 0, bs+1)
	for {
		na, ea := io.ReadFull(ra, ba)
		nb, eb := io.ReadFull(rb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		aEnd := ea == io.EOF || ea == io.ErrUnexpectedEOF
		bEnd := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if ea != nil && !aEnd {
			return false, ea
		}
		if eb != nil && !bEnd {
			return false, eb
		}
		if aEnd || bEnd {
			return aEnd == bEnd, nil
		}
	}
}

// readlinkBeneath reads the symlink rel below dir.
func readlinkBeneath(dir, rel string) (string, error) {
	pfd, err := openBeneath(dir, filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(pfd, filepath.Base(rel), buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// xattrsAt returns the extended attributes of the non-symlink rel below
// dir, less overlayfs's own (none when it cannot be opened).
func xattrsAt(dir, rel string) map[string]string {
	fd, err := openBeneath(dir, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return map[string]string{}
	}
	defer unix.Close(fd)
	return xattrsOf(fd)
}

// maxDiffText bounds the files Diff shows a unified diff of, and
// maxDiffLines the lines of each side (the diff is quadratic);
// maxDiffTotal the diff text of one answer: once it is spent, the
// remaining files are listed without (an npm ci adds thousands).
const (
	maxDiffText  = 1 << 20
	maxDiffLines = 4000
	maxDiffTotal = 16 << 20
)

// unifiedDiff returns the unified diff (3 lines of context) from a (the
// project's, named aName: a/PATH or /dev/null) to b (the session's, bName),
// or "" when either is not text (a NUL byte, or over maxDiffText or
// maxDiffLines) or they are equal.
func unifiedDiff(aName, bName string, a, b []byte) string {
	if len(a) > maxDiffText || len(b) > maxDiffText || bytes.IndexByte(a, 0) >= 0 || bytes.IndexByte(b, 0) >= 0 {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	if len(al) > maxDiffLines || len(bl) > maxDiffLines {
		return ""
	}
	// Longest common subsequence, then the edit script.
	n, m := len(al), len(bl)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line index in a (for ' ' and '-')
		bi   int // in b (for ' ' and '+')
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && al[i] == bl[j]:
			ops = append(ops, op{' ', al[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', al[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', bl[j], i, j})
			j++
		}
	}
	if !slices.ContainsFunc(ops, func(o op) bool { return o.kind != ' ' }) {
		return "" // equal (two empty files)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	const ctx = 3
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run-end > 2*ctx || run == len(ops) {
				end = min(len(ops), end+ctx)
				break
			}
			end = run
		}
		aStart, bStart, aN, bN := ops[start].ai, ops[start].bi, 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				aN++
			}
			if o.kind != '-' {
				bN++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aN), hunkRange(bStart, bN))
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			if !strings.HasSuffix(o.text, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
	return out.String()
}

// hunkRange formats a unified diff range (start is 0-based).
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits b after each newline (the last line may lack one).
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// within reports whether rel is one of paths or below one ("" or "."
// among paths, or no paths: everything; the root's own change, ".", only
// then).
func within(rel string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, p := range paths {
		if p == "." || p == "" || rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// decider asks the session's policy whether op at the project's path p is
// allowed now; nil error when it is.
type decider func(op policy.Op, p string) error

// opOf is the policy operation a commit of c makes at its path.
func opOf(c api.Change) policy.Op {
	switch c.Kind {
	case ChangeDeleted:
		if c.Type == "dir" {
			return policy.OpRmdir
		}
		return policy.OpUnlink
	case ChangeAdded, ChangeRenamed, ChangeTypeChanged:
		switch c.Type {
		case "dir":
			return policy.OpMkdir
		case "symlink":
			return policy.OpSymlink
		case "fifo", "socket":
			return policy.OpMknod
		case "char", "block":
			return policy.OpMknodDevice
		}
		return policy.OpCreate
	}
	if slices.Contains(c.Fields, "content") || slices.Contains(c.Fields, "target") {
		return policy.OpOpenWrite
	}
	if slices.Equal(c.Fields, []string{"xattr"}) {
		return policy.OpSetxattr
	}
	return policy.OpSetattr
}

// Commit applies the changes under paths to the project: first every
// change but deletions, parents first, then the deletions, deepest
// first (so that a directory the session renamed is still there to be
// renamed); each checked with decide (the session's policy now), a
// conflict (the project changed there since the session's first write)
// refused unless force, each file made in a private directory beside
// its target and renamed over it, a directory made before what lies in
// it, a further name of a file linked to the first (layerlinks.go). A
// directory the session renamed is renamed in the project (both its
// paths must be in paths), so that what the session left untouched in
// it stays the project's; a file too when both its paths are (else it
// is copied). The file system work is done with the rights of the
// session's users, if it has any (layerrights.go). A path not applied
// stays in the layer; what lies below a refused directory is refused
// with it. After a path is applied the project and the layer agree
// there (the layer keeps its copy, which Diff no longer lists) and its
// baseline is the project's new state.
func (l *Layer) Commit(paths []string, force bool, decide decider) (api.LayerResult, error) {
	res := api.LayerResult{Applied: []string{}}
	changes, info, err := l.diff(false)
	if err != nil {
		return res, err
	}
	proj, err := openRoot(l.Lower)
	if err != nil {
		return res, fmt.Errorf("layer %q: project %s: %s", l.Dir, l.Lower, identity.ErrnoText(err))
	}
	defer unix.Close(proj)
	merged, err := openRoot(l.Merged())
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, l.Merged(), identity.ErrnoText(err))
	}
	defer unix.Close(merged)
	sl, err := l.openStages(stageProject)
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, layerStages, identity.ErrnoText(err))
	}
	r := l.rights()
	// endStages at the end, not deferred: a verb stopped midway leaves
	// its stages to the next verb or a recovery, as a crash does.
	// A renamed directory's origin → its path; a renamed file's when both
	// of its paths are committed (else the file is committed as a copy).
	renamedTo := map[string]string{}
	for _, c := range changes {
		if c.Kind == ChangeRenamed && (c.Type == "dir" || within(c.Path, paths) && within(c.From, paths)) {
			renamedTo[c.From] = c.Path
		}
	}
	lk := newLinker(changes, info.li)
	moved := map[string]bool{} // origins renamed in the project
	var skipped []string       // paths left: what lies below is left too
	leave := func(list *[]api.PathError, p, why string) {
		*list = append(*list, api.PathError{Path: p, Reason: why})
		skipped = append(skipped, p)
	}
	check := func(c api.Change) bool {
		if under := skippedBy(c.Path, skipped); under != "" {
			leave(&res.Refused, c.Path, "below "+under+", which was not committed")
			return false
		}
		if c.Conflict != "" && !force {
			leave(&res.Conflicts, c.Path, c.Conflict)
			return false
		}
		if err := decide(opOf(c), filepath.Join(l.Lower, c.Path)); err != nil {
			leave(&res.Refused, c.Path, err.Error())
			return false
		}
		return true
	}
	for _, c := range changes {
		if c.Kind == ChangeDeleted || !within(c.Path, paths) || !check(c) {
			continue
		}
		if layerActing != nil {
			layerActing(c.Path)
		}
		var err error
		if c.Kind == ChangeRenamed && renamedTo[c.From] == c.Path {
			was := info.deleted[c.From]
			if was == (objID{}) {
				// A directory whose own attributes changed: its
				// origin's identity, recorded at its new path.
				was = info.deleted[c.Path]
			}
			err = l.commitRename(r, proj, merged, c, paths, decide, force, was)
			if err == nil {
				moved[c.From] = true
				if c.Type != "dir" {
					lk.put(c.Path, info.deleted[c.From])
				}
			}
		} else if first, ok := lk.target(c.Path); ok {
			// Another name of the file in the project already.
			err = r.do(ownerAt(merged, c.Path), func() error { return linkAt(proj, sl, first, c.Path, info.deleted[c.Path]) })
		} else {
			var id objID
			id, err = l.apply(r, proj, merged, sl, c, info.deleted[c.Path])
			if err == nil {
				lk.put(c.Path, id)
			}
		}
		if err == nil && c.Type == "dir" {
			err = l.clearOpaque(c.Path)
		}
		if err != nil {
			leave(&res.Refused, c.Path, identity.ErrnoText(err))
			continue
		}
		l.reset(c.Path, false)
		res.Applied = append(res.Applied, c.Path)
	}
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Kind != ChangeDeleted || !within(c.Path, paths) {
			continue
		}
		if to, ok := renamedTo[c.Path]; ok && !moved[c.Path] {
			res.Refused = append(res.Refused, api.PathError{Path: c.Path, Reason: "renamed to " + to + " in the session, which was not committed"})
			continue
		}
		if !moved[c.Path] {
			if !check(c) {
				continue
			}
			if layerActing != nil {
				layerActing(c.Path)
			}
			err := r.do(ownerAt(proj, c.Path), func() error { return removeAllAt(proj, c.Path, info.deleted[c.Path]) })
			if err != nil {
				res.Refused = append(res.Refused, api.PathError{Path: c.Path, Reason: identity.ErrnoText(err)})
				continue
			}
		}
		l.reset(c.Path, false)
		res.Applied = append(res.Applied, c.Path)
	}
	l.endStages(sl)
	return res, nil
}

// commitRename renames the project's object c.From to c.Path (a directory
// or file the session renamed), when its origin is committed too, is no
// conflict (unless force), may be removed, is still the object the diff
// saw there (was, when not zero), and the target does not exist in the
// project, and gives it the attributes c.Fields names from the session's
// (merged) object; then the layer's directory loses its redirect (the
// project has it at its own path now).
func (l *Layer) commitRename(r rights, proj, merged int, c api.Change, paths []string, decide decider, force bool, was objID) error {
	if !within(c.From, paths) {
		return fmt.Errorf("renamed from %s in the session: commit both paths", c.From)
	}
	base, err := readBaseline(filepath.Join(l.Dir, layerBaseline))
	if err != nil {
		return err
	}
	if bad, why := l.conflict(base, c.From); bad && !force {
		return fmt.Errorf("its origin %s: %s", c.From, why)
	}
	op := policy.OpUnlink
	if c.Type == "dir" {
		op = policy.OpRmdir
	}
	if err := decide(op, filepath.Join(l.Lower, c.From)); err != nil {
		return fmt.Errorf("its origin %s: %v", c.From, err)
	}
	err = r.do(ownerAt(proj, c.From), func() error {
		if was != (objID{}) {
			st, ok, err := lstatAtRoot(proj, c.From)
			if err != nil {
				return err
			}
			if !ok || (objID{st.Dev, st.Ino}) != was {
				return fmt.Errorf("its origin %s: %v", c.From, errReplaced)
			}
		}
		return renameAt(proj, c.From, c.Path)
	})
	if err == unix.EEXIST {
		return fmt.Errorf("exists in the project (renamed from %s in the session)", c.From)
	}
	if err != nil {
		return err
	}
	if len(c.Fields) > 0 {
		// What the session changed of the object itself, on the
		// project's object just renamed (was, the diff's).
		if err := r.do(ownerAt(proj, c.Path), func() error { return metaAt(merged, proj, c.Path, was) }); err != nil {
			return err
		}
	}
	if c.Type == "dir" {
		fd, err := openBeneath(l.Upper(), c.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Removexattr(procFd(fd), overlayXattr+"redirect"); err != nil && err != unix.ENODATA {
			return err
		}
	}
	l.reset(c.From, false)
	return nil
}

// skippedBy returns the entry of skipped that p lies below, or "".
func skippedBy(p string, skipped []string) string {
	for _, s := range skipped {
		if strings.HasPrefix(p, s+"/") {
			return s
		}
	}
	return ""
}

// apply makes the project (proj) hold at c.Path what the session sees
// (merged), with the rights r; old, when not zero, is the project's
// object there the diff saw, the only one it removes or changes.
// It returns the identity of the project's object there afterwards.
func (l *Layer) apply(r rights, proj, merged int, sl *stageLog, c api.Change, old objID) (objID, error) {
	owner := ownerAt(merged, c.Path)
	if c.Kind == ChangeModified && !slices.Contains(c.Fields, "content") && !slices.Contains(c.Fields, "target") {
		return old, r.do(owner, func() error { return metaAt(merged, proj, c.Path, old) })
	}
	var id objID
	err := r.do(owner, func() (err error) { id, err = putObj(merged, proj, sl, c.Path, false, c.Type, old); return err })
	if denied(err) && len(r) > 0 && c.Kind == ChangeModified && c.Type == "file" {
		return writeInPlace(r, proj, merged, sl, c.Path, old, owner, err)
	}
	return id, err
}

// writeInPlace commits the content change of the project's file old at
// rel that no user could replace (refusal, their error): when a user may
// write that very file and make its attributes the layer's (times aside),
// both done with its rights, the daemon replaces the file with the
// layer's copy: the content an in-place write would have left, in a new
// inode (the project's other names of the old one, and descriptors open
// on it, keep the old content) (layerrights.go). Attributes set before a
// replacement that then fails stay set.
// Else it returns the refusal.
func writeInPlace(r rights, proj, merged int, sl *stageLog, rel string, old objID, owner uint32, refusal error) (objID, error) {
	err := r.do(owner, func() error {
		fd, err := openAt(proj, rel, unix.O_PATH|unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		st, err := fstatFd(fd)
		if err != nil {
			return err
		}
		if (objID{st.Dev, st.Ino}) != old || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("another %s now: changed since the diff", typeName(st.Mode))
		}
		if err := unix.Faccessat2(fd, "", unix.W_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
			return err
		}
		sfd, err := openAt(merged, rel, unix.O_PATH|unix.O_NOFOLLOW)
		if err != nil {
			return err
		}
		defer unix.Close(sfd)
		sst, err := fstatFd(sfd)
		if err != nil {
			return err
		}
		return setAttrs(sfd, &sst, fd, false)
	})
	if denied(err) {
		return objID{}, refusal
	}
	if err != nil {
		return objID{}, err
	}
	return putObj(merged, proj, sl, rel, false, "file", old)
}

// Discard undoes the changes under paths in the layer, through the
// overlay (changing an upper directory under a mounted overlay is
// undefined): an added object is removed, a deleted or changed one is
// copied back from the project (a file of several names there linked
// again: linkedCopy). Removals and attribute changes are made with the
// rights of the session's users, if it has any (layerrights.go). The
// layer then holds a copy equal to the project there, which Diff no
// longer lists.
func (l *Layer) Discard(paths []string) (api.LayerResult, error) {
	res := api.LayerResult{Applied: []string{}}
	changes, err := l.Diff(false)
	if err != nil {
		return res, err
	}
	proj, err := openRoot(l.Lower)
	if err != nil {
		return res, fmt.Errorf("layer %q: project %s: %s", l.Dir, l.Lower, identity.ErrnoText(err))
	}
	defer unix.Close(proj)
	merged, err := openRoot(l.Merged())
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, l.Merged(), identity.ErrnoText(err))
	}
	defer unix.Close(merged)
	sl, err := l.openStages(stageMerged)
	if err != nil {
		return res, fmt.Errorf("layer %q: %s: %s", l.Dir, layerStages, identity.ErrnoText(err))
	}
	r := l.rights()
	// endStages at the end, not deferred: a verb stopped midway leaves
	// its stages to the next verb or a recovery, as a crash does.
	// What lies below a directory that is removed or replaced whole (added,
	// renamed, of another type) goes with it.
	var whole []string
	for _, c := range changes {
		if within(c.Path, paths) && c.Type == "dir" && (c.Kind == ChangeAdded || c.Kind == ChangeRenamed || c.Kind == ChangeTypeChanged) {
			whole = append(whole, c.Path)
		}
	}
	back := &linkedCopy{src: proj, dst: merged, sl: sl}
	// Deepest first: what lies in a directory is undone before it is.
	slices.Reverse(changes)
	for _, c := range changes {
		if !within(c.Path, paths) {
			continue
		}
		if layerActing != nil {
			layerActing(c.Path)
		}
		if skippedBy(c.Path, whole) != "" {
			l.reset(c.Path, true)
			res.Applied = append(res.Applied, c.Path)
			continue
		}
		// With the session's rights (layerrights.go): what it removes or
		// changes in the layer is what the session could; the project's
		// objects are copied back by the daemon.
		var err error
		switch {
		case c.Kind == ChangeAdded || c.Kind == ChangeRenamed:
			err = removeNonDirAs(r, merged, c.Path)
		case c.Kind == ChangeModified && !slices.Contains(c.Fields, "content") && !slices.Contains(c.Fields, "target"):
			err = r.do(ownerAt(merged, c.Path), func() error { return metaAt(proj, merged, c.Path, objID{}) })
		default:
			if err = removeNonDirAs(r, merged, c.Path); err == nil {
				err = back.put(c.Path, true)
			}
		}
		if err != nil {
			res.Refused = append(res.Refused, api.PathError{Path: c.Path, Reason: identity.ErrnoText(err)})
			continue
		}
		l.reset(c.Path, true)
		res.Applied = append(res.Applied, c.Path)
	}
	slices.Reverse(res.Applied)
	l.endStages(sl)
	return res, nil
}

// layerActing, when set (by tests), is called with each path a commit,
// discard or rollback is about to act on, after its diff and its checks: a
// test swaps objects there, as a session racing the verb would.
var layerActing func(rel string)

// randName returns 12 random hex digits.
func randName() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errLayerless is the error of a layer verb on a session without a layer.
var errLayerless = errors.New("the session has no layer (create it with --layer)")
