// Command treesnap describes a directory tree, path by path, and compares
// such descriptions: the checker of hack/layer-acceptance.sh, which runs one
// script natively in a copy of a project and in a layered session on the
// original and compares the trees.
//
// Usage:
//
//	treesnap snap [-times] DIR        > SNAP   describe DIR
//	treesnap cmp [-fields F,...] [-type T] A B print what differs, field by field
//	treesnap changed BEFORE AFTER              the paths whose object changed
//	treesnap cover DIFF_JSON BEFORE AFTER      check a layer's diff against them
//
// A description has one line per object below DIR and DIR itself ("."),
// sorted by path: the path (Go-quoted), then fields name=value:
//
//	t   type: f (regular), d, l (symlink), p (FIFO), s (socket), c, b
//	m   permission, set-id and sticky bits, octal (not for symlinks)
//	o   uid:gid
//	s   size (regular files and symlinks; a directory's size is the file
//	    system's business)
//	h   SHA-256 of the content (regular files). A git index (".git/index")
//	    is hashed with each entry's stat data (ctime, mtime, dev, ino, size)
//	    zeroed and without its trailing checksum: the rest (modes, owners,
//	    object ids, paths, flags, extensions) must be equal; "index-raw:"
//	    marks an index in a format this does not parse (hashed whole)
//	l   the link text (symlinks)
//	r   major:minor (devices)
//	x   the extended attributes, sorted, name=hex(value), comma-separated,
//	    except overlayfs's own (trusted.overlay.*), which only its layer has
//	ln  for an object with more than one name in the tree: its first name
//	    (sorted), so that the names of one inode agree
//	mt, ct  modification and change times in ns (only with -times)
//
// Access times are never described (reading a tree changes them).
//
// cmp prints one line per difference, "PATH: FIELD: A-VALUE -> B-VALUE"
// ("-" for a missing field) or "PATH: only in A"/"only in B", and exits 1
// when there is one; -fields compares only the fields named (and paths on
// both sides), -type only the objects of type T on both sides (t=T). changed prints the paths present on one side only or
// whose fields other than ln, mt and ct differ (a new hard link changes the
// ln of its old name, but not what a diff lists there). cover reads a
// `wsfs session diff --json` answer and checks that its changes are
// exactly the paths changed from BEFORE to AFTER: a change covers its own
// path; a deleted or type-changed path also everything BEFORE had below
// it, a renamed directory everything AFTER has below it (a diff lists a
// deleted tree by its top, a renamed one by its name and its changed
// contents). Each changed path no change covers is printed as "not in the
// diff: PATH", each change at a path that did not change as "not changed:
// KIND PATH" (a deletion below a renamed directory counts as a change of
// the path it was renamed from); exit 1 when either is printed.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	code := 0
	switch args := os.Args[2:]; os.Args[1] {
	case "snap":
		times := len(args) == 2 && args[0] == "-times"
		if times {
			args = args[1:]
		}
		if len(args) != 1 {
			usage()
		}
		var snap map[string]string
		if snap, err = describe(args[0], times); err == nil {
			err = write(os.Stdout, snap)
		}
	case "cmp":
		var only, types string
		for len(args) > 2 && len(args)%2 == 0 {
			switch args[0] {
			case "-fields":
				only = args[1]
			case "-type":
				types = args[1]
			default:
				usage()
			}
			args = args[2:]
		}
		if len(args) != 2 {
			usage()
		}
		var a, b map[string]string
		if a, b, err = readTwo(args[0], args[1]); err == nil {
			for _, line := range compareOnly(a, b, only, types) {
				fmt.Println(line)
				code = 1
			}
		}
	case "changed":
		if len(args) != 2 {
			usage()
		}
		var a, b map[string]string
		if a, b, err = readTwo(args[0], args[1]); err == nil {
			for _, p := range changed(a, b) {
				fmt.Println(p)
			}
		}
	case "cover":
		if len(args) != 3 {
			usage()
		}
		var diff api.DiffResult
		var data []byte
		if data, err = os.ReadFile(args[0]); err == nil {
			if err = json.Unmarshal(data, &diff); err != nil {
				err = fmt.Errorf("%s: not a session diff --json answer: %v", args[0], err)
			}
		}
		var a, b map[string]string
		if err == nil {
			a, b, err = readTwo(args[1], args[2])
		}
		if err == nil {
			for _, line := range cover(diff.Changes, a, b) {
				fmt.Println(line)
				code = 1
			}
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "treesnap:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: treesnap snap [-times] DIR | cmp [-fields F,...] [-type T] A B | changed BEFORE AFTER | cover DIFF_JSON BEFORE AFTER")
	os.Exit(2)
}

// describe returns the description of every object below root, and of
// root itself ("."), keyed by relative path.
func describe(root string, times bool) (map[string]string, error) {
	type id struct{ dev, ino uint64 }
	out := map[string][]string{}
	names := map[id][]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		f, err := fields(p, rel, &st)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if times {
			f = append(f, fmt.Sprintf("mt=%d", st.Mtim.Nano()), fmt.Sprintf("ct=%d", st.Ctim.Nano()))
		}
		out[rel] = f
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			k := id{st.Dev, st.Ino}
			names[k] = append(names[k], rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ns := range names {
		if len(ns) < 2 {
			continue
		}
		sort.Strings(ns)
		for _, n := range ns {
			out[n] = append(out[n], "ln="+strconv.Quote(ns[0]))
		}
	}
	res := make(map[string]string, len(out))
	for p, f := range out {
		res[p] = strings.Join(f, " ")
	}
	return res, nil
}

// fields returns the fields of the object at p (rel in its tree), times and
// ln aside.
func fields(p, rel string, st *unix.Stat_t) ([]string, error) {
	var f []string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f = append(f, "t=f")
	case unix.S_IFDIR:
		f = append(f, "t=d")
	case unix.S_IFLNK:
		f = append(f, "t=l")
	case unix.S_IFIFO:
		f = append(f, "t=p")
	case unix.S_IFSOCK:
		f = append(f, "t=s")
	case unix.S_IFCHR:
		f = append(f, "t=c")
	case unix.S_IFBLK:
		f = append(f, "t=b")
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		f = append(f, fmt.Sprintf("m=%04o", st.Mode&0o7777))
	}
	f = append(f, fmt.Sprintf("o=%d:%d", st.Uid, st.Gid))
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		h, err := contentHash(p, rel)
		if err != nil {
			return nil, err
		}
		f = append(f, fmt.Sprintf("s=%d", st.Size), "h="+h)
	case unix.S_IFLNK:
		text, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		f = append(f, fmt.Sprintf("s=%d", st.Size), "l="+strconv.Quote(text))
	case unix.S_IFCHR, unix.S_IFBLK:
		f = append(f, fmt.Sprintf("r=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	}
	x, err := xattrs(p)
	if err != nil {
		return nil, err
	}
	if x != "" {
		f = append(f, "x="+x)
	}
	return f, nil
}

// contentHash returns the SHA-256 of the regular file p, a git index's
// masked (see the package comment).
func contentHash(p, rel string) (string, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	if rel == ".git/index" || strings.HasSuffix(rel, "/.git/index") {
		data, err := io.ReadAll(file)
		if err != nil {
			return "", err
		}
		if masked, ok := maskIndex(data); ok {
			return fmt.Sprintf("index:%x", sha256.Sum256(masked)), nil
		}
		return fmt.Sprintf("index-raw:%x", sha256.Sum256(data)), nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maskIndex returns a copy of the git index data (version 2 or 3, SHA-1
// object ids; gitformat-index(5)) with each entry's ctime, mtime, dev, ino
// and size zeroed and the trailing checksum cut off, or false when data is
// not such an index.
func maskIndex(data []byte) ([]byte, bool) {
	const hashLen = 20
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return nil, false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version != 2 && version != 3 {
		return nil, false
	}
	out := bytes.Clone(data[:len(data)-hashLen])
	off := 12
	for range binary.BigEndian.Uint32(data[8:12]) {
		// ctime(8) mtime(8) dev(4) ino(4) mode(4) uid(4) gid(4) size(4)
		// oid(20) flags(2) [extended flags(2)] path NUL padding.
		fixed := 62
		if off+fixed > len(out) {
			return nil, false
		}
		if version == 3 && binary.BigEndian.Uint16(out[off+60:])&0x4000 != 0 {
			fixed += 2
		}
		clear(out[off : off+24])
		clear(out[off+36 : off+40])
		end := bytes.IndexByte(out[off+fixed:], 0)
		if end < 0 {
			return nil, false
		}
		// The entry is padded with 1 to 8 NULs to a multiple of 8.
		n := fixed + end
		off += (n + 8) &^ 7
		if off > len(out) {
			return nil, false
		}
	}
	return out, true
}

// xattrs returns p's extended attributes (not followed), sorted, as
// name=hex,..., overlayfs's own left out.
func xattrs(p string) (string, error) {
	size, err := unix.Llistxattr(p, nil)
	if errors.Is(err, unix.ENOTSUP) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("llistxattr: %w", err)
	}
	buf := make([]byte, size)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return "", fmt.Errorf("llistxattr: %w", err)
	}
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" || strings.HasPrefix(name, "trusted.overlay.") {
			continue
		}
		vsize, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return "", fmt.Errorf("lgetxattr %s: %w", name, err)
		}
		v := make([]byte, vsize)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			return "", fmt.Errorf("lgetxattr %s: %w", name, err)
		}
		out = append(out, name+"="+hex.EncodeToString(v[:m]))
	}
	sort.Strings(out)
	return strings.Join(out, ","), nil
}

