package mounts_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// wantErrno checks that err is a CodeInvalid refusal carrying errno (the
// API's "errno" field, mapped back by the client).
func wantErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	wantCode(t, what, err, mounts.CodeInvalid)
	if !errors.Is(err, errno) {
		t.Errorf("%s: %v, want errno %s", what, err, errno)
	}
}

// TestMutualRecursionLink: a link planted in the root, a -> ../mnt/ID/a,
// walks through the session's own mountpoint back to itself. In every
// symlink mode resolve and cd answer ELOOP, with the errno in the API's
// error, and the daemon stays up (its own walk once recursed into
// identity's until the stack overflowed, killing every session's mount). A
// trailing slash on a regular file is ENOTDIR, as in the kernel.
func TestMutualRecursionLink(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	for _, mode := range []fusefs.SymlinkMode{fusefs.SymlinksContain, fusefs.SymlinksFollow} {
		id := "rec-" + string(mode)
		root := filepath.Join(dir, id)
		mkTree(t, root, "a -> ../mnt/"+id+"/a", "f", "sub/")
		s, err := d.c.Create(ctx, api.CreateRequest{ID: id, Root: root, Symlinks: string(mode)})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"a", "a/x", "sub/../a/", s.Mountpoint + "/a", root + "/a"} {
			_, err := d.c.Resolve(ctx, id, p)
			wantErrno(t, string(mode)+": resolve "+p, err, syscall.ELOOP)
		}
		_, err = d.c.Chdir(ctx, id, "a")
		wantErrno(t, string(mode)+": cd a", err, syscall.ELOOP)
		for _, p := range []string{"f/", "f/.", "sub/../f/"} {
			_, err := d.c.Resolve(ctx, id, p)
			wantErrno(t, string(mode)+": resolve "+p, err, syscall.ENOTDIR)
		}
		_, err = d.c.Chdir(ctx, id, "f")
		wantErrno(t, string(mode)+": cd f", err, syscall.ENOTDIR)
		status, body := d.rawRequest(t, http.MethodGet, "/v1/sessions/"+id+"/resolve?path="+url.QueryEscape("a"), nil)
		if status != 400 || !strings.Contains(body, `"errno":"ELOOP"`) {
			t.Errorf("%s: GET resolve a: %d %s, want 400 with errno ELOOP", mode, status, body)
		}
		// Still serving, this session and the API.
		if r := d.exec(t, id, nil, "cat", "f"); r.code != 0 || r.stdout != "f" {
			t.Fatalf("%s: cat f after the walks: %+v", mode, r)
		}
		if err := d.c.Remove(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
}

// diffTree makes a random tree under root with directories, files and
// links (relative, absolute into the root, dangling, looping, out of the
// root and back in through dir/out) and returns its real directories.
func diffTree(t *testing.T, rng *rand.Rand, dir, root string) []string {
	t.Helper()
	names := []string{"a", "b", "c", "d"}
	rel := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			switch r := rng.Intn(10); {
			case r < 6:
				parts[i] = names[rng.Intn(len(names))]
			case r < 8:
				parts[i] = ".."
			case r < 9:
				parts[i] = "."
			default:
				parts[i] = "zz"
			}
		}
		p := strings.Join(parts, "/")
		if rng.Intn(8) == 0 {
			p += "/"
		}
		return p
	}
	mkTree(t, dir+"/out", "d/", "back -> ../root/"+rel(2), "d/home -> ../../root")
	dirs := []string{root}
	for depth, level := 0, []string{root}; depth < 3; depth++ {
		var next []string
		for _, d := range level {
			for _, n := range names {
				p := d + "/" + n
				var err error
				switch r := rng.Intn(12); {
				case r < 4:
					err = os.Mkdir(p, 0o755)
					next = append(next, p)
				case r < 6:
					err = os.WriteFile(p, []byte(n), 0o644)
				case r < 11:
					targets := []string{rel(1 + rng.Intn(3)), root + "/" + rel(2), "/nowhere/" + rel(1), n, "../out/back", "../out/d/home/" + rel(2), "../root/" + rel(2)}
					err = os.Symlink(targets[rng.Intn(len(targets))], p)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		dirs = append(dirs, next...)
		level = next
	}
	return dirs
}

// TestDaemonDifferential: on a generated tree, the daemon's answers equal
// identity's walk: `cd` to every real directory reports its canonical path
// (and its one path in the mount), and resolve of random paths from there
// (relative, absolute in the root, through the mountpoint) gives the key of
// identity's walk from that directory in the mount, or its errno (ENOTDIR,
// ELOOP) as the API error's.
func TestDaemonDifferential(t *testing.T) {
	seed := int64(7)
	rng := rand.New(rand.NewSource(seed))
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := diffTree(t, rng, dir, root)
	mkTree(t, root, "loop -> l2", "l2 -> loop")
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "diff", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	mp := s.Mountpoint
	mapped := func(p string) (string, bool, error) {
		if p == mp {
			return root, true, nil
		}
		return "", false, nil
	}
	stats := map[string]int{}
	for i := 0; i < 400; i++ {
		cwd := dirs[rng.Intn(len(dirs))]
		wd, err := d.c.Chdir(ctx, "diff", cwd)
		if err != nil || wd.Physical != cwd || wd.Path != mp+strings.TrimPrefix(cwd, root) {
			t.Fatalf("cd %s: %+v %v", cwd, wd, err)
		}
		for j := 0; j < 5; j++ {
			names := []string{"a", "b", "c", "d", "..", ".", "zz"}
			parts := make([]string, 1+rng.Intn(5))
			for k := range parts {
				parts[k] = names[rng.Intn(len(names))]
			}
			p := strings.Join(parts, "/")
			switch rng.Intn(6) {
			case 0:
				p = root + "/" + p
			case 3:
				p = root + "/loop/" + p
			case 1:
				p = mp + "/" + p
			case 2:
				p += "/"
			}
			// Relative paths start at the session's physical cwd: ".."
			// above the root is the root's parent (DESIGN.md).
			want, werr := identity.Walker{Cwd: wd.Physical, Mount: mapped}.TargetKey(ctx, p)
			res, err := d.c.Resolve(ctx, "diff", p)
			what := fmt.Sprintf("cwd %s resolve %q (seed %d)", cwd, p, seed)
			if werr != nil {
				var errno syscall.Errno
				if !errors.As(werr, &errno) {
					t.Fatalf("%s: identity: %v", what, werr)
				}
				stats[errno.Error()]++
				wantErrno(t, what, err, errno)
				continue
			}
			stats["ok"]++
			if err != nil || res.Key != want {
				t.Errorf("%s: %+v %v, want key %s", what, res, err, want)
			}
		}
	}
	t.Logf("2000 (cwd, path) pairs: %v", stats)
	if stats["ok"] < 200 || stats[syscall.ELOOP.Error()] == 0 || stats[syscall.ENOTDIR.Error()] == 0 {
		t.Errorf("the generator drifted: %v", stats)
	}
}

// TestHostViewLifecycle: each session gets its host view at
// <mount-base>/@host/<id>, made with it, recovered after a restart, removed
// with it, and nothing is left after a failed create. Escaping links in the
// session point into it; it hides the daemon's state, its mount base and the
// other sessions (a session created later too); resolve maps a host-view
// path to its physical key.
func TestHostViewLifecycle(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root, other := filepath.Join(dir, "root"), filepath.Join(dir, "shared", "other")
	mkTree(t, root, "esc -> ../outside/f", "file")
	mkTree(t, other, "secret")
	mkTree(t, filepath.Join(dir, "outside"), "f")
	// The test's directories are under /tmp, which every host view hides
	// but the session's roots: outside and shared are read-only roots; the
	// later session's root lies inside shared (the most specific decides).
	s, err := d.c.Create(ctx, api.CreateRequest{ID: "hv", Root: root, Policy: &api.Policy{Additional: []api.Root{
		{Path: filepath.Join(dir, "outside"), Access: "read-only"},
		{Path: filepath.Join(dir, "shared"), Access: "read-only"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	hv := filepath.Join(d.mountBase, "@host", "hv")
	if r := d.exec(t, "hv", nil, "ls", hv+other); r.code != 0 || r.stdout != "secret\n" {
		t.Fatalf("ls %s in the host view before session other exists: %+v", hv+other, r)
	}
	wantMounts := func(what string, want ...string) {
		t.Helper()
		sort.Strings(want)
		if got := fuseMountsUnder(t, dir); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: mounts %v, want %v", what, got, want)
		}
	}
	wantMounts("created", s.Mountpoint, hv)
	if r := d.exec(t, "hv", nil, "readlink", "esc"); r.code != 0 || r.stdout != hv+dir+"/outside/f\n" {
		t.Fatalf("readlink esc in the mount: %+v, want %s", r, hv+dir+"/outside/f")
	}
	if r := d.exec(t, "hv", nil, "cat", "esc"); r.code != 0 || r.stdout != "f" {
		t.Fatalf("cat esc in the mount: %+v", r)
	}
	res, err := d.c.Resolve(ctx, "hv", hv+dir+"/outside/f")
	if err != nil || res.Key != dir+"/outside/f" || res.MountPath != "" {
		t.Fatalf("resolve the host view path: %+v %v, want key %s", res, err, dir+"/outside/f")
	}
	// A session created later is hidden from this one's host view too.
	s2, err := d.c.Create(ctx, api.CreateRequest{ID: "other", Root: other})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, d.stateDir + "/sessions", s2.Mountpoint} {
		r := d.exec(t, "hv", nil, "ls", hv+p)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("ls %s in the host view: %+v, want Permission denied", hv+p, r)
		}
	}
	if r := d.exec(t, "hv", nil, "cat", hv+dir+"/outside/f"); r.code != 0 || r.stdout != "f" {
		t.Errorf("cat through the host view: %+v", r)
	}
	if err := d.c.Remove(ctx, "other", false); err != nil {
		t.Fatal(err)
	}
	// A create that fails after mounting leaves no host view behind.
	_, err = d.c.Create(ctx, api.CreateRequest{ID: "bad", Root: other, Cwd: "secret"})
	wantCode(t, "create with a file as cwd", err, mounts.CodeInvalid)
	if _, err := os.Lstat(filepath.Join(d.mountBase, "@host", "bad")); !os.IsNotExist(err) {
		t.Fatalf("host view directory after a failed create: %v", err)
	}
	wantMounts("after a failed create", s.Mountpoint, hv)
	// Recovered after a restart.
	d.stop()
	d = startDaemon(t, dir)
	wantMounts("after a restart", s.Mountpoint, hv)
	if r := d.exec(t, "hv", nil, "cat", "esc"); r.code != 0 || r.stdout != "f" {
		t.Fatalf("cat esc after a restart: %+v", r)
	}
	// Removed with the session: no mount, no directory.
	if err := d.c.Remove(ctx, "hv", false); err != nil {
		t.Fatal(err)
	}
	wantMounts("after remove")
	if e := entries(t, d.mountBase); len(e) != 0 {
		t.Fatalf("mount base after remove: %v", e)
	}
}
