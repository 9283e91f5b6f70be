package mounts

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLayerRemoveAtReplaced: a removal told which object the diff saw
// refuses another one renamed in its place (a tree the session could not
// empty) and removes nothing of it; the object it was told of goes whole.
func TestLayerRemoveAtReplaced(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"del/x", "R/precious"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "del"), &st); err != nil {
		t.Fatal(err)
	}
	seen := objID{st.Dev, st.Ino}
	// The swap: R now at the diff's path.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "del"), unix.AT_FDCWD, filepath.Join(root, "R"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	rfd, err := openRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	if err := removeAllAt(rfd, "del", seen); err != errReplaced {
		t.Fatalf("removeAllAt del (R there): %v, want %v", err, errReplaced)
	}
	if b, err := os.ReadFile(filepath.Join(root, "del", "precious")); err != nil || string(b) != "R/precious" {
		t.Fatalf("R's file after the refusal: %q %v", b, err)
	}
	// Swapped back: the diff's directory goes, with what it holds.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "del"), unix.AT_FDCWD, filepath.Join(root, "R"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	if err := removeAllAt(rfd, "del", seen); err != nil {
		t.Fatalf("removeAllAt del: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "del")); !os.IsNotExist(err) {
		t.Fatalf("del after removal: %v, want ENOENT", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "R", "precious")); err != nil || string(b) != "R/precious" {
		t.Fatalf("R's file: %q %v", b, err)
	}
}
