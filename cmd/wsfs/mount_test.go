package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsfs/wsfs/fusefs"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLimit bounds every wait of these tests for an event (a line printed,
// a process exiting, a mount gone): generous, since CI runs the packages'
// tests side by side on two CPUs; a wait that ends early costs nothing.
const waitLimit = time.Minute

// mountRun is a `wsfs mount` running in the background of a test.
type mountRun struct {
	stdout, stderr syncBuffer
	cancel         func()   // asks it to stop, as SIGTERM
	kill           func()   // SIGKILL
	done           chan int // the exit code, once it exited (-1: killed by a signal)
}

// requireFUSE skips the test when this machine cannot mount FUSE file systems.
func requireFUSE(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("FUSE not available: %v (run hack/ci-setup.sh)", err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("FUSE not available: not root and no fusermount3 (run hack/ci-setup.sh)")
		}
	}
}

// mounted reports whether a FUSE file system is mounted at mountpoint.
func mounted(t *testing.T, mountpoint string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == mountpoint && strings.HasPrefix(f[2], "fuse") {
			return true
		}
	}
	return false
}

// startMount runs `wsfs mount args...` in the background, as a child
// process (the test binary as the CLI, TestMain), and waits until it printed
// its first line (mounted, or an error). In a child, since this process
// opens files through the mount: served from this process too, the Go
// runtime's epoll registration of such a file waits on a FUSE_POLL that no
// free P may be left to answer (fusefs.Server.DisablePoll). m.cancel sends
// SIGTERM. Cleanup stops it and removes any mount left at mountpoint.
func startMount(t *testing.T, mountpoint string, args ...string) *mountRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // not left serving if this test dies
	m := &mountRun{done: make(chan int, 1)}
	cmd.Stdout, cmd.Stderr = &m.stdout, &m.stderr
	require.NoError(t, cmd.Start())
	m.cancel = func() { _ = cmd.Process.Signal(syscall.SIGTERM) }
	m.kill = func() { _ = cmd.Process.Kill() }
	go func() {
		_ = cmd.Wait()
		m.done <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		m.cancel()
		select {
		case <-m.done:
		case <-time.After(waitLimit):
			t.Errorf("wsfs mount did not return on SIGTERM; killed")
			_ = cmd.Process.Kill()
		}
		// The host view first: a leftover one would let the temp dir's
		// RemoveAll walk the whole host.
		for _, mp := range []string{mountpoint + "@host", mountpoint} {
			if mounted(t, mp) {
				t.Errorf("%s still mounted after wsfs mount returned", mp)
				_ = fusefs.Unmount(mp, true)
			}
		}
	})
	deadline := time.Now().Add(waitLimit)
	// Until it says it mounted, or failed (a warning on stderr, such as a
	// watcher that could not start, is neither).
	for m.stdout.String() == "" && !strings.Contains(m.stderr.String(), "wsfs: ") {
		if time.Now().After(deadline) {
			t.Fatalf("wsfs mount printed nothing in %s", waitLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m
}

// wait returns the exit code once the mount command returns.
func (m *mountRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-m.done:
		m.done <- code // for Cleanup
		return code
	case <-time.After(waitLimit):
		t.Fatalf("wsfs mount did not return; stderr: %s", m.stderr.String())
		return -1
	}
}

// mountFixture makes a project with a file, an in-root symlink, an escaping
// symlink and .git/hooks, an outside directory, an empty mountpoint, and a
// policy file with no temp area (the test tree lives in the temp area, which
// would otherwise be writable).
func mountFixture(t *testing.T) (root, proj, mnt, policyFile string) {
	// Not under /tmp: the host view hides /tmp (but the temp area, none
	// here), and "outside" must be visible there.
	t.Setenv("TMPDIR", "/var/tmp")
	root = tree(t, "proj/src/main.go", "proj/.git/hooks/", "proj/link -> src", "proj/escape -> ../outside/notes", "outside/notes", "mnt/")
	policyFile = filepath.Join(root, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte("temp: []\n"), 0o644))
	return root, root + "/proj", root + "/mnt", policyFile
}

