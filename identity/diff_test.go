package identity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// kernelCanonical asks the kernel itself: open(O_PATH) walks path exactly
// as any syscall would (following a final link, as realpath does), and
// /proc/self/fd/N names the object reached.
func kernelCanonical(path string) (string, syscall.Errno) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", errnoValue(err)
	}
	defer unix.Close(fd)
	got, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", errnoValue(err)
	}
	return got, 0
}

func errnoValue(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EINVAL // never expected; makes the comparison fail loudly
}

// diffNames is the small alphabet of a random tree, so random paths hit
// existing entries often.
var diffNames = []string{"a", "b", "c", "d", "e"}

// randomTree fills root with directories, files and symlinks (relative,
// absolute, dangling, and by chance loops and chains).
func randomTree(t *testing.T, rng *rand.Rand, root string) {
	t.Helper()
	var dirs = []string{root}
	for depth := 0; depth < 3; depth++ {
		var next []string
		for _, dir := range dirs {
			for _, name := range diffNames {
				p := filepath.Join(dir, name)
				switch r := rng.Intn(10); {
				case r < 3:
					require.NoError(t, os.Mkdir(p, 0o755))
					next = append(next, p)
				case r < 5:
					require.NoError(t, os.WriteFile(p, nil, 0o644))
				case r < 9:
					require.NoError(t, os.Symlink(randomLinkTarget(rng, root), p))
				}
				// else: leave the name missing
			}
		}
		dirs = next
	}
}

func randomLinkTarget(rng *rand.Rand, root string) string {
	rel := randomRelPath(rng, 1+rng.Intn(4))
	switch rng.Intn(6) {
	case 0:
		return root + "/" + rel
	case 1:
		return "/" + rel // absolute and (almost surely) dangling
	default:
		return rel
	}
}

// randomRelPath joins n random components: names (existing or not), ".",
// "..", and sometimes empty ones ("//") or a trailing slash.
func randomRelPath(rng *rand.Rand, n int) string {
	parts := make([]string, 0, n+1)
	for i := 0; i < n; i++ {
		switch r := rng.Intn(20); {
		case r < 12:
			parts = append(parts, diffNames[rng.Intn(len(diffNames))])
		case r < 16:
			parts = append(parts, "..")
		case r < 18:
			parts = append(parts, ".")
		case r < 19:
			parts = append(parts, "zz") // never created
		default:
			parts = append(parts, "")
		}
	}
	p := strings.Join(parts, "/")
	if rng.Intn(8) == 0 {
		p += "/"
	}
	if p == "" {
		p = "."
	}
	return p
}

// TestDifferential compares Canonical with the kernel, and TargetKey with
// Canonical and `realpath -m`, on random trees and random paths. The seed
// comes from WSFS_DIFF_SEED (a failure logs it, so it can be replayed).
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test: skipped with -short")
	}
	seed := diffSeed(t, 20240601)
	rng := rand.New(rand.NewSource(seed))

	const trees, pathsPerTree = 8, 300
	stats := map[string]int{}
	var keyPaths, keyWant []string
	for i := 0; i < trees; i++ {
		root, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		randomTree(t, rng, root)
		t.Chdir(root) // relative paths are walked from the tree too
		for j := 0; j < pathsPerTree; j++ {
			p := randomRelPath(rng, 1+rng.Intn(6))
			if rng.Intn(2) == 0 {
				p = root + "/" + p
			}
			want, werr := kernelCanonical(p)
			got, err := Canonical(p)
			if werr != 0 {
				stats[werr.Error()]++
				if !assert.Equal(t, werr, pathErrno(t, err), "Canonical(%q) in tree %d, seed %d", p, i, seed) {
					continue
				}
			} else {
				stats["ok"]++
				if !assert.NoError(t, err, "Canonical(%q) in tree %d, seed %d", p, i, seed) ||
					!assert.Equal(t, want, got, "Canonical(%q) in tree %d, seed %d", p, i, seed) {
					continue
				}
			}

			// TargetKey walks like Canonical up to the first missing
			// component, so it agrees wherever Canonical did not stop on
			// ENOENT; past ENOENT, `realpath -m` is the reference for the
			// keys it computes (realpath -m never reports ENOTDIR or ELOOP,
			// so only successes are compared).
			key, kerr := TargetKey(p)
			switch {
			case werr == 0:
				assert.NoError(t, kerr, "TargetKey(%q), seed %d", p, seed)
				assert.Equal(t, want, key, "TargetKey(%q), seed %d", p, seed)
			case werr != syscall.ENOENT:
				assert.Equal(t, werr, pathErrno(t, kerr), "TargetKey(%q), seed %d", p, seed)
			case kerr == nil:
				keyPaths = append(keyPaths, absFrom(root, p))
				keyWant = append(keyWant, key)
			default:
				stats["key "+pathErrno(t, kerr).Error()]++
			}
		}
	}
	t.Logf("%d paths: %v; %d missing-path keys checked with realpath -m", trees*pathsPerTree, stats, len(keyPaths))
	require.Greater(t, stats["ok"], trees*pathsPerTree/10, "too few paths resolve: the generator drifted")

	checkRealpath(t, keyPaths, keyWant, seed)
}

// absFrom makes p absolute for realpath, which runs with the same cwd but
// then cannot be compared after the next t.Chdir.
func absFrom(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return root + "/" + p
}

func pathErrno(t *testing.T, err error) syscall.Errno {
	t.Helper()
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("want *fs.PathError, got %v", err)
		return 0
	}
	return errnoValue(pe.Err)
}

