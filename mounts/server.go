package mounts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/docs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// MaxBodyBytes is the largest request body the API reads (1 MiB); a larger
// one gets 413 with code "too_large".
const MaxBodyBytes = 1 << 20

// ShutdownTimeout bounds how long Serve waits for in-flight requests after
// its context is done.
const ShutdownTimeout = time.Minute

// API is the daemon's HTTP/1.1 JSON API over a Manager (docs/api.md). It
// answers only peers whose uid (SO_PEERCRED on the Unix socket) is the
// daemon's own; others get 403 "forbidden".
type API struct {
	m       *Manager
	log     *slog.Logger
	uid     uint32
	metrics *metrics
	mux     *http.ServeMux
	routes  []Route
	openapi []byte // the OpenAPI document as JSON (nil when it does not load)
}

// Route is one path pattern the API registers and the methods it answers
// there (net/http.ServeMux pattern syntax: /v1/sessions/{id}).
type Route struct {
	Pattern string
	Methods []string
}

// NewAPI returns the API of m. logger nil means slog.Default().
func NewAPI(m *Manager, logger *slog.Logger) *API {
	if logger == nil {
		logger = slog.Default()
	}
	a := &API{m: m, log: logger, uid: uint32(os.Getuid()), metrics: newMetrics(), mux: http.NewServeMux()}
	var err error
	if a.openapi, err = docs.OpenAPIJSON(); err != nil {
		logger.Error("api: the OpenAPI document does not load", "err", err)
	}
	a.route("/v1/healthz", map[string]handler{http.MethodGet: a.health})
	a.route("/v1/openapi.json", map[string]handler{http.MethodGet: a.serveOpenAPI})
	a.route("/v1/metrics", map[string]handler{http.MethodGet: a.serveMetrics})
	a.route("/v1/sessions", map[string]handler{http.MethodGet: a.list, http.MethodPost: a.create})
	a.route("/v1/sessions/{id}", map[string]handler{http.MethodGet: a.get, http.MethodDelete: a.remove})
	a.route("/v1/sessions/{id}/policy", map[string]handler{http.MethodPut: a.setPolicy, http.MethodPatch: a.patchPolicy})
	a.route("/v1/sessions/{id}/jails", map[string]handler{http.MethodPost: a.addJail})
	a.route("/v1/sessions/{id}/cwd", map[string]handler{http.MethodGet: a.cwd, http.MethodPost: a.chdir})
	a.route("/v1/sessions/{id}/resolve", map[string]handler{http.MethodGet: a.resolve})
	a.route("/v1/sessions/{id}/events", map[string]handler{http.MethodGet: a.events})
	a.route("/v1/sessions/{id}/sync", map[string]handler{http.MethodPost: a.sync})
	a.route("/v1/sessions/{id}/diff", map[string]handler{http.MethodGet: a.diff})
	a.route("/v1/sessions/{id}/commit", map[string]handler{http.MethodPost: a.commit})
	a.route("/v1/sessions/{id}/discard", map[string]handler{http.MethodPost: a.discard})
	a.route("/v1/sessions/{id}/checkpoints", map[string]handler{http.MethodGet: a.checkpoints, http.MethodPost: a.checkpoint})
	a.route("/v1/sessions/{id}/checkpoints/{name}", map[string]handler{http.MethodDelete: a.deleteCheckpoint})
	a.route("/v1/sessions/{id}/rollback", map[string]handler{http.MethodPost: a.rollback})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.finish(w, r, "other", time.Now(), errorf(CodeNotFound, "%s %s: no such API route", r.Method, r.URL.Path))
	})
	return a
}

// handler answers one route and method: a status and a body, or an error.
type handler func(r *http.Request) (int, any, error)

// Routes returns every route the API registers, in registration order, each
// with its methods sorted.
func (a *API) Routes() []Route {
	return slices.Clone(a.routes)
}

