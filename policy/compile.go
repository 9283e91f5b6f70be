package policy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/wsfs/wsfs/identity"
)

// ParseMode returns the Mode named s: "read-only", "workspace-write" or
// "full-access"; "" is workspace-write, the default. Any other name is an
// error naming it ("policy: mode "x": unknown mode (want ...)").
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeWorkspaceWrite, nil
	case ModeReadOnly, ModeWorkspaceWrite, ModeFullAccess:
		return m, nil
	}
	return "", fmt.Errorf("policy: mode %q: unknown mode (want %s, %s or %s)",
		s, ModeReadOnly, ModeWorkspaceWrite, ModeFullAccess)
}

// ParseAccess returns the Access named s: "none", "read-only" or
// "read-write". There is no default: any other name, "" included, is an error
// naming it ("policy: access "x": unknown access (want ...)").
func ParseAccess(s string) (Access, error) {
	switch a := Access(s); a {
	case AccessNone, AccessReadOnly, AccessReadWrite:
		return a, nil
	}
	return "", fmt.Errorf("policy: access %q: unknown access (want %s, %s or %s)",
		s, AccessNone, AccessReadOnly, AccessReadWrite)
}

// DefaultTemp returns the temp area used when Spec.Temp is nil: os.TempDir()
// ($TMPDIR, else /tmp) canonicalized with identity.Canonical, as a one-element
// slice. When it cannot be canonicalized (it does not exist) the cleaned
// os.TempDir() is returned, and Compile drops it if it is still missing.
func DefaultTemp() []string {
	t := filepath.Clean(os.TempDir())
	if c, err := identity.Canonical(t); err == nil {
		t = c
	}
	return []string{t}
}

// compiler holds the intermediate state of one Compile.
type compiler struct {
	spec   Spec     // the compiled spec being built
	names  []string // field names of the explicit roots, primary first
	spelt  []string // the explicit roots as the spec spells them
	guards []guard
	seen   map[string]bool // guard keys already added
}

// Limits on a Spec, checked first by Compile so that a request over them is
// refused before any work (a policy at the limits compiles in well under
// 100 ms): MaxAdditional additional roots, MaxTemp temp entries,
// MaxProtected protected entries, and MaxPathBytes bytes in any one path
// (PATH_MAX - 1, what the kernel takes). Each protected entry is guarded
// in every writable root (the primary unless read-only, each read-write
// additional root), and each guard is walked at compile time:
// MaxProtectedPlaces bounds their product (BenchmarkCompileAtLimits:
// about 50 ms at the bound).
const (
	MaxAdditional      = 256
	MaxTemp            = 64
	MaxProtected       = 1024
	MaxProtectedPlaces = 4096
	MaxPathBytes       = 4095
)

// CheckCounts refuses additional roots, temp entries and protected
// subpaths numbering more than MaxAdditional, MaxTemp or MaxProtected, with
// the one-line error Compile gives, naming the field and the limit
// ("policy: protected: 100000 entries, at most 1024"). It is the count rule
// of Compile, of Patch.CheckLimits, and of the daemon's request bodies,
// which count a body's arrays before decoding it.
func CheckCounts(additional, temp, protected int) error {
	for _, f := range []struct {
		name   string
		n, max int
	}{{"additional", additional, MaxAdditional}, {"temp", temp, MaxTemp}, {"protected", protected, MaxProtected}} {
		if f.n > f.max {
			return fmt.Errorf("policy: %s: %d entries, at most %d", f.name, f.n, f.max)
		}
	}
	return nil
}

