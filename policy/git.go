package policy

import (
	"bytes"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/identity"
)

// Repository protection (DESIGN.md, Round 4, "What git executes is
// protected"): a session can never make the host user's own git run code it
// wrote. The rule follows what git executes instead of a list of paths:
//
//   - A directory D is a git directory when its name is ".git" or it holds
//     an entry named "HEAD" (any type; lstat). git accepts no gitdir without
//     HEAD (setup.c, is_git_directory), so this covers bare repositories,
//     .git/modules/<x>, .git/worktrees/<x> and every directory a "gitdir:"
//     pointer names, at any depth, made before or during the session, with
//     no scan.
//   - Inside a git directory, GitNames (config, config.worktree, commondir,
//     and hooks with everything below it) cannot be written: EACCES, rule
//     "protected:git:<path>".
//   - The name ".git" is a directory or nothing: a file, symlink, device or
//     hard link cannot be made there and an existing non-directory ".git"
//     (a "gitdir:" pointer) cannot be written, so no pointer can lead git to
//     a directory outside the rule's scope (the temp area).
//   - Transitions that would make an unprotected file live: making the name
//     HEAD (create, mkdir, mknod, symlink, link, rename onto) in a directory
//     not named ".git" that has no HEAD yet and holds a protected name;
//     removing HEAD (unlink, rmdir, rename away) from such a directory that
//     holds one (a worktree's commondir may name it, and git then reads its
//     config without asking for its HEAD); renaming a directory onto ".git"
//     or below a ".git" directory when it holds a protected name and is not
//     a git directory yet; renaming a non-directory onto ".git".
//   - What a repository's config names: for a write at P, each ancestor A of
//     P (up to /) with an A/.git directory or "gitdir:" file has its config
//     read (the common dir's config and config.worktree, the gitdir's
//     config.worktree, and every file they include, include.path and
//     includeIf.<cond>.path whatever the condition, up to git's depth of 10);
//     P at or below a directory named by core.hooksPath (relative to A, "~"
//     the home of the config's owner), or at a file those configs include
//     (relative to the including file's directory), is EACCES; so is
//     removing, renaming or making a non-directory at a name on the way to
//     one of them. Parsed configs are cached by (dev, ino, size, mtime,
//     ctime) of every file consulted, so a write costs one lstat per
//     ancestor and a stat per consulted file, not a parse.
//
// The rule applies to writes in writable explicit roots (the primary root,
// read-write additional roots). The temp area is exempt: the host user's git
// does not run there and it is removed with the session; a repository made
// there and copied into a root is refused on arrival (the copy writes its
// .git/config).

// GitNames are the names protected inside every git directory (and, for
// hooks, everything below it); gitrepository-layout(5): git reads its
// configuration from config and config.worktree, takes both and the hooks
// from the directory commondir names, and runs what hooks holds.
var GitNames = []string{"config", "config.worktree", "commondir", "hooks"}

// gitMaxInclude is git's bound on nested includes (config.c,
// MAX_INCLUDE_DEPTH); gitMaxFiles bounds the files one repository's
// configuration may consult, gitMaxConfig the bytes read of one file and
// gitCacheMax the cached repositories of one policy.
const (
	gitMaxInclude = 10
	gitMaxFiles   = 64
	gitMaxConfig  = 1 << 20
	gitCacheMax   = 4096
)

func isGitName(n string) bool {
	for _, g := range GitNames {
		if n == g {
			return true
		}
	}
	return false
}

// gitSerial serializes the operations whose decision depends on other names
// of the same directory (see SerializeNames).
var gitSerial sync.Mutex