// route registers pattern with one handler per method.
func (a *API) route(pattern string, methods map[string]handler) {
	a.routes = append(a.routes, Route{Pattern: pattern, Methods: slices.Sorted(maps.Keys(methods))})
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h, ok := methods[r.Method]
		if !ok {
			a.finish(w, r, pattern, start, errorf(CodeMethod, "%s %s: method not allowed", r.Method, r.URL.Path))
			return
		}
		status, body, err := h(r)
		if err != nil {
			a.finish(w, r, pattern, start, err)
			return
		}
		writeJSONStatus(w, status, body)
		a.metrics.observe(pattern, r.Method, status, time.Since(start))
	})
}

// finish writes err as an ErrorBody and counts the request.
func (a *API) finish(w http.ResponseWriter, r *http.Request, route string, start time.Time, err error) {
	code := CodeOf(err)
	if code == CodeInternal {
		a.log.Error("api", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	status := code.Status()
	writeJSONStatus(w, status, api.ErrorBody{Error: api.ErrorObject{Code: code, Message: err.Error(), Errno: identity.ErrnoName(err)}})
	a.metrics.observe(route, r.Method, status, time.Since(start))
}

// writeJSONStatus writes v as JSON with status; a nil v writes no body, a
// metricsText is written as is.
func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	switch v := v.(type) {
	case nil:
		w.WriteHeader(status)
		return
	case rawJSON:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(v)
		return
	case metricsText:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, string(v))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// peerKey is the context key of a connection's peer credentials.
type peerKey struct{}

// peer is the peer of a connection: its credentials, or why they are
// unavailable.
type peer struct {
	cred *unix.Ucred
	err  error
	conn *net.UnixConn // for SO_PEERPIDFD (peerPidfd)
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5+, include/uapi/asm-generic/socket.h).
const soPeerPidfd = 77

// peerPidfd returns a pidfd on the process that connected (SO_PEERPIDFD:
// the kernel keeps a reference to that process, not its number), which
// the caller closes; -1 when the kernel has none to give (before 6.5).
func (p peer) peerPidfd() int {
	if p.conn == nil {
		return -1
	}
	raw, err := p.conn.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(s uintptr) {
		if v, err := unix.GetsockoptInt(int(s), unix.SOL_SOCKET, soPeerPidfd); err == nil {
			fd = v
		}
	})
	return fd
}

// ConnContext records the peer credentials of a Unix socket connection
// (SO_PEERCRED) in ctx; use it as http.Server.ConnContext.
func (a *API) ConnContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{err: errors.New("not a Unix socket connection")}
	if uc, ok := c.(*net.UnixConn); ok {
		p.conn = uc
		raw, err := uc.SyscallConn()
		if err == nil {
			cerr := raw.Control(func(fd uintptr) {
				p.cred, p.err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
			})
			if cerr != nil {
				p.err = cerr
			}
		} else {
			p.err = err
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// ServeHTTP checks the peer's uid, then routes the request.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, _ := r.Context().Value(peerKey{}).(peer)
	switch {
	case p.cred == nil:
		msg := "peer credentials unavailable"
		if p.err != nil {
			msg += ": " + p.err.Error()
		}
		a.finish(w, r, "auth", time.Now(), errorf(CodeForbidden, "%s", msg))
		return
	case p.cred.Uid != a.uid:
		a.log.Warn("api: refused peer", "uid", p.cred.Uid, "pid", p.cred.Pid)
		a.finish(w, r, "auth", time.Now(), errorf(CodeForbidden, "peer uid %d (pid %d): only uid %d may use this daemon", p.cred.Uid, p.cred.Pid, a.uid))
		return
	}
	a.mux.ServeHTTP(w, r)
}

// Serve answers the API on l until ctx is done, also when the process is
// out of descriptors (starvedListener); then it stops accepting,
// waits up to ShutdownTimeout for in-flight requests to finish, and returns.
// It does not close the Manager.
func (a *API) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           a,
		ConnContext:       a.ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	sl := newStarvedListener(l)
	go func() { done <- srv.Serve(sl) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}

// checkSocket refuses a socket path Listen would refuse, without making
// anything: a relative path (ErrInvalid), something there that is not a
// socket (ErrInvalid), a socket a daemon answers on (ErrExists). stale is
// true when a socket nobody answers on is there (Listen replaces it). A
// socket of a daemon killed a moment ago may still answer (the kernel
// queues connections until the process is gone): a daemon takes the state
// directory's lock first (mounts.New), which waits for that, then listens,
// and on a refusal undoes New (Manager.Abandon).
func checkSocket(path string) (stale bool, err error) {
	if !filepath.IsAbs(path) {
		return false, errorf(CodeInvalid, "socket %q: must be an absolute path", path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return false, nil
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, errorf(CodeInvalid, "socket %q: exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return false, errorf(CodeExists, "socket %q: another daemon is listening on it", path)
	}
	return true, nil
}

// Listen creates the API's Unix socket at path with mode 0600, without a
// window in which it has another mode (it is made in a private directory,
// then renamed into place). A stale socket at path (nobody answers) is
// replaced; a live one is an ErrExists. The caller removes path after
// closing the listener.
func Listen(path string) (*net.UnixListener, error) {
	stale, err := checkSocket(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errorf(CodeInvalid, "socket %q: %v", path, identity.ErrnoText(err))
	}
	if stale {
		if err := os.Remove(path); err != nil {
			return nil, errorf(CodeInvalid, "socket %q: remove stale socket: %v", path, identity.ErrnoText(err))
		}
	}
	tmp, err := os.MkdirTemp(dir, ".wsfs-sock-")
	if err != nil {
		return nil, errorf(CodeInvalid, "socket %q: %v", path, identity.ErrnoText(err))
	}
	defer os.RemoveAll(tmp)
	tmpSock := filepath.Join(tmp, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpSock, Net: "unix"})
	if err != nil {
		return nil, errorf(CodeInvalid, "socket %q: %v", path, identity.ErrnoText(err))
	}
	l.SetUnlinkOnClose(false)
	err = os.Chmod(tmpSock, 0o600)
	if err == nil {
		err = os.Rename(tmpSock, path)
	}
	if err != nil {
		l.Close()
		return nil, errorf(CodeInvalid, "socket %q: %v", path, identity.ErrnoText(err))
	}
	return l, nil
}

// decodeBody decodes r's JSON body into v: at most MaxBodyBytes, a JSON
// object (null, an array or a scalar is refused), no unknown fields, nothing
// after the value. A body over the limit is CodeTooLarge wherever the limit
// is hit, in the value or after it.
func decodeBody(r *http.Request, v any) error {
	return decodeBodyCounted(r, v, nil)
}

// policyCounts returns the check decodeBodyCounted makes of a policy in a
// body for session id: the arrays additional, temp and protected at the
// body's path at ("" for PUT and PATCH, whose body is the policy;
// "policy." for a create) are counted against the policy's limits
// (policy.CheckCounts, Compile's rule and message) before the body is
// decoded (encoding/json took 30 ms for 100,000 strings).
func policyCounts(id, at string) func(bodyShape) error {
	return func(b bodyShape) error {
		if err := policy.CheckCounts(b.counts[at+"additional"], b.counts[at+"temp"], b.counts[at+"protected"]); err != nil {
			return errorf(CodeInvalid, "session %q: %v", id, err)
		}
		return nil
	}
}

// createCounts is policyCounts for a session create's body (POST
// /v1/sessions), whose policy is its field "policy", named by the body's
// id. A body without a valid id is left to Create, which refuses the id
// first.
func createCounts(b bodyShape) error {
	id := b.strs["id"]
	if ValidID(id) != nil {
		return nil
	}
	return policyCounts(id, "policy.")(b)
}

// decodeBodyCounted is decodeBody; check, when not nil, is given the shape
// of the body (scanBody: the number of entries of its arrays, its
// top-level strings) before the body is decoded into v, and its error is
// returned as it is. A valid body is read once by encoding/json's scanner
// (json.Valid) and once by scanBody before it is decoded: a 1 MB body of
// 100,000 strings is refused by check in about 5 ms.
func decodeBodyCounted(r *http.Request, v any, check func(bodyShape) error) error {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err == nil {
		if json.Valid(raw) {
			raw = bytes.TrimSpace(raw)
		} else {
			raw, err = firstValue(raw)
		}
	}
	if err == nil {
		if len(raw) > 0 && raw[0] != '{' {
			return errorf(CodeInvalid, "request body: %s: a JSON object is required", jsonKind(raw[0]))
		}
		var shape bodyShape
		if shape, err = scanBody(raw); err == nil {
			if check != nil {
				if cerr := check(shape); cerr != nil {
					return cerr
				}
			}
			inner := json.NewDecoder(bytes.NewReader(raw))
			inner.DisallowUnknownFields()
			err = inner.Decode(v)
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return errorf(CodeTooLarge, "request body: larger than %d bytes", MaxBodyBytes)
	case err == io.EOF:
		return errorf(CodeInvalid, "request body: empty, a JSON object is required")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// In the body's terms, not Go's ("cannot unmarshal number into Go
		// struct field CwdRequest.cd of type string").
		where := "the body"
		if te.Field != "" {
			where = fmt.Sprintf("field %q", te.Field)
		}
		return errorf(CodeInvalid, "request body: %s: want %s, got a JSON %s", where, jsonWant(te.Type), te.Value)
	}
	if path, key, _, ok := policy.UnknownJSONField(raw, reflect.TypeOf(v)); ok && path != "" {
		// encoding/json names the key only: say where it is.
		return errorf(CodeInvalid, "request body: unknown field %q in %s", key, path)
	}
	return errorf(CodeInvalid, "request body: %v", err)
}

// firstValue returns the JSON value data starts with, trimmed, or why data
// is not one JSON value (encoding/json's words: a syntax error, io.EOF for
// nothing but white space, trailing data after the value).
func firstValue(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return bytes.TrimSpace(raw), nil
}

// duplicateKey refuses an object that names a key twice (RFC 8259 §4: names
// "SHOULD be unique"; encoding/json keeps the last one, so
// {"mode":"full-access","mode":"read-only"} would silently mean read-only).
// raw is one well-formed JSON value (decodeBody decoded it already). It
// scans the bytes once, in time linear in raw (encoding/json's
// Decoder.Token took 70 ms on a 1 MB body of 100,000 strings): a string at
// a key's place in an object is a key, compared unescaped.
func duplicateKey(raw []byte) error {
	_, err := scanBody(raw)
	return err
}

// bodyShape is what scanBody finds in a body besides its duplicate keys.
type bodyShape struct {
	// counts holds the number of entries of each array reached from the
	// top through objects only, by its path of keys joined with "."
	// ("protected"; "policy.protected" in a create's body). A key holding
	// a "." can only make a path a field's too when it is no field (the
	// body is then refused as unknown anyway).
	counts map[string]int
	// strs holds the top-level fields whose values are strings, by key,
	// unescaped.
	strs map[string]string
}

// scanBody is duplicateKey, and it returns the shape of the body.
func scanBody(raw []byte) (bodyShape, error) {
	type open struct {
		keys    map[string]bool // nil for an array
		wantKey bool            // the next string is a key
		key     string          // an object's last key
		path    string          // the path of keys to it (bodyShape.counts)
		counted bool            // reached through objects only
		n       int             // an array's entries so far
		next    bool            // an array's next byte may start an entry
	}
	shape := bodyShape{counts: map[string]int{}, strs: map[string]string{}}
	var stack []open
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if top := len(stack) - 1; top >= 0 && stack[top].keys == nil && stack[top].next &&
			c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ']' {
			stack[top].n++
			stack[top].next = false
		}
		switch c {
		case '{', '[':
			o := open{counted: len(stack) == 0}
			if top := len(stack) - 1; top >= 0 && stack[top].keys != nil && stack[top].counted {
				o.counted, o.path = true, stack[top].key
				if stack[top].path != "" {
					o.path = stack[top].path + "." + o.path
				}
			}
			if c == '{' {
				o.keys, o.wantKey = map[string]bool{}, true
			} else {
				o.next = true
			}
			stack = append(stack, o)
		case '}', ']':
			if top := len(stack) - 1; stack[top].keys == nil && stack[top].counted {
				shape.counts[stack[top].path] = stack[top].n
			}
			stack = stack[:len(stack)-1]
		case ',':
			if top := len(stack) - 1; top >= 0 {
				if stack[top].keys != nil {
					stack[top].wantKey = true
				} else {
					stack[top].next = true
				}
			}
		case '"':
			j, escaped := i+1, false
			for ; j < len(raw) && raw[j] != '"'; j++ {
				if raw[j] == '\\' {
					j++
					escaped = true
				}
			}
			top := len(stack) - 1
			isKey := top >= 0 && stack[top].keys != nil && stack[top].wantKey
			if isKey || (top == 0 && stack[0].keys != nil) {
				k := string(raw[i+1 : j])
				if escaped {
					if err := json.Unmarshal(raw[i:j+1], &k); err != nil {
						return bodyShape{}, err
					}
				}
				switch {
				case !isKey:
					shape.strs[stack[0].key] = k // a top-level field's string
				case stack[top].keys[k]:
					return bodyShape{}, fmt.Errorf("key %q given twice", k)
				default:
					stack[top].keys[k], stack[top].wantKey, stack[top].key = true, false, k
				}
			}
			i = j
		}
	}
	return shape, nil
}

// jsonWant names the JSON value a Go type decodes from.
func jsonWant(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return "a number"
}

// jsonKind names the kind of JSON value whose first byte is c.
func jsonKind(c byte) string {
	switch c {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// sessionID returns the {id} of r, checked.
func sessionID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	return id, ValidID(id)
}

func (a *API) health(r *http.Request) (int, any, error) {
	return http.StatusOK, api.Health{Status: "ok", Sessions: a.m.Len(), StateDir: a.m.StateDir(), MountBase: a.m.MountBase()}, nil
}

func (a *API) list(r *http.Request) (int, any, error) {
	list := a.m.List(r.Context())
	out := api.SessionList{Sessions: make([]api.Session, len(list))}
	for i, s := range list {
		out.Sessions[i] = apiSession(s)
	}
	return http.StatusOK, out, nil
}

func (a *API) create(r *http.Request) (int, any, error) {
	var req api.CreateRequest
	if err := decodeBodyCounted(r, &req, createCounts); err != nil {
		return 0, nil, err
	}
	s, err := a.m.Create(r.Context(), specOf(req))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, apiSession(s), nil
}

func (a *API) get(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	s, err := a.m.Get(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apiSession(s), nil
}

func (a *API) remove(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		if force, err = strconv.ParseBool(v); err != nil {
			return 0, nil, errorf(CodeInvalid, "force %q: must be true or false", v)
		}
	}
	if err := a.m.Remove(r.Context(), id, force); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (a *API) setPolicy(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var p api.Policy
	if err := decodeBodyCounted(r, &p, policyCounts(id, "")); err != nil {
		return 0, nil, err
	}
	s, err := a.m.SetPolicy(r.Context(), id, PolicySpec(&p))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apiSession(s), nil
}

func (a *API) patchPolicy(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var p api.PolicyPatch
	if err := decodeBodyCounted(r, &p, policyCounts(id, "")); err != nil {
		return 0, nil, err
	}
	s, err := a.m.PatchPolicy(r.Context(), id, policyPatch(p))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apiSession(s), nil
}

// addJail registers the caller (its SO_PEERCRED pid, by its SO_PEERPIDFD
// pidfd where the kernel has one) as a jail of the session.
func (a *API) addJail(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	p, _ := r.Context().Value(peerKey{}).(peer)
	if p.cred == nil {
		return 0, nil, errorf(CodeInvalid, "session %q: jail: the caller's pid is unknown (peer credentials unavailable)", id)
	}
	// By pidfd when the kernel gives one: the pid alone may name another
	// process by now (the caller exited while its request waited).
	pidfd := p.peerPidfd()
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if err := a.m.AddJailPidfd(r.Context(), id, int(p.cred.Pid), pidfd); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.Jail{Session: id, PID: int(p.cred.Pid)}, nil
}

func (a *API) sync(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := a.m.Sync(r.Context(), id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.Synced{Session: id}, nil
}

func (a *API) cwd(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	wd, err := a.m.Cwd(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wd, nil
}

func (a *API) chdir(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var req api.CwdRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	wd, err := a.m.Chdir(r.Context(), id, req.Cd)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, wd, nil
}

// diff answers GET /v1/sessions/{id}/diff[?path=P...][&text=true].
func (a *API) diff(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	text := false
	switch t := q.Get("text"); t {
	case "", "false", "0":
	case "true", "1":
		text = true
	default:
		return 0, nil, errorf(CodeInvalid, "diff: query parameter text %q: must be true or false", t)
	}
	res, err := a.m.Diff(r.Context(), id, q["path"], text)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// commit answers POST /v1/sessions/{id}/commit.
func (a *API) commit(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var req api.LayerRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	res, err := a.m.Commit(r.Context(), id, req.Paths, req.Force)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// discard answers POST /v1/sessions/{id}/discard.
func (a *API) discard(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var req api.LayerRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	if req.Force {
		return 0, nil, errorf(CodeInvalid, "discard: force: only commit takes it")
	}
	res, err := a.m.Discard(r.Context(), id, req.Paths)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// checkpoint answers POST /v1/sessions/{id}/checkpoints.
func (a *API) checkpoint(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var req api.CheckpointRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	c, err := a.m.Checkpoint(r.Context(), id, req.Name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, c, nil
}

// checkpoints answers GET /v1/sessions/{id}/checkpoints.
func (a *API) checkpoints(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	l, err := a.m.Checkpoints(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, l, nil
}

// deleteCheckpoint answers DELETE /v1/sessions/{id}/checkpoints/{name}.
func (a *API) deleteCheckpoint(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := a.m.DeleteCheckpoint(r.Context(), id, r.PathValue("name")); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// rollback answers POST /v1/sessions/{id}/rollback.
func (a *API) rollback(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	var req api.CheckpointRequest
	if err := decodeBody(r, &req); err != nil {
		return 0, nil, err
	}
	res, err := a.m.Rollback(r.Context(), id, req.Name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

func (a *API) resolve(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	if _, ok := q["path"]; !ok {
		return 0, nil, errorf(CodeInvalid, "resolve: query parameter path is required")
	}
	res, err := a.m.Resolve(r.Context(), id, q.Get("path"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

func (a *API) events(r *http.Request) (int, any, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, nil, err
	}
	ev, err := a.m.Events(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	if ev == nil {
		ev = []api.Event{}
	}
	return http.StatusOK, api.EventList{Session: id, Events: ev}, nil
}

// serveMetrics is not a JSON handler: it writes Prometheus text itself and
// returns no body.
func (a *API) serveMetrics(r *http.Request) (int, any, error) {
	return http.StatusOK, metricsText(a.render()), nil
}

// MetricsHandler serves text() (Prometheus text format 0.0.4) on GET and
// HEAD, any path (mount it at /metrics); other methods get 405.
func MetricsHandler(text func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, text())
	})
}

// Metrics returns the metrics exposition of GET /v1/metrics (Prometheus
// text format 0.0.4), for a separate metrics listener (TCP or Unix) that
// the operator chose to expose without the API's peer check.
func (a *API) Metrics() string { return a.render() }

// render produces the metrics exposition.
func (a *API) render() string {
	return a.metrics.render(a.m)
}

// serveOpenAPI answers the OpenAPI document (docs/openapi.yaml) as JSON.
func (a *API) serveOpenAPI(r *http.Request) (int, any, error) {
	if a.openapi == nil {
		return 0, nil, errorf(CodeInternal, "openapi: the document embedded in this binary does not load")
	}
	return http.StatusOK, rawJSON(a.openapi), nil
}

// rawJSON is a body that is JSON already.
type rawJSON []byte

// metricsText is a body written as Prometheus text instead of JSON.
type metricsText string