func TestMountServes(t *testing.T) {
	requireFUSE(t)
	_, proj, mnt, policyFile := mountFixture(t)

	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--session", "t1")
	require.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\n", m.stdout.String(), m.stderr.String())
	require.True(t, mounted(t, mnt))

	// A write that works lands in the backing tree.
	require.NoError(t, os.WriteFile(mnt+"/src/new.txt", []byte("hi\n"), 0o644))
	b, err := os.ReadFile(proj + "/src/new.txt")
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))

	// The escaping link reads, but a write through it is refused: EROFS.
	_, err = os.ReadFile(mnt + "/escape")
	require.NoError(t, err)
	err = os.WriteFile(mnt+"/escape", []byte("x"), 0o644)
	assert.True(t, errors.Is(err, syscall.EROFS), "write through the escaping link: %v", err)

	// Protected subpath: EACCES.
	err = os.WriteFile(mnt+"/.git/hooks/pre-commit", []byte("x"), 0o755)
	assert.True(t, errors.Is(err, syscall.EACCES), "write to .git/hooks: %v", err)

	// wsfs resolve inside the mount agrees with the kernel.
	out, _, code := cli(t, "resolve", "--cwd", mnt, "link/..", "link/main.go")
	assert.Equal(t, 0, code)
	assert.Equal(t, mnt+"\t"+mnt+"\n"+mnt+"/link/main.go\t"+mnt+"/src/main.go\n", out)

	m.cancel()
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
	assert.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\nunmounted "+mnt+"\n", m.stdout.String())
	assert.False(t, mounted(t, mnt), "no mount left behind")
	assert.False(t, mounted(t, mnt+"@host"), "no host view left behind")
	_, err = os.Lstat(mnt + "@host")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "host view directory removed: %v", err)
}

// TestMountRestartAfterKill: after kill -9 of wsfs mount and an unmount
// of the dead mountpoint (fusermount3 -u M), a new wsfs mount on M clears
// its own dead host view M@host (as wsfs unmount would) and serves.
func TestMountRestartAfterKill(t *testing.T) {
	requireFUSE(t)
	_, proj, mnt, policyFile := mountFixture(t)
	args := []string{"--root", proj, "--mountpoint", mnt, "--policy", policyFile}
	m := startMount(t, mnt, args...)
	require.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\n", m.stdout.String(), m.stderr.String())
	m.kill()
	assert.Equal(t, -1, m.wait(t))
	require.NoError(t, fusefs.Unmount(mnt, false)) // fusermount3 -u M
	require.True(t, mounted(t, mnt+"@host"), "the dead host view is left")

	m2 := startMount(t, mnt, args...)
	require.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\n", m2.stdout.String(), m2.stderr.String())
	b, err := exec.Command("cat", mnt+"@host"+proj+"/src/main.go").CombinedOutput()
	assert.NoError(t, err, "%s", b)
	m2.cancel()
	assert.Equal(t, 0, m2.wait(t), m2.stderr.String())
}

func TestMountJSONAndReadOnly(t *testing.T) {
	requireFUSE(t)
	_, proj, mnt, policyFile := mountFixture(t)

	m := startMount(t, mnt, "--json", "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--mode", "read-only", "--session", "s2")
	require.Equal(t, `{"root":"`+proj+`","mountpoint":"`+mnt+`","session":"s2","mode":"read-only","host_view":"`+mnt+`@host"}`+"\n", m.stdout.String(), m.stderr.String())

	err := os.WriteFile(mnt+"/src/new.txt", []byte("hi\n"), 0o644)
	assert.True(t, errors.Is(err, syscall.EROFS), "write in read-only mode: %v", err)

	m.cancel()
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
	assert.False(t, mounted(t, mnt))
}