// write prints snap sorted by path, one line each.
func write(w io.Writer, snap map[string]string) error {
	bw := bufio.NewWriter(w)
	for _, p := range sortedKeys(snap) {
		fmt.Fprintf(bw, "%s %s\n", strconv.Quote(p), snap[p])
	}
	return bw.Flush()
}

// read parses a description written by write.
func read(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a treesnap line", file, i+1)
		}
		p, _ := strconv.Unquote(q)
		out[p] = strings.TrimPrefix(line[len(q):], " ")
	}
	return out, nil
}

// readTwo reads two descriptions.
func readTwo(a, b string) (map[string]string, map[string]string, error) {
	sa, err := read(a)
	if err != nil {
		return nil, nil, err
	}
	sb, err := read(b)
	return sa, sb, err
}

// split returns a line's fields by name (values never contain a space:
// paths and link texts are Go-quoted).
func split(desc string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(desc) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = v
	}
	return out
}

// fieldOrder is the order cmp reports a path's fields in.
var fieldOrder = []string{"t", "m", "o", "s", "h", "l", "r", "x", "ln", "mt", "ct"}

// compare lists the differences between a and b, one line each.
func compare(a, b map[string]string) []string { return compareOnly(a, b, "", "") }

// compareOnly is compare limited to the comma-separated fields only and the
// objects of type types on both sides (each: empty for all).
func compareOnly(a, b map[string]string, only, types string) []string {
	var out []string
	fieldsOf := fieldOrder
	if only != "" {
		fieldsOf = strings.Split(only, ",")
	}
	for _, p := range sortedKeys(union(a, b)) {
		da, inA := a[p]
		db, inB := b[p]
		q := strconv.Quote(p)
		if only != "" || types != "" {
			if !inA || !inB || types != "" && (split(da)["t"] != types || split(db)["t"] != types) {
				continue
			}
		}
		switch {
		case !inB:
			out = append(out, q+": only in A")
		case !inA:
			out = append(out, q+": only in B")
		case da != db:
			fa, fb := split(da), split(db)
			for _, k := range fieldsOf {
				if fa[k] != fb[k] {
					out = append(out, fmt.Sprintf("%s: %s: %s -> %s", q, k, orDash(fa[k]), orDash(fb[k])))
				}
			}
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// changed returns the paths on one side only or whose fields other than
// ln, mt and ct differ, sorted.
func changed(a, b map[string]string) []string {
	var out []string
	for _, p := range sortedKeys(union(a, b)) {
		da, inA := a[p]
		db, inB := b[p]
		if inA != inB {
			out = append(out, p)
			continue
		}
		fa, fb := split(da), split(db)
		for _, k := range []string{"ln", "mt", "ct"} {
			delete(fa, k)
			delete(fb, k)
		}
		if fmt.Sprint(fa) != fmt.Sprint(fb) {
			out = append(out, p)
		}
	}
	return out
}

// cover checks changes against the paths changed from before to after (see
// the package comment).
func cover(changes []api.Change, before, after map[string]string) []string {
	want := map[string]bool{}
	for _, p := range changed(before, after) {
		want[p] = true
	}
	covered := map[string]bool{}
	below := func(tree map[string]string, top string) {
		for p := range tree {
			if top == "." || strings.HasPrefix(p, top+"/") {
				covered[p] = true
			}
		}
	}
	renamed := map[string]string{} // new path -> old
	for _, c := range changes {
		covered[c.Path] = true
		switch c.Kind {
		case "deleted", "type_changed":
			below(before, c.Path)
		case "renamed":
			below(after, c.Path)
			renamed[c.Path] = c.From
		}
	}
	var out []string
	for _, p := range sortedKeys(want) {
		if !covered[p] {
			out = append(out, "not in the diff: "+strconv.Quote(p))
		}
	}
	for _, c := range changes {
		if want[c.Path] {
			continue
		}
		if c.Kind == "deleted" {
			if old, ok := renamedFrom(renamed, c.Path); ok && want[old] {
				continue
			}
		}
		out = append(out, "not changed: "+c.Kind+" "+strconv.Quote(c.Path))
	}
	return out
}

// renamedFrom returns the path p had before the renamed directory above it
// (the deepest; renamed maps new paths to old) was renamed.
func renamedFrom(renamed map[string]string, p string) (string, bool) {
	for dir := filepath.Dir(p); dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if old, ok := renamed[dir]; ok {
			return old + strings.TrimPrefix(p, dir), true
		}
	}
	return "", false
}

func union(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k := range a {
		out[k] = ""
	}
	for k := range b {
		out[k] = ""
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
