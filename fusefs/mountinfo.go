package fusefs

import (
	"os"
	"strconv"
	"strings"
)

// MountEntry is one mount of /proc/self/mountinfo (proc(5)), as MountTable
// reports it.
type MountEntry struct {
	// Dev is the mount's device, "MAJOR:MINOR".
	Dev string
	// FSType is the file system type ("fuse.wsfs" for a wsfs mount).
	FSType string
	// Root is the directory of the file system shown at the mount point
	// ("/" unless a bind mount shows a subdirectory).
	Root string
	// Source is the mount source: the served root for a session mount,
	// HostViewSource for a host view.
	Source string
}

// MountTable returns the mounts of this mount namespace by mount point, from
// /proc/self/mountinfo (octal escapes decoded). Of several mounts stacked on
// one point, the last (the visible one) wins.
func MountTable() (map[string]MountEntry, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(string(data)), nil
}

// parseMountinfo is MountTable's parser of the text of a mountinfo file.
// Fields are separated by single spaces: the kernel escapes only space, tab,
// newline and backslash in paths (seq_file's mangle_path), so another white
// space byte (\r, \v, a UTF-8 no-break space) is part of a path.
func parseMountinfo(data string) map[string]MountEntry {
	set := make(map[string]MountEntry)
	for _, line := range strings.Split(data, "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Split(line, " ")
		if len(fields) < 5 {
			continue
		}
		e := MountEntry{Dev: fields[2], Root: unescapeMountinfo(fields[3])}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				e.FSType = fields[i+1]
				if i+2 < len(fields) {
					e.Source = unescapeMountinfo(fields[i+2])
				}
				break
			}
		}
		set[unescapeMountinfo(fields[4])] = e
	}
	return set
}

// unescapeMountinfo decodes the \ooo octal escapes of a mountinfo field.
func unescapeMountinfo(s string) string {
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