// SerializeNames must be held by a caller from the decision of a name
// operation (create, mkdir, mknod, symlink, link, unlink, rmdir, rename) to
// its system call: when one of the names is HEAD, ".git" or one of GitNames,
// it locks a process-wide mutex and returns its unlock; otherwise it returns
// a no-op. Without it, creating HEAD and config in one directory at once
// would each see the other missing and both be allowed.
func SerializeNames(names ...string) (unlock func()) {
	for _, n := range names {
		if n == "HEAD" || n == ".git" || isGitName(n) {
			gitSerial.Lock()
			return gitSerial.Unlock
		}
	}
	return func() {}
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func lexists(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil
}

func isDir(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// isGitDir reports whether the directory d is a git directory for the rule:
// named ".git", or holding an entry HEAD.
func isGitDir(d string) bool {
	return baseOf(d) == ".git" || lexists(d+"/HEAD")
}

// holdsGitName reports whether the directory d holds one of GitNames.
func holdsGitName(d string) bool {
	for _, n := range GitNames {
		if lexists(d + "/" + n) {
			return true
		}
	}
	return false
}

// gitScope returns the root of area a when the repository rule applies in
// it (a writable explicit root).
func gitScope(a *area) (string, bool) {
	if a == nil || a.access != AccessReadWrite || (a.kind != kindPrimary && a.kind != kindAdditional) {
		return "", false
	}
	return a.path, true
}

func gitDeny(root, what string) Decision {
	rel := what
	if identity.Within(what, root) {
		rel = strings.TrimPrefix(strings.TrimPrefix(what, root), "/")
		if rel == "" {
			rel = "."
		}
	}
	return Decision{Errno: syscall.EACCES, Rule: "protected:git:" + rel}
}

func isCreate(op Op) bool {
	switch op {
	case OpCreate, OpMkdir, OpMknod, OpMknodDevice, OpSymlink, OpLink:
		return true
	}
	return false
}

// gitDecide applies the repository rule to a write op at the canonical path
// p that the area a allowed. ok is false when the rule refuses it.
func (p *Policy) gitDecide(gs *guardSet, op Op, path string, a *area) (Decision, bool) {
	// A linked gitdir of a root's repository first, wherever it lies.
	for _, l := range gs.linked {
		if identity.Within(path, l) {
			if d, ok := gitNamesIn(path, l, ".git"); !ok {
				return d, false
			}
		}
	}
	root, in := gitScope(a)
	if !in || path == root {
		return Decision{}, true
	}
	dir, name := parentOf(path), baseOf(path)
	switch {
	case name == ".git":
		switch op {
		case OpCreate, OpSymlink, OpMknod, OpMknodDevice:
			return gitDeny(root, path), false
		case OpLink: // the new name; the source end exists
			if !lexists(path) {
				return gitDeny(root, path), false
			}
		case OpOpenWrite, OpSetattr, OpSetxattr, OpRemovexattr, OpFallocate, OpCopyFileRange, OpWrite:
			if !isDir(path) {
				return gitDeny(root, path), false
			}
		}
	case name == "HEAD" && baseOf(dir) != ".git":
		switch {
		case isCreate(op) && !lexists(path) && holdsGitName(dir),
			(op == OpUnlink || op == OpRmdir) && holdsGitName(dir):
			return gitDeny(root, path), false
		}
	}
	// A protected name inside a git directory: the path itself, or a
	// hooks directory above it.
	for q := path; len(q) > len(root); q = parentOf(q) {
		n := baseOf(q)
		if (q == path && isGitName(n)) || n == "hooks" {
			if isGitDir(parentOf(q)) {
				return gitDeny(root, q), false
			}
		}
	}
	// What the configs of the repositories above it name.
	onTheWay := op == OpRename || op == OpUnlink || op == OpRmdir || (isCreate(op) && op != OpMkdir)
	for _, np := range p.repos.named(dir) {
		if identity.Within(path, np) || (onTheWay && identity.Within(np, path)) {
			return gitDeny(root, np), false
		}
	}
	return Decision{}, true
}

// gitNamesIn is the name rule for a path at or below the linked git
// directory l, its rules spelt under the name shown.
func gitNamesIn(path, l, shown string) (Decision, bool) {
	for q := path; len(q) > len(l); q = parentOf(q) {
		n := baseOf(q)
		if (q == path && isGitName(n)) || n == "hooks" {
			if d := parentOf(q); d == l || isGitDir(d) {
				return Decision{Errno: syscall.EACCES, Rule: "protected:git:" + shown + q[len(l):]}, false
			}
		}
	}
	return Decision{}, true
}

// gitRename applies the transitions of the repository rule to a rename from
// src to dst, both ends already allowed (as, ad their areas).
func (p *Policy) gitRename(src, dst string, as, ad *area) (Decision, bool) {
	if root, ok := gitScope(as); ok && baseOf(src) == "HEAD" && baseOf(parentOf(src)) != ".git" && holdsGitName(parentOf(src)) {
		return gitDeny(root, src), false
	}
	root, ok := gitScope(ad)
	if !ok {
		return Decision{}, true
	}
	ddir := parentOf(dst)
	if baseOf(dst) == "HEAD" && baseOf(ddir) != ".git" && !lexists(dst) && holdsGitName(ddir) {
		return gitDeny(root, dst), false
	}
	below := false
	for q := ddir; len(q) > len(root); q = parentOf(q) {
		if baseOf(q) == ".git" {
			below = true
			break
		}
	}
	if baseOf(dst) != ".git" && !below {
		return Decision{}, true
	}
	if !isDir(src) {
		if baseOf(dst) == ".git" {
			return gitDeny(root, dst), false
		}
		return Decision{}, true
	}
	if !lexists(src+"/HEAD") && holdsGitName(src) {
		return gitDeny(root, dst), false
	}
	return Decision{}, true
}

// repoCache caches, per repository top A, what its configuration names.
type repoCache struct {
	mu sync.Mutex
	m  map[string]*repoEntry
}

// repoEntry is what the repository at a top names, with the stat keys of
// every file consulted (absent ones included) that it was computed from.
type repoEntry struct {
	files []fileKey
	named []string
}

// fileKey is one consulted file and its stat(2) key (zero when absent).
type fileKey struct {
	path string
	nolk bool // lstat, not stat
	key  statKey
}

type statKey struct {
	dev, ino, size uint64
	mtime, ctime   unix.Timespec
	mode, uid      uint32
	exists         bool
}

func statOf(path string, nofollow bool) statKey {
	var st unix.Stat_t
	var err error
	if nofollow {
		err = unix.Lstat(path, &st)
	} else {
		err = unix.Stat(path, &st)
	}
	if err != nil {
		return statKey{}
	}
	return keyOf(&st)
}

// keyOf is the stat key of attributes st.
func keyOf(st *unix.Stat_t) statKey {
	return statKey{dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim, ctime: st.Ctim, mode: st.Mode, uid: st.Uid, exists: true}
}

// named returns the paths the configurations of the repositories at dir or
// above it name (hooks directories and included files, lexical and target
// keys).
func (c *repoCache) named(dir string) []string {
	var out []string
	for _, t := range gitTops(dir) {
		out = append(out, c.repo(t.dir, t.key)...)
	}
	return out
}

// gitTop is an ancestor holding a .git entry git may take for a repository
// (a directory, a "gitdir:" file, or a symlink), with that entry's lstat key.
type gitTop struct {
	dir string
	key statKey
}

// isTopEntry reports whether a .git entry of stat key k makes its directory
// a repository top for the rule.
func isTopEntry(k statKey) bool {
	t := k.mode & unix.S_IFMT
	return k.exists && (t == unix.S_IFDIR || t == unix.S_IFREG || t == unix.S_IFLNK)
}

// gitTops returns the directories at dir or above it (dir first, / last)
// with a .git entry that makes them a repository top: the result of an
// lstat(2) of A/.git for each ancestor A. For an absolute dir it looks at
// the first gitTopsPathLevels levels (/ first) by path, an lstat(2) each,
// and walks the levels below them down with one descriptor per level
// (openat(2) of the next name, then fstatat(2) of .git in it, then close(2)
// of the level above), so a write costs one call per level where the tree
// is shallow and three constant-time calls per level below, never an lstat
// that walks a deep path again at each level (issue 20 item 17: quadratic
// in depth). A/.git paths of PATH_MAX bytes or more, which lstat refuses
// (ENAMETOOLONG), count as absent, as they always did; git cannot work in a
// directory it cannot name either.
func gitTops(dir string) []gitTop {
	if !strings.HasPrefix(dir, "/") || !canonical(dir) {
		return gitTopsByPath(dir) // a walk by name would differ at "." and ".."
	}
	var found []gitTop
	// a is dir[:end] ("/" for end 0), level its depth (0 for /).
	for end, level := 0, 0; ; level++ {
		a := "/"
		if end > 0 {
			a = dir[:end]
		}
		if end+len("/.git") >= unix.PathMax {
			break // lstat(a + "/.git") is ENAMETOOLONG, and deeper too
		}
		if level == gitTopsPathLevels {
			fd, err := unix.Open(a, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			switch err {
			case nil:
				return walkTops(fd, dir, end, found)
			case unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.ELOOP:
				// No directory to search there: every lstat below
				// it fails the same way, so no .git below it either.
				return reversed(found)
			}
			return gitTopsByPath(dir) // out of descriptors or memory
		}
		var st unix.Stat_t
		if unix.Lstat(dotGit(a), &st) == nil {
			if k := keyOf(&st); isTopEntry(k) {
				found = append(found, gitTop{a, k})
			}
		}
		if end == len(dir) || dir == "/" {
			break
		}
		end = nextSlash(dir, end)
	}
	return reversed(found)
}

// gitTopsPathLevels is how many levels of a write's directory (/ first)
// gitTops looks at by path: an lstat(2) is one system call where the
// descriptor walk takes three, and though the kernel walks the path again
// at each level it costs less up to a few dozen levels (BenchmarkGitTops,
// 8-byte names below a 3-level temporary directory, 2 loaded CPUs: by path
// against by descriptor, 4 levels below 18-24 against 51-62 µs, 16 below
// 71-85 against 151-207 µs, 64 below 0.56-0.61 against 0.43-0.47 ms, 256
// below 3.9-4.2 against 1.4-1.7 ms; gitTops 22-26 µs, 79-86 µs, 0.50-0.57
// ms and 1.4-1.5 ms).
const gitTopsPathLevels = 24

// nextSlash returns where the component of the canonical absolute path
// dir after dir[:end] ends: the index of the next "/" or len(dir).
func nextSlash(dir string, end int) int {
	if i := strings.IndexByte(dir[end+1:], '/'); i >= 0 {
		return end + 1 + i
	}
	return len(dir)
}

// walkTops is gitTops from the directory dir[:end] down, fd open on it
// (O_PATH; closed here), found holding the tops above it (/ first); it
// returns them all, dir first.
func walkTops(fd int, dir string, end int, found []gitTop) []gitTop {
	for {
		a := "/"
		if end > 0 {
			a = dir[:end]
		}
		if end+len("/.git") >= unix.PathMax {
			break // lstat(a + "/.git") is ENAMETOOLONG, and deeper too
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if k := keyOf(&st); isTopEntry(k) {
				found = append(found, gitTop{a, k})
			}
		}
		if end == len(dir) || dir == "/" {
			break
		}
		next := nextSlash(dir, end)
		name := dir[end+1 : next]
		// Following a symlink here as a path walk would: lstat(A/x/.git)
		// resolves A/x as a directory, whatever it is.
		nfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		switch err {
		case nil:
		case unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.ELOOP:
			// No directory to search there: every lstat below it
			// fails the same way, so no .git below it either.
			unix.Close(fd)
			return reversed(found)
		default:
			// Out of descriptors or memory: a walk that stopped here
			// would miss a repository below, so lstat by path instead.
			unix.Close(fd)
			return gitTopsByPath(dir)
		}
		unix.Close(fd)
		fd, end = nfd, next
	}
	unix.Close(fd)
	return reversed(found)
}

// reversed reverses ts in place and returns it: gitTops finds the tops from
// / down and returns them from dir up, as gitTopsByPath does.
func reversed(ts []gitTop) []gitTop {
	for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
		ts[i], ts[j] = ts[j], ts[i]
	}
	return ts
}

// gitTopsByPath is gitTops by one lstat(2) per ancestor, for a dir that is
// not absolute and canonical, or when the walk runs out of descriptors.
func gitTopsByPath(dir string) []gitTop {
	var found []gitTop
	for a := dir; ; a = parentOf(a) {
		if k := statOf(dotGit(a), true); isTopEntry(k) {
			found = append(found, gitTop{a, k})
		}
		if a == "/" {
			return found
		}
	}
}

// dotGit is filepath.Join(a, ".git") for a clean a, without cleaning again.
func dotGit(a string) string {
	if a == "/" {
		return "/.git"
	}
	return a + "/.git"
}

// repo returns what the repository with its top at a names, from the cache
// when every file it was computed from is unchanged.
func (c *repoCache) repo(a string, dotgit statKey) []string {
	c.mu.Lock()
	e := c.m[a]
	c.mu.Unlock()
	if e != nil && e.files[0].key == dotgit && e.valid() {
		return e.named
	}
	e = readRepo(a, dotgit)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= gitCacheMax {
		c.m = map[string]*repoEntry{}
	}
	c.m[a] = e
	c.mu.Unlock()
	return e.named
}

func (e *repoEntry) valid() bool {
	for _, f := range e.files[1:] {
		if statOf(f.path, f.nolk) != f.key {
			return false
		}
	}
	return true
}

// readRepo reads the repository at top a: its gitdir (a/.git, or the
// directory a "gitdir:" file names), its common dir, and the configuration
// files with their includes.
func readRepo(a string, dotgit statKey) *repoEntry {
	e := &repoEntry{files: []fileKey{{path: a + "/.git", nolk: true, key: dotgit}}}
	seen := func(path string, nolk bool) statKey {
		k := statOf(path, nolk)
		if len(e.files) < gitMaxFiles {
			e.files = append(e.files, fileKey{path: path, nolk: nolk, key: k})
		}
		return k
	}
	gitdir := a + "/.git"
	if dotgit.mode&unix.S_IFMT != unix.S_IFDIR {
		if k := seen(gitdir, false); !k.exists {
			return e
		} else if k.mode&unix.S_IFMT == unix.S_IFREG {
			g, ok := gitdirOf(a)
			if !ok {
				return e
			}
			gitdir = g
		}
	}
	common := gitdir
	seen(gitdir+"/commondir", false)
	if c, ok := commondirOf(gitdir); ok {
		common = c
	}
	files := []string{common + "/config", common + "/config.worktree"}
	if gitdir != common {
		files = append(files, gitdir+"/config.worktree")
	}
	var named []string
	add := func(p string) {
		p = filepath.Clean(p)
		named = append(named, p)
		if k, err := identity.TargetKey(p); err == nil && k != p {
			named = append(named, k)
		}
	}
	var read func(path string, depth int)
	read = func(path string, depth int) {
		k := seen(path, false)
		if !k.exists || k.mode&unix.S_IFMT != unix.S_IFREG {
			return
		}
		hooks, includes := parseGitConfig(path)
		home := ownerHome(k)
		for _, h := range hooks {
			if h = expandHome(h, home); h != "" {
				if !filepath.IsAbs(h) {
					h = filepath.Join(a, h)
				}
				add(h)
			}
		}
		for _, inc := range includes {
			if inc = expandHome(inc, home); inc == "" {
				continue
			}
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			add(inc)
			if depth < gitMaxInclude {
				read(filepath.Clean(inc), depth+1)
			}
		}
	}
	for _, f := range files {
		read(f, 1)
	}
	e.named = named
	return e
}

// ownerHome returns the home directory of the owner of the file with key k
// ("" when unknown): git expands "~/" with the home of the user who runs
// it, who owns the repository's config.
func ownerHome(k statKey) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(k.uid), 10))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// expandHome expands a leading "~/" or "~user/" as git does (path.c,
// interpolate_path); "" when it cannot be expanded.
func expandHome(p, home string) string {
	if !strings.HasPrefix(p, "~") {
		return p
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	if name == "" {
		if home == "" {
			return ""
		}
		return filepath.Join(home, rest)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return ""
	}
	return filepath.Join(u.HomeDir, rest)
}

// parseGitConfig returns the core.hooksPath values and the include paths
// (include.path, includeIf.<cond>.path) of the git config file at path,
// parsed as git's config.c parses it: sections and keys case-insensitive,
// subsections in quotes, a key after the section header on its line, values
// with quotes, escapes, "#"/";" comments and backslash continuations. A
// file git could not parse gives what was read before the error (git runs
// nothing then).
func parseGitConfig(path string) (hooks, includes []string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, gitMaxConfig))
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var section string // lower-case
	hasSub := false    // the section has a subsection
	i := 0
	for i < len(data) {
		c := data[i]
		switch {
		case c == '\n' || c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' || c == ';':
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '[':
			j := i + 1
			for j < len(data) && (isAlnum(data[j]) || data[j] == '-' || data[j] == '.') {
				j++
			}
			name := strings.ToLower(string(data[i+1 : j]))
			hasSub = false
			if dot := strings.IndexByte(name, '.'); dot >= 0 {
				name, hasSub = name[:dot], true // [section.subsection], the old syntax
			}
			for j < len(data) && (data[j] == ' ' || data[j] == '\t') {
				j++
			}
			if j < len(data) && data[j] == '"' {
				for j++; j < len(data) && data[j] != '"' && data[j] != '\n'; j++ {
					if data[j] == '\\' {
						j++
					}
				}
				j++
				hasSub = true
			}
			for j < len(data) && data[j] != ']' && data[j] != '\n' {
				j++
			}
			if j >= len(data) || data[j] != ']' {
				return hooks, includes
			}
			section = name
			i = j + 1
		case isAlpha(c):
			j := i
			for j < len(data) && (isAlnum(data[j]) || data[j] == '-') {
				j++
			}
			key := strings.ToLower(string(data[i:j]))
			for j < len(data) && (data[j] == ' ' || data[j] == '\t') {
				j++
			}
			var val string
			has := false
			if j < len(data) && data[j] == '=' {
				val, j = gitValue(data, j+1)
				has = true
			}
			i = j
			if !has {
				continue
			}
			switch {
			case section == "core" && !hasSub && key == "hookspath":
				hooks = append(hooks, val)
			case section == "include" && !hasSub && key == "path",
				section == "includeif" && hasSub && key == "path":
				includes = append(includes, val)
			}
		default:
			return hooks, includes
		}
	}
	return hooks, includes
}

// gitValue parses a config value starting at data[i] (after "="), as git's
// parse_value: leading blanks skipped, quotes toggled, escapes \n \t \b \\
// \", comments outside quotes, backslash-newline continued, trailing blanks
// outside quotes dropped. It returns the value and the index after it.
func gitValue(data []byte, i int) (string, int) {
	var b strings.Builder
	quote := false
	pending := 0 // blanks seen outside quotes, written only before more text
	for ; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			if quote {
				return b.String(), i
			}
			return b.String(), i + 1
		}
		if !quote && (c == '#' || c == ';') {
			for i < len(data) && data[i] != '\n' {
				i++
			}
			return b.String(), i
		}
		if !quote && (c == ' ' || c == '\t') {
			if b.Len() > 0 {
				pending++
			}
			continue
		}
		for ; pending > 0; pending-- {
			b.WriteByte(' ')
		}
		switch c {
		case '\r':
			continue
		case '"':
			quote = !quote
			continue
		case '\\':
			i++
			if i >= len(data) {
				return b.String(), i
			}
			switch data[i] {
			case '\n':
				continue
			case '\r':
				if i+1 < len(data) && data[i+1] == '\n' {
					i++
				}
				continue
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(data[i])
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), i
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }
