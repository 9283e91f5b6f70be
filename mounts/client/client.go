// Package client is a Go client of the wsfs daemon's API (`wsfs serve`, see
// docs/api.md): HTTP/1.1 JSON over the daemon's Unix socket.
//
// Every method returns the daemon's refusals as an *api.Error carrying the
// stable code, so callers match them with errors.Is(err, api.ErrNotFound) (or
// api.CodeOf(err)); a daemon that cannot be reached gives a plain error naming
// the socket. The package imports only the standard library and mounts/api:
// a host that uses it links no FUSE server.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// DefaultSocket returns the socket path clients and the daemon use when none
// is given: $WSFS_SOCKET when set, else $XDG_RUNTIME_DIR/wsfs/wsfs.sock when
// XDG_RUNTIME_DIR is set, else /run/wsfs/wsfs.sock.
func DefaultSocket() string {
	if s := os.Getenv("WSFS_SOCKET"); s != "" {
		return s
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "wsfs", "wsfs.sock")
	}
	return "/run/wsfs/wsfs.sock"
}

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	socket string
	hc     *http.Client
}

// New returns a client of the daemon listening on the Unix socket path.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// Socket returns the socket path.
func (c *Client) Socket() string { return c.socket }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends method path with body (JSON-encoded unless nil) and decodes a 2xx
// answer into out (unless nil). A 4xx/5xx answer becomes an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://wsfs"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("wsfs daemon at %s: %w", c.socket, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("wsfs daemon at %s: %s %s: reading the answer: %w", c.socket, method, path, err)
	}
	if resp.StatusCode >= 400 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			e := &api.Error{Code: eb.Error.Code, Message: eb.Error.Message}
			if errno := errnoNamed(eb.Error.Errno); errno != 0 {
				e.Err = errno // errors.Is(err, syscall.ELOOP) works on this side too
			}
			return e
		}
		return &api.Error{Code: api.CodeInternal, Message: fmt.Sprintf("wsfs daemon at %s: %s %s: HTTP %d: %s", c.socket, method, path, resp.StatusCode, bytes.TrimSpace(data))}
	}
	if out == nil {
		return nil
	}
	if s, ok := out.(*string); ok {
		*s = string(data)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("wsfs daemon at %s: %s %s: bad answer: %w", c.socket, method, path, err)
	}
	return nil
}

// unwrapURL drops net/http's "Get \"http://wsfs/...\":" prefix.
func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// sessionPath returns /v1/sessions/{id}/suffix with id escaped.
func sessionPath(id, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(id) + suffix
}

// Health returns GET /v1/healthz.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.do(ctx, http.MethodGet, "/v1/healthz", nil, &h)
}

// Metrics returns GET /v1/metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var s string
	return s, c.do(ctx, http.MethodGet, "/v1/metrics", nil, &s)
}

// Create creates a session (POST /v1/sessions) and returns it.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, http.MethodPost, "/v1/sessions", req, &s)
}

// List returns every session (GET /v1/sessions), sorted by id.
func (c *Client) List(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	return l.Sessions, c.do(ctx, http.MethodGet, "/v1/sessions", nil, &l)
}

// Get returns session id (GET /v1/sessions/{id}).
func (c *Client) Get(ctx context.Context, id string) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, http.MethodGet, sessionPath(id, ""), nil, &s)
}

// Remove removes session id (DELETE /v1/sessions/{id}); force detaches a
// busy mount lazily.
func (c *Client) Remove(ctx context.Context, id string, force bool) error {
	p := sessionPath(id, "")
	if force {
		p += "?force=true"
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil)
}

// SetPolicy replaces session id's policy (PUT /v1/sessions/{id}/policy).
func (c *Client) SetPolicy(ctx context.Context, id string, p api.Policy) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, http.MethodPut, sessionPath(id, "/policy"), p, &s)
}

// PatchPolicy changes some fields of session id's policy, live (PATCH
// /v1/sessions/{id}/policy; api.PolicyPatch says how each field applies).
func (c *Client) PatchPolicy(ctx context.Context, id string, p api.PolicyPatch) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, http.MethodPatch, sessionPath(id, "/policy"), p, &s)
}

// AddJail registers the calling process as a jail of session id (POST
// /v1/sessions/{id}/jails): the daemon holds a pidfd on it and kills it
// before it unmounts, removes or restarts the session. Call it from the
// process that then execs the jail in place (same pid).
func (c *Client) AddJail(ctx context.Context, id string) (api.Jail, error) {
	var j api.Jail
	return j, c.do(ctx, http.MethodPost, sessionPath(id, "/jails"), struct{}{}, &j)
}

