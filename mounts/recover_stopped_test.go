package mounts_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/transport"
)

// TestRecoverStoppedKeepsConnections: a daemon stopped while it recovers
// (a successor's SIGTERM arriving during its start cancels Recover's
// context before it served a session) leaves the sessions' kept
// connections in the store for the next daemon, which serves them on: the
// mount keeps its device (it is the connection processes hold, not a new
// mount) and serves the file. Found by a restart storm (kill -9, restart,
// takeover moments later): the stopped daemon ended the connections it had
// not taken, and every process in the mount got ENOTCONN for good. The
// stopped start runs in this process: it serves nothing, so no request of
// the test's own reaches it.
func TestRecoverStoppedKeepsConnections(t *testing.T) {
	dir := newDaemonDir(t)
	a := startDaemon(t, dir)
	mkTree(t, filepath.Join(dir, "p"), "f")
	s, err := a.c.Create(context.Background(), api.CreateRequest{ID: "p", Root: filepath.Join(dir, "p")})
	if err != nil {
		t.Fatal(err)
	}
	dev := run(t, commandf("stat -c %%d %s", s.Mountpoint))
	if dev.code != 0 {
		t.Fatalf("stat the mount: %+v", dev)
	}
	a.kill()
	a.waitExit(t)

	holder := &transport.Holder{Socket: filepath.Join(a.stateDir, "holder.sock")}
	defer holder.Close()
	b, err := mounts.New(mounts.Config{StateDir: a.stateDir, MountBase: a.mountBase,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: holder})
	if err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Recover(stopped); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Recover with its context canceled: %v, want the session not served (context canceled)", err)
	}
	if err := b.Detach(context.Background()); err != nil {
		t.Fatal(err)
	}
	conns, _, err := transport.TakeConns(holder)
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[s.Mountpoint] == nil {
		t.Errorf("kept connections after the stopped start: %d (the mount's kept: %v), want the session's 2", len(conns), conns[s.Mountpoint] != nil)
	}
	for _, c := range conns {
		c.Close()
	}

	c := startDaemonAt(t, dir, a.stateDir, a.mountBase)
	if !strings.Contains(c.logText(), "session served on") {
		t.Errorf("the next daemon did not serve the kept connection on:\n%s", c.logText())
	}
	if got := run(t, commandf("stat -c %%d %s", s.Mountpoint)); got != dev {
		t.Errorf("the mount after the next start: %+v, before: %+v (a new mount, not the one processes hold)", got, dev)
	}
	if got := run(t, commandf("cat %s/f", s.Mountpoint)); got.code != 0 || got.stdout != "f" {
		t.Errorf("cat f through the mount: %+v", got)
	}
}
