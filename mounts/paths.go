package mounts

// Small path and error helpers shared by the files of this package.

import (
	"io"
	"os"
	"path/filepath"

	"github.com/wsfs/wsfs/identity"
)

// inMount returns the path inside mountpoint mp of rel ("." is mp).
func inMount(mp, rel string) string {
	if rel == "." || rel == "" {
		return mp
	}
	return mp + "/" + rel
}

// physicalOf returns the physical path of the directory rel inside a mount
// of root: the host walk of root/rel (an escaping link served in place leads
// to its target). When the walk fails, the lexical join is returned.
func physicalOf(root, rel string) string {
	if root == "" {
		return "" // an unreadable record
	}
	p := filepath.Join(root, rel)
	if c, err := identity.Canonical(p); err == nil {
		return c
	}
	return p
}

// dirEmpty reports whether directory dir has no entries.
func dirEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// isDir reports whether path is (or links to) a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