// Sync returns once every change made on the host before the call is
// visible through session id's mount, host view and jail views (POST
// /v1/sessions/{id}/sync): a host that writes files itself calls it before
// it hands their paths to a tool in the session.
func (c *Client) Sync(ctx context.Context, id string) error {
	var s api.Synced
	return c.do(ctx, http.MethodPost, sessionPath(id, "/sync"), struct{}{}, &s)
}

// Cwd returns session id's working directory, validated (GET
// /v1/sessions/{id}/cwd).
func (c *Client) Cwd(ctx context.Context, id string) (api.WorkDir, error) {
	var wd api.WorkDir
	return wd, c.do(ctx, http.MethodGet, sessionPath(id, "/cwd"), nil, &wd)
}

// Chdir changes session id's working directory (POST /v1/sessions/{id}/cwd).
func (c *Client) Chdir(ctx context.Context, id, path string) (api.WorkDir, error) {
	var wd api.WorkDir
	return wd, c.do(ctx, http.MethodPost, sessionPath(id, "/cwd"), api.CwdRequest{Cd: path}, &wd)
}

// Resolve resolves path in session id (GET /v1/sessions/{id}/resolve).
func (c *Client) Resolve(ctx context.Context, id, path string) (api.Resolution, error) {
	var r api.Resolution
	return r, c.do(ctx, http.MethodGet, sessionPath(id, "/resolve?path="+url.QueryEscape(path)), nil, &r)
}

// Diff lists what layered session id changed under paths, every change
// when none (GET /v1/sessions/{id}/diff); with text, unified diffs of text
// files.
func (c *Client) Diff(ctx context.Context, id string, paths []string, text bool) (api.DiffResult, error) {
	q := url.Values{"path": paths}
	if text {
		q.Set("text", "true")
	}
	var r api.DiffResult
	return r, c.do(ctx, http.MethodGet, sessionPath(id, "/diff?"+q.Encode()), nil, &r)
}

// Commit applies what layered session id changed under paths to the
// project (POST /v1/sessions/{id}/commit); force overwrites host changes.
// Paths refused or in conflict are listed in the result, not an error.
func (c *Client) Commit(ctx context.Context, id string, paths []string, force bool) (api.LayerResult, error) {
	var r api.LayerResult
	return r, c.do(ctx, http.MethodPost, sessionPath(id, "/commit"), api.LayerRequest{Paths: paths, Force: force}, &r)
}

// Discard undoes what layered session id changed under paths (POST
// /v1/sessions/{id}/discard).
func (c *Client) Discard(ctx context.Context, id string, paths []string) (api.LayerResult, error) {
	var r api.LayerResult
	return r, c.do(ctx, http.MethodPost, sessionPath(id, "/discard"), api.LayerRequest{Paths: paths}, &r)
}

// Checkpoint takes checkpoint name of layered session id (POST
// /v1/sessions/{id}/checkpoints): a copy of its layer and baseline.
func (c *Client) Checkpoint(ctx context.Context, id, name string) (api.Checkpoint, error) {
	var r api.Checkpoint
	return r, c.do(ctx, http.MethodPost, sessionPath(id, "/checkpoints"), api.CheckpointRequest{Name: name}, &r)
}

// Checkpoints lists layered session id's checkpoints, oldest first (GET
// /v1/sessions/{id}/checkpoints).
func (c *Client) Checkpoints(ctx context.Context, id string) ([]api.Checkpoint, error) {
	var l api.CheckpointList
	return l.Checkpoints, c.do(ctx, http.MethodGet, sessionPath(id, "/checkpoints"), nil, &l)
}

// DeleteCheckpoint removes checkpoint name of layered session id (DELETE
// /v1/sessions/{id}/checkpoints/{name}).
func (c *Client) DeleteCheckpoint(ctx context.Context, id, name string) error {
	return c.do(ctx, http.MethodDelete, sessionPath(id, "/checkpoints/"+url.PathEscape(name)), nil, nil)
}

// Rollback makes layered session id's view what it was at checkpoint name
// (POST /v1/sessions/{id}/rollback) while its processes run on. Paths that
// could not be changed are listed in the result, not an error.
func (c *Client) Rollback(ctx context.Context, id, name string) (api.RollbackResult, error) {
	var r api.RollbackResult
	return r, c.do(ctx, http.MethodPost, sessionPath(id, "/rollback"), api.CheckpointRequest{Name: name}, &r)
}

// Events returns session id's working-directory events (GET
// /v1/sessions/{id}/events), oldest first.
func (c *Client) Events(ctx context.Context, id string) ([]api.Event, error) {
	var l api.EventList
	return l.Events, c.do(ctx, http.MethodGet, sessionPath(id, "/events"), nil, &l)
}

// errnoNamed returns the errno whose name (unix.ErrnoName) is name, 0 when
// there is none.
func errnoNamed(name string) syscall.Errno {
	if name == "" {
		return 0
	}
	for e := syscall.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}