// randomTreeOut is randomTree plus a sibling "out" directory and links
// that leave the root and come back in ("../<root's name>/x", and out/
// entries that point back in), returning every directory made (cwds).
func randomTreeOut(t *testing.T, rng *rand.Rand, root string) []string {
	t.Helper()
	randomTree(t, rng, root)
	out := filepath.Join(filepath.Dir(root), "out")
	require.NoError(t, os.MkdirAll(out+"/d", 0o755))
	name := filepath.Base(root)
	back := func() string { return "../" + name + "/" + randomRelPath(rng, 1+rng.Intn(3)) }
	require.NoError(t, os.Symlink("../../"+name, out+"/d/home"))
	require.NoError(t, os.Symlink(back(), out+"/back"))
	require.NoError(t, os.Symlink(root+"/"+randomRelPath(rng, 2), out+"/abs"))
	var dirs []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		// Some names get out-and-back links instead of what they were.
		if d.Type()&fs.ModeSymlink != 0 && rng.Intn(3) == 0 {
			require.NoError(t, os.Remove(p))
			targets := []string{back(), "../out/back", "../out/d/home/" + randomRelPath(rng, 2), "../out/abs", out + "/d/home"}
			require.NoError(t, os.Symlink(targets[rng.Intn(len(targets))], p))
		}
		return nil
	}))
	return dirs
}

// TestDifferentialCwd is the differential test over (cwd, path) pairs:
// for >= 10,000 pairs on trees with relative, absolute, dangling and
// looping links and links out of the root and back in, Walker{Cwd: cwd}
// agrees with the kernel walking path from cwd (the object, or its errno:
// ELOOP, ENOTDIR, ENOENT), and its TargetKey with `realpath -m` where the
// path is missing.
func TestDifferentialCwd(t *testing.T) {
	seed := diffSeed(t, 20261130)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	t.Chdir("/") // restored afterwards; pairs chdir with unix.Chdir below

	const trees, pathsPerTree = 10, 1000
	stats := map[string]int{}
	var keyPaths, keyWant []string
	for i := 0; i < trees; i++ {
		base, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		root := base + "/tree"
		require.NoError(t, os.Mkdir(root, 0o755))
		dirs := randomTreeOut(t, rng, root)
		for j := 0; j < pathsPerTree; j++ {
			cwd := dirs[rng.Intn(len(dirs))]
			p := randomRelPath(rng, 1+rng.Intn(6))
			switch rng.Intn(4) {
			case 0:
				p = root + "/" + p
			case 1:
				p = "../out/" + p
			}
			require.NoError(t, unix.Chdir(cwd))
			want, werr := kernelCanonical(p)
			w := Walker{Cwd: cwd}
			got, err := w.Canonical(ctx, p)
			key, kerr := w.TargetKey(ctx, p)
			what := fmt.Sprintf("cwd %q path %q (tree %d, seed %d)", cwd, p, i, seed)
			switch {
			case werr == 0:
				stats["ok"]++
				if assert.NoError(t, err, what) {
					assert.Equal(t, want, got, what)
				}
				if assert.NoError(t, kerr, what) {
					assert.Equal(t, want, key, what)
				}
			case werr != syscall.ENOENT:
				stats[werr.Error()]++
				assert.Equal(t, werr, pathErrno(t, err), "Canonical: "+what)
				assert.Equal(t, werr, pathErrno(t, kerr), "TargetKey: "+what)
			default:
				stats[werr.Error()]++
				assert.Equal(t, werr, pathErrno(t, err), "Canonical: "+what)
				if kerr == nil {
					keyPaths = append(keyPaths, absFrom(cwd, p))
					keyWant = append(keyWant, key)
				} else {
					stats["key "+pathErrno(t, kerr).Error()]++
				}
			}
		}
	}
	t.Logf("%d (cwd, path) pairs: %v; %d missing-path keys checked with realpath -m", trees*pathsPerTree, stats, len(keyPaths))
	require.GreaterOrEqual(t, trees*pathsPerTree, 10000)
	require.Greater(t, stats["ok"], trees*pathsPerTree/10, "too few paths resolve: the generator drifted")
	for _, e := range []syscall.Errno{syscall.ELOOP, syscall.ENOTDIR} {
		require.Greater(t, stats[e.Error()], 0, "no pair gave %s: the generator drifted", e)
	}
	checkRealpath(t, keyPaths, keyWant, seed)
}

// diffSeed returns WSFS_DIFF_SEED when set, else def, and logs how to
// replay the test with it.
func diffSeed(t *testing.T, def int64) int64 {
	seed := def
	if s := os.Getenv("WSFS_DIFF_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "WSFS_DIFF_SEED")
	}
	t.Logf("seed %d (replay: WSFS_DIFF_SEED=%d go test -run '^%s$' ./identity/)", seed, seed, t.Name())
	return seed
}

// checkRealpath compares the keys computed for the absolute paths with
// `realpath -m` (all in one run).
func checkRealpath(t *testing.T, paths, keys []string, seed int64) {
	t.Helper()
	if _, err := exec.LookPath("realpath"); err != nil {
		t.Logf("realpath not found, missing-path keys not cross-checked: %v", err)
		return
	}
	out, err := exec.Command("realpath", append([]string{"-m", "-z", "--"}, paths...)...).Output()
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	require.Len(t, got, len(paths))
	for i := range paths {
		assert.Equal(t, got[i], keys[i], "TargetKey(%q) vs realpath -m, seed %d", paths[i], seed)
	}
}
