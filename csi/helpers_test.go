package csi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/wsfs/wsfs/fusefs"
)

// wsfsBin is the wsfs binary the tests run `wsfs csi` from: the plugin runs
// in a child process, so the test's own I/O through the mounts can never
// deadlock against the server.
var wsfsBin string

// skipReason is why the plugin tests cannot run here ("" when they can).
var skipReason string

func TestMain(m *testing.M) {
	switch {
	case os.Geteuid() != 0:
		skipReason = "needs root (mount(2) for FUSE and bind mounts)"
	default:
		if _, err := os.Stat("/dev/fuse"); err != nil {
			skipReason = "needs /dev/fuse: " + err.Error()
		}
	}
	var dir string
	if skipReason == "" {
		var err error
		if dir, err = os.MkdirTemp("", "wsfs-csi-test-"); err != nil {
			fmt.Fprintln(os.Stderr, "csi test: temp dir:", err)
			os.Exit(2)
		}
		wsfsBin = filepath.Join(dir, "wsfs")
		out, err := exec.Command("go", "build", "-o", wsfsBin, "github.com/wsfs/wsfs/cmd/wsfs").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "csi test: go build ./cmd/wsfs: %v\n%s", err, out)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// env is one test's directories: the plugin's state and mount base, an
// allowed root, a directory outside it, and kubelet's pods directory.
type env struct {
	dir, state, mnt, allowed, outside, pods, sock string
}

// newEnv makes an env under t.TempDir() (canonical paths).
func newEnv(t testing.TB) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		dir: dir, state: filepath.Join(dir, "state"), mnt: filepath.Join(dir, "mnt"),
		allowed: filepath.Join(dir, "allowed"), outside: filepath.Join(dir, "outside"),
		pods: filepath.Join(dir, "pods"), sock: filepath.Join(dir, "csi.sock"),
	}
	for _, d := range []string{e.allowed, e.outside, e.pods} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { clearMounts(t, dir) })
	return e
}

// plugin is a `wsfs csi` child process and a gRPC connection to it.
type plugin struct {
	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
	conn *grpc.ClientConn
	node csi.NodeClient
	id   csi.IdentityClient

	mu     sync.Mutex
	log    bytes.Buffer
	logged chan struct{} // closed and replaced (under mu) at each new log line and at exit
	exited bool
}

// start runs `wsfs csi` on e (extra flags appended) and returns once it
// logs that it serves. Cleanup stops it with SIGTERM.
func (e *env) start(t testing.TB, extra ...string) *plugin {
	t.Helper()
	args := append([]string{"csi", "--endpoint", "unix://" + e.sock, "--node-id", "node-1",
		"--state-dir", e.state, "--mount-base", e.mnt, "--allowed-roots", e.allowed}, extra...)
	p := &plugin{t: t, cmd: exec.Command(wsfsBin, args...), done: make(chan struct{}), logged: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			close(p.logged)
			p.logged = make(chan struct{})
			p.mu.Unlock()
			if !signalled && strings.Contains(line, "msg=serving") {
				signalled = true
				ready <- true
			}
		}
		if !signalled {
			ready <- false
		}
		p.cmd.Wait()
		p.mu.Lock()
		p.exited = true
		close(p.logged)
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("wsfs csi exited before serving:\n%s", p.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("wsfs csi: not serving after 60s:\n%s", p.logText())
	}
	p.conn, err = grpc.NewClient("unix://"+e.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.node, p.id = csi.NewNodeClient(p.conn), csi.NewIdentityClient(p.conn)
	return p
}

// logText returns the plugin's stderr so far.
// waitLogLines returns the log lines containing every one of subs once at
// least n of them have been logged: the plugin writes a log line before it
// answers the request that caused it, but this process reads its stderr
// through a pipe, so a line may arrive after the answer. It fails the test
// when the plugin exits first or after 60 s (a guard, not a
// synchronization).
func (p *plugin) waitLogLines(n int, subs ...string) []string {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		var got []string
		for _, line := range strings.Split(p.log.String(), "\n") {
			all := line != ""
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				got = append(got, line)
			}
		}
		ch, exited := p.logged, p.exited
		p.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if exited {
			p.t.Fatalf("wsfs csi exited with %d of %d log lines containing %q:\n%s", len(got), n, subs, p.logText())
		}
		select {
		case <-ch:
		case <-deadline:
			p.t.Fatalf("after 60s, %d of %d log lines containing %q:\n%s", len(got), n, subs, p.logText())
		}
	}
}

func (p *plugin) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop sends SIGTERM and waits for the exit (a no-op once it has exited).
func (p *plugin) stop() {
	if p.conn != nil {
		p.conn.Close()
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("wsfs csi: still running 60s after SIGTERM; killed:\n%s", p.logText())
	}
}

// kill9 sends SIGKILL and waits for the exit.
func (p *plugin) kill9(t testing.TB) {
	t.Helper()
	p.conn.Close()
	p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("killed wsfs csi (pid %d) has not exited after 60s", p.cmd.Process.Pid)
	}
}

// volCap is a mount volume capability with access mode m.
func volCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

// publish publishes volume vid at target with attributes vc.
func (p *plugin) publish(vid, target string, readOnly bool, vc map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: vid, TargetPath: target, Readonly: readOnly, VolumeContext: vc,
		VolumeCapability: volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	})
	return err
}

// unpublish unpublishes volume vid from target.
func (p *plugin) unpublish(vid, target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vid, TargetPath: target})
	return err
}

// wantCode fails unless err is a gRPC status with code c.
func wantCode(t testing.TB, what string, err error, c codes.Code) {
	t.Helper()
	if got := status.Code(err); got != c {
		t.Fatalf("%s: got code %v (%v), want %v", what, got, err, c)
	}
}

// podAttrs returns volume attributes with root and the pod identity kubelet
// adds to an ephemeral volume's attributes.
func podAttrs(root, pod string) map[string]string {
	return map[string]string{
		"root":                                   root,
		"csi.storage.k8s.io/pod.name":            pod,
		"csi.storage.k8s.io/pod.namespace":       "agents",
		"csi.storage.k8s.io/pod.uid":             "uid-" + pod,
		"csi.storage.k8s.io/serviceAccount.name": "default",
		"csi.storage.k8s.io/ephemeral":           "true",
	}
}

// mountsUnder returns every mount point at or below dir (any type), from
// /proc/self/mountinfo.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	table, err := fusefs.MountTable()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for mp := range table {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// clearMounts detaches what a failed test left mounted under dir, and
// reports it: a test that leaves a mount is a bug.
func clearMounts(t testing.TB, dir string) {
	for range 8 {
		left := mountsUnder(t, dir)
		if len(left) == 0 {
			return
		}
		for _, mp := range left {
			t.Errorf("mount left behind at %s; detaching", mp)
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}

// errnoOf returns the errno of err, or 0.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// entries returns the names in dir (nil when it does not exist).
func entries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// mountpointsLeft returns the directories left in the mount base: session
// mountpoints, and host-view mountpoints under "@host".
func mountpointsLeft(t testing.TB, e *env) []string {
	t.Helper()
	var out []string
	for _, name := range entries(t, e.mnt) {
		if name == "@host" {
			out = append(out, entries(t, filepath.Join(e.mnt, name))...)
			continue
		}
		out = append(out, name)
	}
	return out
}