// holdMount starts a bash whose working directory is dir and returns once it
// is there, with a function that ends it. The child starts in / and cds
// after exec: a child of the process serving the mount must never chdir into
// it between fork and exec (it would wait on a server that cannot run).
func holdMount(t *testing.T, dir string) (pid int, release func()) {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "-c", `cd "$1" && echo ready && read _`, "hold", dir)
	cmd.Dir = "/"
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	var once sync.Once
	release = func() {
		once.Do(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(release)
	return cmd.Process.Pid, release
}

func TestMountBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	requireFUSE(t)
	_, proj, mnt, _ := mountFixture(t)

	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt)
	require.Contains(t, m.stdout.String(), "mounted ")
	pid, release := holdMount(t, mnt+"/src")

	// Asked to stop while busy: names the holder and keeps serving.
	m.cancel()
	require.Eventually(t, func() bool { return strings.Contains(m.stderr.String(), "busy") }, waitLimit, 10*time.Millisecond)
	assert.Contains(t, m.stderr.String(), `wsfs: mountpoint "`+mnt+`" is busy: held by pid `)
	assert.Contains(t, m.stderr.String(), fmt.Sprintf("pid %d (bash, cwd); still serving", pid))
	_, err := os.ReadFile(mnt + "/src/main.go")
	assert.NoError(t, err, "still served")

	// wsfs unmount refuses a busy mount too (exit 1, one line).
	_, errOut, code := cli(t, "unmount", mnt)
	assert.Equal(t, 1, code)
	assert.Equal(t, fmt.Sprintf("wsfs: mountpoint %q is busy: held by pid %d (bash, cwd)\n", mnt, pid), errOut)

	// Once the holder is gone, wsfs unmount ends the mount and the server.
	release()
	out, errOut, code := cli(t, "unmount", mnt)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "unmounted "+mnt+"\n", out)
	// The host view is gone when wsfs unmount returns, not some time
	// later when the server notices: an `rm -rf` of the parent right
	// after would otherwise walk the host's "/" through it.
	assert.False(t, mounted(t, mnt+"@host"), "host view still mounted when wsfs unmount returned")
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
	assert.False(t, mounted(t, mnt))
}

func TestMountForce(t *testing.T) {
	requireFUSE(t)
	_, proj, mnt, _ := mountFixture(t)

	m := startMount(t, mnt, "--force", "--root", proj, "--mountpoint", mnt)
	require.Contains(t, m.stdout.String(), "mounted ")
	_, release := holdMount(t, mnt+"/src")

	// --force detaches at once; the holder is served until it lets go.
	m.cancel()
	require.Eventually(t, func() bool { return !mounted(t, mnt) }, waitLimit, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(m.stderr.String(), "detached") }, waitLimit, 10*time.Millisecond)
	release()
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
}

