package identity

import (
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file (/proc/PID/mountinfo, proc(5)),
// paths decoded (UnescapeMountinfo).
type Mount struct {
	// ID is the mount's id (unique in its namespace; statx(2)'s
	// STATX_MNT_ID), Parent its parent mount's id (a mount outside this
	// namespace for the namespace's root).
	ID, Parent int
	// Dev is the file system's device, "MAJOR:MINOR".
	Dev string
	// Root is the directory of the file system shown at Point ("/" unless
	// a bind mount shows a subdirectory).
	Root string
	// Point is where the mount is mounted.
	Point string
	// FSType is the file system type ("fuse.wsfs" for a wsfs mount).
	FSType string
	// Source is the mount source ("none" when there is none).
	Source string
}

// ParseMountinfo parses the text of a mountinfo file, one Mount per line in
// the file's order; a line with fewer than five fields is skipped, a
// missing or malformed id reads as 0. Fields are separated by single
// spaces: the kernel escapes only space, tab, newline and backslash in
// paths (seq_file's mangle_path), so another white space byte (\r, \v, a
// UTF-8 no-break space) is part of a path.
func ParseMountinfo(data string) []Mount {
	var out []Mount
	for _, line := range strings.Split(data, "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Split(line, " ")
		if len(fields) < 5 {
			continue
		}
		m := Mount{Dev: fields[2], Root: UnescapeMountinfo(fields[3]), Point: UnescapeMountinfo(fields[4])}
		m.ID, _ = strconv.Atoi(fields[0])
		m.Parent, _ = strconv.Atoi(fields[1])
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				m.FSType = fields[i+1]
				if i+2 < len(fields) {
					m.Source = UnescapeMountinfo(fields[i+2])
				}
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// UnescapeMountinfo decodes the \ooo octal escapes of a mountinfo field.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Aliases returns hidden and, for each of its paths h, every other path at
// which the mount table table shows h's directory: for every other mount
// of the file system holding h whose root holds h's path within that file
// system (a bind mount of a directory above h), that mount's point and the
// rest of h (issue 20 item 5: a tmpfs at h's canonical path alone left h
// readable through the bind). A hidden place is hidden by identity, not by
// name. "/" and an alias for which skip holds are left out.
func Aliases(hidden []string, table []Mount, skip func(string) bool) []string {
	// The visible mount at each point: of several stacked, the last.
	top := map[string]Mount{}
	for _, m := range table {
		top[m.Point] = m
	}
	out := slices.Clone(hidden)
	seen := map[string]bool{}
	for _, h := range hidden {
		seen[h] = true
	}
	for _, h := range hidden {
		var at Mount
		found := false
		for p, m := range top {
			if Within(h, p) && (!found || len(p) > len(at.Point)) {
				at, found = m, true
			}
		}
		if !found {
			continue
		}
		rel := Rebase(h, at.Point, at.Root)
		for p, o := range top {
			if p == at.Point || o.Dev != at.Dev {
				continue
			}
			alias, ok := MountSource(rel, o.Root, p)
			if !ok || alias == "/" || seen[alias] || (skip != nil && skip(alias)) {
				continue
			}
			seen[alias] = true
			out = append(out, alias)
		}
	}
	return out
}

// jailOwn are the places every jail mounts afresh (bwrap's --proc and
// --dev).
var jailOwn = []string{"/proc", "/dev"}

// JailOwn reports whether p is at or inside a place every jail mounts
// afresh: /proc (a proc of the jail's PID namespace) and /dev (a tmpfs
// with the few devices a jail has). No other path's alias is hidden there
// (Aliases): the jail never shows the host's mount at such a
// path, and bwrap uses the host's, in the namespace it starts from, before
// it mounts its own (it reads /proc/sys/kernel/overflowuid, executes the
// helper through /proc/self/fd/N, binds /dev/null): a bind mount of /proc
// or /dev at another session's root (issue 23 F4) made every other jail
// detach and cover /proc or /dev as that root's alias, and fail to start.
func JailOwn(p string) bool {
	for _, d := range jailOwn {
		if Within(p, d) {
			return true
		}
	}
	return false
}
