package fusefs

import (
	"os"

	"github.com/wsfs/wsfs/identity"
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

// parseMountinfo is MountTable's parser of the text of a mountinfo file
// (identity.ParseMountinfo).
func parseMountinfo(data string) map[string]MountEntry {
	set := make(map[string]MountEntry)
	for _, m := range identity.ParseMountinfo(data) {
		set[m.Point] = MountEntry{Dev: m.Dev, FSType: m.FSType, Root: m.Root, Source: m.Source}
	}
	return set
}
