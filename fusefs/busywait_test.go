package fusefs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/wsfs/wsfs/fusefs"
)

// stuckRoot is a file system root whose LOOKUP of "stuck" is answered only
// once release is closed; arrived gets the lookup's arrival.
type stuckRoot struct {
	gofs.Inode
	arrived chan struct{}
	release chan struct{}
}

var _ gofs.NodeLookuper = (*stuckRoot)(nil)

// Lookup holds a lookup of "stuck" until release is closed, then answers
// ENOENT; every other name is ENOENT at once.
func (r *stuckRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == "stuck" {
		r.arrived <- struct{}{}
		<-r.release
	}
	return nil, syscall.ENOENT
}

// TestBusyNamesWaitingHolder: a process that holds a mount busy while it
// waits for an answer to a FUSE request is named in the busy error as
// waiting in one; the error is one line.
func TestBusyNamesWaitingHolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: umount2(2) and the holders' kernel stacks")
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &stuckRoot{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	// Name "wsfs": the type is fuse.wsfs, which fusefs.Unmount accepts.
	srv, err := gofs.Mount(mnt, root, &gofs.Options{MountOptions: fuse.MountOptions{Name: "wsfs", FsName: "stuck-test"}})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(root.release)
		}
	}
	t.Cleanup(func() {
		release()
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})

	// cat's cwd holds the mount. The cd is the shell's, after exec: never
	// cmd.Dir = mnt, whose chdir between fork and exec deadlocks this
	// serving process (see shAs in helpers_test.go).
	cat := exec.Command("sh", "-c", "cd \"$1\" && exec cat stuck", "sh", mnt)
	cat.Dir = "/"
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	catDone := make(chan struct{})
	var catErr error
	go func() { catErr = cat.Wait(); close(catDone) }()
	t.Cleanup(func() {
		release()
		<-catDone
	})
	select {
	case <-root.arrived:
	case <-time.After(time.Minute):
		t.Fatal("cat's lookup of \"stuck\" never reached the server")
	}
	// The request has reached the server; cat goes to sleep for its answer
	// right after sending it: wait (bounded) until the kernel shows it so.
	pid := cat.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for {
		hs := fusefs.Holders(mnt)
		if len(hs) == 1 && hs[0].Waiting != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Holders(%s) = %+v, want cat (pid %d) waiting in a FUSE request", mnt, hs, pid)
		}
		time.Sleep(time.Millisecond)
	}

	err = fusefs.Unmount(mnt, false)
	want := fmt.Sprintf("mountpoint %q is busy: held by pid %d (cat, cwd, waiting in a FUSE request)", mnt, pid)
	if err == nil || err.Error() != want {
		t.Fatalf("Unmount(%s) = %v, want %q", mnt, err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("busy error spans lines: %q", err)
	}

	release()
	<-catDone
	if catErr == nil {
		t.Errorf("cat of a name the server says is missing exited 0")
	}
	if hs := fusefs.Holders(mnt); len(hs) != 0 {
		t.Errorf("Holders after cat exited: %+v", hs)
	}
}

// TestBusyErrorForms: the busy error's forms, holder by holder.
func TestBusyErrorForms(t *testing.T) {
	e := &fusefs.BusyError{Mountpoint: "/m", Holders: []fusefs.Holder{
		{PID: 1, Comm: "sh", What: "cwd"},
		{PID: 2, Comm: "cat", What: "fd 3", Waiting: "waiting in a FUSE request"},
		{PID: 3, Comm: "dd", What: "fd 1", Waiting: "in uninterruptible sleep (state D)"},
	}}
	want := `mountpoint "/m" is busy: held by pid 1 (sh, cwd), pid 2 (cat, fd 3, waiting in a FUSE request), pid 3 (dd, fd 1, in uninterruptible sleep (state D))`
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
