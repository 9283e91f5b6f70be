package identity

import (
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
