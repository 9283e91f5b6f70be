package mounts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A socket that cannot be renamed into place must fail Listen: before the
// fix the rename error was assigned to a shadowed variable, and Listen
// returned a listener whose socket had been deleted with its temp directory.
func TestListenRenameFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("s", 300)) // NAME_MAX is 255
	l, err := Listen(path)
	if err == nil {
		l.Close()
		t.Fatalf("Listen(%q) = listener, want an error", path)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Listen error = %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), syscall.ENAMETOOLONG.Error()) {
		t.Fatalf("Listen error = %q, want it to name %q", err, syscall.ENAMETOOLONG.Error())
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Fatalf("Listen left %d entries in %s, want none", len(left), dir)
	}
}
