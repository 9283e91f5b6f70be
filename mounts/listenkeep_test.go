package mounts_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// TestAPISocketKept: with the connections kept, the API's socket outlives
// the daemon too: a client that connects while no daemon runs (after
// kill -9, after a takeover's SIGTERM) is not refused (ECONNREFUSED) but
// waits in the socket's backlog and is answered by the next daemon, which
// serves on the same socket file. A full stop removes the socket, and the
// next start makes a new one; so does a start after the socket file was
// removed meanwhile.
func TestAPISocketKept(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "f")
	if _, err := d.c.Create(ctx, api.CreateRequest{ID: "s1", Root: root}); err != nil {
		t.Fatal(err)
	}
	sock, err := os.Stat(d.socket)
	if err != nil {
		t.Fatal(err)
	}

	// list connects to the socket now (refused without a listener),
	// sends GET /v1/sessions and returns the ids the answer names, or
	// the error, once it comes.
	list := func() <-chan string {
		t.Helper()
		out := make(chan string, 1)
		conn, err := net.Dial("unix", d.socket)
		if err != nil {
			out <- "error: " + err.Error()
			return out
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := io.WriteString(conn, "GET /v1/sessions HTTP/1.0\r\nHost: wsfs\r\n\r\n"); err != nil {
			out <- "error: " + err.Error()
			return out
		}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			var l api.SessionList
			if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
				out <- "error: " + err.Error()
				return
			}
			var ids []string
			for _, s := range l.Sessions {
				ids = append(ids, s.ID)
			}
			out <- strings.Join(ids, ",")
		}()
		return out
	}
	for _, restart := range []struct {
		name string
		stop func(*daemon)
	}{
		{"kill -9", func(d *daemon) { d.kill(); d.waitExit(t) }},
		{"takeover", func(d *daemon) { d.detach() }},
	} {
		restart.stop(d)
		pending := list()
		next := startDaemonAt(t, dir, d.stateDir, d.mountBase)
		if got := <-pending; got != "s1" {
			t.Errorf("%s: a list sent while no daemon ran: %q, want s1", restart.name, got)
		}
		if !strings.Contains(next.logText(), `msg="serving on the API socket the previous daemon kept"`) {
			t.Errorf("%s: the next daemon made a new socket:\n%s", restart.name, next.logText())
		}
		if now, err := os.Stat(d.socket); err != nil || !os.SameFile(sock, now) {
			t.Errorf("%s: the socket file after the restart: %v, want the same file", restart.name, err)
		}
		d = next
	}

	// The socket removed while no daemon runs: the next one makes a new
	// one there, and the kept one is dropped.
	d.kill()
	d.waitExit(t)
	if err := os.Remove(d.socket); err != nil {
		t.Fatal(err)
	}
	d = startDaemonAt(t, dir, d.stateDir, d.mountBase)
	if strings.Contains(d.logText(), `msg="serving on the API socket the previous daemon kept"`) {
		t.Errorf("a daemon served on a kept socket whose file was removed:\n%s", d.logText())
	}
	if got := <-list(); got != "s1" {
		t.Errorf("list on the new socket: %q, want s1", got)
	}

	d.stop()
	if _, err := os.Lstat(d.socket); !os.IsNotExist(err) {
		t.Errorf("the socket after a full stop: %v, want it removed", err)
	}
	d = startDaemonAt(t, dir, d.stateDir, d.mountBase)
	if strings.Contains(d.logText(), `msg="serving on the API socket the previous daemon kept"`) {
		t.Errorf("a daemon served on a socket kept past a full stop:\n%s", d.logText())
	}
	if got := <-list(); got != "s1" {
		t.Errorf("list after a full stop and a start: %q, want s1", got)
	}
}