// checkLimits refuses a spec over the limits with a one-line error naming
// the field and the limit.
func checkLimits(in Spec) error {
	if err := CheckCounts(len(in.Additional), len(in.Temp), len(in.Protected)); err != nil {
		return err
	}
	writable := 0
	if m, err := ParseMode(string(in.Mode)); err != nil || m != ModeReadOnly {
		writable++
	}
	for _, r := range in.Additional {
		if r.Access == AccessReadWrite {
			writable++
		}
	}
	if n := len(in.Protected) * writable; n > MaxProtectedPlaces {
		return fmt.Errorf("policy: protected: %d entries in each of %d writable roots (%d places), at most %d in all", len(in.Protected), writable, n, MaxProtectedPlaces)
	}
	long := func(field string, p string) error {
		if len(p) > MaxPathBytes {
			return fmt.Errorf("policy: %s: %d bytes, at most %d", field, len(p), MaxPathBytes)
		}
		return nil
	}
	if err := long("primary", in.Primary); err != nil {
		return err
	}
	for i, r := range in.Additional {
		if err := long(fmt.Sprintf("additional[%d].path", i), r.Path); err != nil {
			return err
		}
	}
	for i, t := range in.Temp {
		if err := long(fmt.Sprintf("temp[%d]", i), t); err != nil {
			return err
		}
	}
	for i, p := range in.Protected {
		if err := long(fmt.Sprintf("protected[%d]", i), p); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		list []string
	}{{"protected_outside", in.ProtectedOutside}, {"protected_repos", in.ProtectedRepos}} {
		if n := len(f.list); n > MaxProtected {
			return fmt.Errorf("policy: %s: %d entries, at most %d", f.name, n, MaxProtected)
		}
		for i, p := range f.list {
			if err := long(fmt.Sprintf("%s[%d]", f.name, i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

func compile(in Spec) (*Policy, error) {
	if err := checkLimits(in); err != nil {
		return nil, err
	}
	mode, err := ParseMode(string(in.Mode))
	if err != nil {
		return nil, err
	}
	c := &compiler{seen: map[string]bool{}}
	c.spec.Mode = mode
	switch in.Outside {
	case "", AccessNone:
		c.spec.Outside = in.Outside
	default:
		return nil, fmt.Errorf("policy: outside %q: want %s or nothing (the mode decides)", in.Outside, AccessNone)
	}

	// Primary.
	if in.Primary == "" {
		return nil, errors.New("policy: primary: required (the session's project root, an absolute path)")
	}
	primary, err := canonicalRoot("primary", in.Primary)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(primary); err != nil {
		return nil, fmt.Errorf("policy: primary %q: %v", in.Primary, oneLine(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("policy: primary %q: must be a directory", in.Primary)
	}
	c.spec.Primary = primary
	c.names = append(c.names, "primary")
	c.spelt = append(c.spelt, in.Primary)

	// Additional roots.
	for i, r := range in.Additional {
		field := fmt.Sprintf("additional[%d]", i)
		if r.Path == "" {
			return nil, fmt.Errorf("policy: %s.path: required (an absolute path)", field)
		}
		acc, err := ParseAccess(string(r.Access))
		if err != nil {
			return nil, fmt.Errorf("policy: %s.access %q: unknown access (want %s, %s or %s)",
				field, r.Access, AccessNone, AccessReadOnly, AccessReadWrite)
		}
		p, err := canonicalRoot(field+".path", r.Path)
		if err != nil {
			return nil, err
		}
		c.spec.Additional = append(c.spec.Additional, Root{Path: p, Access: acc})
		c.names = append(c.names, field+".path")
		c.spelt = append(c.spelt, r.Path)
	}
	if err := c.checkOverlap(); err != nil {
		return nil, err
	}

	// Temp.
	temp := in.Temp
	if temp == nil {
		temp = DefaultTemp()
	}
	c.spec.Temp = []string{}
	for i, t := range temp {
		field := fmt.Sprintf("temp[%d]", i)
		if !filepath.IsAbs(t) {
			return nil, fmt.Errorf("policy: %s %q: must be absolute", field, t)
		}
		p, err := identity.Canonical(t)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a temp area that does not exist is no area
		}
		if err != nil {
			return nil, fmt.Errorf("policy: %s %q: cannot resolve: %v", field, t, oneLine(err))
		}
		if p == "/" {
			if in.Temp == nil {
				field += " (the default, $TMPDIR)"
			}
			return nil, fmt.Errorf("policy: %s %q: must not be the file system root / (a temp area there makes every path writable)", field, t)
		}
		if !contains(c.spec.Temp, p) {
			c.spec.Temp = append(c.spec.Temp, p)
		}
	}

	// Protected.
	prot := in.Protected
	if prot == nil {
		prot = DefaultProtected
	}
	c.spec.Protected = []string{}
	seenProt := map[string]bool{}
	for i, s := range prot {
		if err := checkProtected(s); err != nil {
			return nil, fmt.Errorf("policy: protected[%d] %q: %s", i, s, err)
		}
		if !seenProt[s] {
			seenProt[s] = true
			c.spec.Protected = append(c.spec.Protected, s)
		}
	}

	for _, f := range []struct {
		name string
		in   []string
		out  *[]string
	}{{"protected_outside", in.ProtectedOutside, &c.spec.ProtectedOutside}, {"protected_repos", in.ProtectedRepos, &c.spec.ProtectedRepos}} {
		for i, s := range f.in {
			if !filepath.IsAbs(s) || filepath.Clean(s) != s {
				return nil, fmt.Errorf("policy: %s[%d] %q: must be an absolute, clean path", f.name, i, s)
			}
			if !contains(*f.out, s) {
				*f.out = append(*f.out, s)
			}
		}
	}

	p := &Policy{spec: c.spec, prot: &protection{}, repos: &repoCache{}}
	p.buildAreas()
	p.buildAreaIndex()
	gs := p.computeGuards(nil, nil)
	p.prot.cur.Store(gs)
	p.useIndex = len(p.areas)+len(gs.guards) > indexThreshold
	return p, nil
}

// canonicalRoot checks that an explicit root is absolute and exists, and
// returns its canonical path.
func canonicalRoot(field, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("policy: %s %q: must be absolute", field, path)
	}
	p, err := identity.Canonical(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("policy: %s %q: must exist: %v", field, path, oneLine(err))
	}
	if err != nil {
		return "", fmt.Errorf("policy: %s %q: cannot resolve: %v", field, path, oneLine(err))
	}
	return p, nil
}

// checkOverlap refuses explicit roots that are equal or nested.
func (c *compiler) checkOverlap() error {
	roots := []string{c.spec.Primary}
	for _, r := range c.spec.Additional {
		roots = append(roots, r.Path)
	}
	desc := func(i int) string {
		if c.spelt[i] == roots[i] {
			return fmt.Sprintf("%s %q", c.names[i], roots[i])
		}
		return fmt.Sprintf("%s %q (canonical %q)", c.names[i], c.spelt[i], roots[i])
	}
	for j := 1; j < len(roots); j++ {
		for i := 0; i < j; i++ {
			var how string
			switch {
			case roots[i] == roots[j]:
				how = "is the same directory as"
			case identity.Within(roots[j], roots[i]):
				how = "is inside"
			case identity.Within(roots[i], roots[j]):
				how = "contains"
			default:
				continue
			}
			return fmt.Errorf("policy: %s %s %s: explicit roots must not overlap",
				desc(j), how, desc(i))
		}
	}
	return nil
}

// checkProtected checks one protected entry: relative, clean, no "..".
func checkProtected(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case strings.HasPrefix(s, "/"):
		return errors.New("must be relative to the root")
	case s == "." || filepath.Clean(s) != s:
		return fmt.Errorf("must be clean (%q)", filepath.Clean(s))
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == ".." {
			return errors.New(`must not contain ".."`)
		}
	}
	return nil
}

// buildAreas compiles the explicit roots and temp entries into areas, most
// specific first; entries with the same path merge (none > write > read).
func (p *Policy) buildAreas() {
	mode := p.spec.Mode
	rw := func(w bool) Access {
		if w {
			return AccessReadWrite
		}
		return AccessReadOnly
	}
	var all []area
	all = append(all, newArea(p.spec.Primary, kindPrimary, rw(mode != ModeReadOnly)))
	p.writable = mode != ModeReadOnly
	for _, r := range p.spec.Additional {
		all = append(all, newArea(r.Path, kindAdditional, r.Access))
		if r.Access == AccessReadWrite {
			p.writable = true
		}
	}
	for _, t := range p.spec.Temp {
		all = append(all, newArea(t, kindTemp, rw(mode != ModeReadOnly)))
	}
	p.outside = newArea("/", kindOutside, rw(mode == ModeFullAccess))
	if p.spec.Outside == AccessNone {
		p.outside = newArea("/", kindOutside, AccessNone)
	}

	rank := map[Access]int{AccessNone: 3, AccessReadWrite: 2, AccessReadOnly: 1}
	byPath := map[string]int{}
	for _, a := range all {
		if i, ok := byPath[a.path]; ok {
			if rank[a.access] > rank[p.areas[i].access] {
				p.areas[i] = a
			}
			continue
		}
		byPath[a.path] = len(p.areas)
		p.areas = append(p.areas, a)
	}
	sort.SliceStable(p.areas, func(i, j int) bool {
		return len(p.areas[i].path) > len(p.areas[j].path)
	})
}

func newArea(path string, k kind, acc Access) area {
	a := area{path: path, kind: k, access: acc}
	name := kindNames[k]
	switch acc {
	case AccessNone:
		a.read, a.write = denyNone, denyNone
	case AccessReadWrite:
		a.read = Decision{Allow: true, Rule: name + ":read-write"}
		a.write = a.read
	default:
		a.read = Decision{Allow: true, Rule: name + ":read-only"}
		a.write = Decision{Errno: syscall.EROFS, Rule: name + ":read-only"}
	}
	return a
}

// buildAreaIndex builds the map lookupIndex uses for areas.
func (p *Policy) buildAreaIndex() {
	p.aindex = map[string]*area{}
	for i := range p.areas {
		p.aindex[p.areas[i].path] = &p.areas[i]
	}
	p.alens = keyLengths(p.aindex)
}

// keyLengths returns the distinct lengths of m's keys, longest first.
func keyLengths[V any](m map[string]V) []int {
	seen := map[int]bool{}
	var lens []int
	for k := range m {
		if !seen[len(k)] {
			seen[len(k)] = true
			lens = append(lens, len(k))
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(lens)))
	return lens
}

// protect adds the guards of the writable explicit root r: one per
// protected entry. (git's names are the repository rule's, git.go.)
func (c *compiler) protect(r string) {
	for _, s := range c.spec.Protected {
		c.guardPath(filepath.Join(r, s), s)
	}
}

// guardPath protects path under the rule "protected:<entry>": its lexical
// spelling (so the name stays protected if a symlinked component is replaced
// by a real directory) and its target key (the physical object).
func (c *compiler) guardPath(path, entry string) {
	c.add(path, entry)
	if k, err := identity.TargetKey(path); err == nil {
		c.add(k, entry)
	}
}

// addGuard adds a guard remembered from an earlier set (or observed), unless
// its key is there already or the set holds maxGuards keys.
func (c *compiler) addGuard(g guard) {
	if c.seen[g.key] || len(c.guards) >= maxGuards {
		return
	}
	c.seen[g.key] = true
	c.guards = append(c.guards, g)
}

func (c *compiler) add(key, entry string) {
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.guards = append(c.guards, guard{
		key:  key,
		deny: Decision{Errno: syscall.EACCES, Rule: "protected:" + entry},
	})
}

// gitdirOf returns the canonical gitdir a "gitdir: X" file at r/.git points
// to (X relative to r or absolute), if r/.git is such a file.
func gitdirOf(r string) (string, bool) {
	line, ok := firstLine(filepath.Join(r, ".git"))
	if !ok {
		return "", false
	}
	x, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return "", false
	}
	return keyFrom(r, strings.TrimSpace(x))
}

// commondirOf returns the canonical common dir of a worktree's gitdir (the
// "commondir" file, relative to the gitdir or absolute): git takes hooks and
// config from there.
func commondirOf(gitdir string) (string, bool) {
	line, ok := firstLine(filepath.Join(gitdir, "commondir"))
	if !ok {
		return "", false
	}
	return keyFrom(gitdir, strings.TrimSpace(line))
}

// keyFrom returns the target key of x taken relative to base.
func keyFrom(base, x string) (string, bool) {
	if x == "" {
		return "", false
	}
	if !filepath.IsAbs(x) {
		x = filepath.Join(base, x)
	}
	if k, err := identity.TargetKey(x); err == nil {
		return k, true
	}
	return filepath.Clean(x), true
}

// firstLine returns the first line of the regular file at path (at most 4 KiB
// read), trailing "\r" removed.
func firstLine(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", false
	}
	return strings.TrimRight(line, "\r\n"), true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// oneLine keeps all of an error message on one line (newlines become
// spaces; the CLI's firstLine, by contrast, keeps only the first line).
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