// wsfs unmount is for wsfs mounts: another file system is left alone.
func TestUnmountRefusesOtherMounts(t *testing.T) {
	requireFUSE(t)
	dir := tree(t, "tmpfs/")
	mp := dir + "/tmpfs"
	require.NoError(t, syscall.Mount("wsfs-test", mp, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { syscall.Unmount(mp, syscall.MNT_DETACH) })
	_, errOut, code := cli(t, "unmount", "--force", mp)
	assert.Equal(t, 2, code, "not a wsfs mount is bad input")
	assert.Equal(t, `wsfs: unmount "`+mp+`": a tmpfs mount, not a wsfs one`+"\n", errOut)
	table, err := fusefs.MountTable()
	require.NoError(t, err)
	assert.Equal(t, "tmpfs", table[mp].FSType, "the tmpfs is still mounted")
}

func TestUnmountBadInput(t *testing.T) {
	root := tree(t, "dir/")
	_, errOut, code := cli(t, "unmount", root+"/nope")
	assert.Equal(t, 2, code)
	assert.Equal(t, `wsfs: unmount "`+root+`/nope": does not exist`+"\n", errOut)

	out, errOut, code := cli(t, "--json", "unmount", root+"/dir")
	assert.Equal(t, 2, code, "not a mountpoint is bad input")
	assert.Equal(t, `wsfs: unmount "`+root+`/dir": not a mountpoint`+"\n", errOut)
	assert.Equal(t, `{"error":{"code":"invalid","message":"unmount \"`+root+`/dir\": not a mountpoint"}}`+"\n", out)
}

// TestUnmountAfterKilledMount: `wsfs mount` killed (SIGKILL: its mounts
// left dead), then `wsfs unmount MNT` clears the mount and its host view
// and leaves no MNT@host directory.
func TestUnmountAfterKilledMount(t *testing.T) {
	requireFUSE(t)
	_, proj, mnt, _ := mountFixture(t)
	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt)
	require.Contains(t, m.stdout.String(), "mounted ")
	m.kill()
	assert.Equal(t, -1, m.wait(t))
	// doctor names the dead mount and its host view on one line, with the
	// one unmount that clears both.
	doc, _, _ := cli(t, "doctor")
	var staleLines []string
	for _, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, mnt) {
			staleLines = append(staleLines, l)
		}
	}
	assert.Equal(t, []string{"fail  stale mount: " + mnt + " and its host view " + mnt + "@host: their server is gone (ENOTCONN) — fix: wsfs unmount " + mnt + " (clears both; a restarted wsfs serve clears its own)"}, staleLines)
	out, errOut, code := cli(t, "unmount", mnt)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "unmounted "+mnt+"\n", out)
	assert.False(t, mounted(t, mnt), "mount left")
	assert.False(t, mounted(t, mnt+"@host"), "host view left")
	_, err := os.Lstat(mnt + "@host")
	assert.True(t, os.IsNotExist(err), "MNT@host directory left: %v", err)
}

// TestMountLayer: wsfs mount --layer DIR serves the root on a copy-on-write
// layer kept in DIR: writes land in DIR/upper, the root does not change,
// the policy still decides (protected paths), and at the end the overlay
// is unmounted and DIR kept.
func TestMountLayer(t *testing.T) {
	requireFUSE(t)
	root, proj, mnt, policyFile := mountFixture(t)
	layer := filepath.Join(root, "layer")
	m := startMount(t, mnt, "--root", proj, "--mountpoint", mnt, "--policy", policyFile, "--layer", layer)
	require.Equal(t, "mounted "+proj+" at "+mnt+" (host view "+mnt+"@host)\n", m.stdout.String(), m.stderr.String())
	t.Cleanup(func() {
		if e, ok, _ := fusefs.MountAt(filepath.Join(layer, "merged")); ok && e.FSType == "overlay" {
			t.Errorf("the layer's overlay still mounted")
			_ = fusefs.Unmount(filepath.Join(layer, "merged"), true)
		}
	})
	require.NoError(t, os.WriteFile(mnt+"/src/main.go", []byte("changed\n"), 0o644))
	require.NoError(t, os.WriteFile(mnt+"/src/new.txt", []byte("hi\n"), 0o644))
	b, err := os.ReadFile(mnt + "/src/main.go")
	require.NoError(t, err)
	assert.Equal(t, "changed\n", string(b))
	b, err = os.ReadFile(proj + "/src/main.go")
	require.NoError(t, err)
	assert.Equal(t, "", string(b), "the root changed under a layer")
	_, err = os.Lstat(proj + "/src/new.txt")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "new file in the root: %v", err)
	err = os.WriteFile(mnt+"/.git/hooks/pre-commit", []byte("x"), 0o755)
	assert.True(t, errors.Is(err, syscall.EACCES), "write to .git/hooks on a layer: %v", err)
	m.cancel()
	assert.Equal(t, 0, m.wait(t), m.stderr.String())
	b, err = os.ReadFile(filepath.Join(layer, "upper", "src", "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(b))

	_, stderr, code := cli(t, "mount", "--root", proj, "--mountpoint", mnt, "--layer", "rel")
	assert.Equal(t, 2, code)
	assert.Equal(t, "wsfs: --layer \"rel\": must be an absolute path\n", stderr)
}
