package mounts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/wsfs/wsfs/docs"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/mounts/api"
)

// loadOpenAPI loads and validates docs/openapi.yaml with kin-openapi.
func loadOpenAPI(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("docs/openapi.yaml: openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("docs/openapi.yaml does not validate: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("docs/openapi.yaml: router: %v", err)
	}
	return doc, router
}

// TestOpenAPIRoutes checks that the document and the daemon name the same
// routes: every path and method the API registers is in the document, and
// every one in the document is registered.
func TestOpenAPIRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	var registered, documented []string
	for _, r := range mounts.NewAPI(nil, nil).Routes() {
		for _, m := range r.Methods {
			registered = append(registered, m+" "+r.Pattern)
		}
	}
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			documented = append(documented, m+" "+path)
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("the daemon serves %s; docs/openapi.yaml does not describe it", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("docs/openapi.yaml describes %s; the daemon does not serve it", d)
		}
	}
	// Every error code the API has is in the document's Code enum.
	var enum []string
	for _, v := range doc.Components.Schemas["Code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	for _, c := range api.Codes {
		if !slices.Contains(enum, string(c)) {
			t.Errorf("error code %q is not in docs/openapi.yaml's Code enum %q", c, enum)
		}
	}
	if len(enum) != len(api.Codes) {
		t.Errorf("docs/openapi.yaml's Code enum %q, want exactly %q", enum, api.Codes)
	}
}

// apiCheck sends requests to a daemon and validates each answer against
// the document.
type apiCheck struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	hc     *http.Client
	seen   map[string]bool // "METHOD /pattern STATUS" answered and valid
	codes  map[api.Code]bool
}

func newAPICheck(t *testing.T, socket string) *apiCheck {
	doc, router := loadOpenAPI(t)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", socket)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	return &apiCheck{t: t, doc: doc, router: router, hc: hc, seen: map[string]bool{}, codes: map[api.Code]bool{}}
}

// do sends method path with body (JSON text, "" for none), checks the status
// and, for an error, the code; validates the request (unless badRequest)
// and the answer against the document; and returns the body.
func (c *apiCheck) do(method, path, body string, status int, code api.Code, badRequest bool) []byte {
	t := c.t
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://wsfs"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, status)
	}
	if code != "" {
		var eb api.ErrorBody
		if err := json.Unmarshal(got, &eb); err != nil || eb.Error.Code != code || eb.Error.Message == "" {
			t.Fatalf("%s %s: body %s, want code %q with a message", method, path, got, code)
		}
		c.codes[code] = true
	}
	c.validateAnswer(method, path, body, resp.StatusCode, resp.Header, got, badRequest)
	return got
}

// validate validates an answer received elsewhere (a JSON body).
func (c *apiCheck) validate(method, path, body string, status int, got []byte) {
	c.t.Helper()
	c.validateAnswer(method, path, body, status, http.Header{"Content-Type": {"application/json"}}, got, false)
}

// validateAnswer validates the request (unless badRequest) and its answer
// against the document.
func (c *apiCheck) validateAnswer(method, path, body string, status int, header http.Header, got []byte, badRequest bool) {
	t := c.t
	t.Helper()
	// The request again, for the validator (its body was consumed).
	vreq, _ := http.NewRequest(method, "http://wsfs"+path, strings.NewReader(body))
	if body != "" {
		vreq.Header.Set("Content-Type", "application/json")
	}
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		// Not a documented operation (an unknown path or method): the body
		// must still be the documented error body.
		c.validateSchema("ErrorBody", got, method+" "+path)
		return
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	if !badRequest {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the request does not match docs/openapi.yaml: %v", method, path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: answer %d %s does not match docs/openapi.yaml: %v", method, path, status, got, err)
	}
	c.seen[method+" "+route.Path+" "+http.StatusText(status)] = true
}

// jailHelper is the "jail" helper action: POST /v1/sessions/s1/jails on the
// socket at path, print the answer's body; exit 1 unless it is 200.
func jailHelper(path string) int {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Post("http://wsfs/v1/sessions/s1/jails", "application/json", strings.NewReader("{}"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	os.Stdout.Write(b)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// validateSchema validates body against the named component schema.
func (c *apiCheck) validateSchema(name string, body []byte, what string) {
	c.t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		c.t.Errorf("%s: not JSON: %s", what, body)
		return
	}
	if err := c.doc.Components.Schemas[name].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.t.Errorf("%s: %s does not match schema %s: %v", what, body, name, err)
	}
}

// TestOpenAPIAnswers runs a daemon and validates its real answers against
// docs/openapi.yaml: every operation's success, and each error code the
// daemon gives (internal excepted: no input provokes it).
func TestOpenAPIAnswers(t *testing.T) {
	dir := newDaemonDir(t)
	d := startDaemon(t, dir)
	c := newAPICheck(t, d.socket)
	root := filepath.Join(dir, "proj")
	mkTree(t, root, "src/", "src/main.go", "gone/", ".git/", ".git/hooks/")
	other := filepath.Join(dir, "other")
	mkTree(t, other, "a/")

	c.do("GET", "/v1/healthz", "", 200, "", false)
	c.do("GET", "/v1/metrics", "", 200, "", false)
	served := c.do("GET", "/v1/openapi.json", "", 200, "", false)
	if want, _ := docs.OpenAPIJSON(); !bytes.Equal(served, want) {
		t.Errorf("GET /v1/openapi.json is not docs/openapi.yaml as JSON")
	}
	c.do("GET", "/v1/sessions", "", 200, "", false)
	c.do("POST", "/v1/sessions", `{"id":"s1","root":"`+root+`","labels":{"pod":"p-1"},"policy":{"additional":[{"path":"`+other+`","access":"read-only"}]}}`, 201, "", false)
	c.do("POST", "/v1/sessions", `{"id":"s2","root":"`+root+`","parent":"s1","policy":{"mode":"read-only"}}`, 201, "", false)
	c.do("GET", "/v1/sessions", "", 200, "", false)
	c.do("GET", "/v1/sessions/s1", "", 200, "", false)
	c.do("GET", "/v1/sessions/s1/cwd", "", 200, "", false)
	c.do("POST", "/v1/sessions/s1/cwd", `{"cd":"src"}`, 200, "", false)
	c.do("GET", "/v1/sessions/s1/resolve?path=main.go", "", 200, "", false)
	c.do("GET", "/v1/sessions/s1/resolve?path=/etc/passwd", "", 200, "", false)
	// An error that carries an errno.
	c.do("GET", "/v1/sessions/s1/resolve?path=main.go/x", "", 400, api.CodeInvalid, false)
	c.do("GET", "/v1/sessions/s1/events", "", 200, "", false)
	// A jail registers its own pid, and the daemon ends it with its
	// session: asked by a child, not by this test.
	cmd := exec.Command(os.Args[0], d.socket)
	cmd.Env = append(os.Environ(), helperEnv+"=jail")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jail helper: %v", err)
	}
	c.validate("POST", "/v1/sessions/s1/jails", `{}`, 200, out)
	c.do("POST", "/v1/sessions/nope/jails", `{}`, 404, api.CodeNotFound, false)
	c.do("PUT", "/v1/sessions/s1/policy", `{"mode":"read-only"}`, 200, "", false)
	c.do("PATCH", "/v1/sessions/s1/policy", `{"protected":[".env"]}`, 200, "", false)
	c.do("PATCH", "/v1/sessions/s1/policy", `{"mode":"sideways"}`, 400, api.CodeInvalid, true)

	// A layered session's verbs.
	lroot := filepath.Join(dir, "layered")
	mkTree(t, lroot, "a")
	c.do("POST", "/v1/sessions", `{"id":"ly","root":"`+lroot+`","layer":true}`, 201, "", false)
	if r := d.exec(t, "ly", nil, "bash", "-c", "echo x > a && echo n > n"); r.code != 0 {
		t.Fatalf("layered write: %+v", r)
	}
	c.do("GET", "/v1/sessions/ly/diff?text=true", "", 200, "", false)
	c.do("GET", "/v1/sessions/ly/diff?path=a&path=n", "", 200, "", false)
	c.do("POST", "/v1/sessions/ly/commit", `{"paths":["a"]}`, 200, "", false)
	c.do("POST", "/v1/sessions/ly/discard", `{}`, 200, "", false)
	c.do("POST", "/v1/sessions/ly/discard", `{"force":true}`, 400, api.CodeInvalid, false)
	c.do("POST", "/v1/sessions/ly/checkpoints", `{"name":"c1"}`, 201, "", false)
	c.do("POST", "/v1/sessions/ly/checkpoints", `{"name":"c1"}`, 409, api.CodeExists, false)
	c.do("POST", "/v1/sessions/ly/checkpoints", `{"name":".c"}`, 400, api.CodeInvalid, false)
	c.do("GET", "/v1/sessions/ly/checkpoints", "", 200, "", false)
	c.do("POST", "/v1/sessions/ly/rollback", `{"name":"c1"}`, 200, "", false)
	c.do("POST", "/v1/sessions/ly/rollback", `{"name":"c2"}`, 404, api.CodeNotFound, false)
	c.do("DELETE", "/v1/sessions/ly/checkpoints/c1", "", 204, "", false)
	c.do("DELETE", "/v1/sessions/ly/checkpoints/c1", "", 404, api.CodeNotFound, false)
	c.do("GET", "/v1/sessions/s1/checkpoints", "", 400, api.CodeInvalid, false)
	c.do("GET", "/v1/sessions/s1/diff", "", 400, api.CodeInvalid, false)
	c.do("DELETE", "/v1/sessions/ly", "", 204, "", false)

	// Errors, one per code.
	c.do("POST", "/v1/sessions", `{"id":"a/b","root":"`+root+`"}`, 400, api.CodeInvalid, false)
	c.do("POST", "/v1/sessions", `{"id":"x","root":"`+root+`","bogus":1}`, 400, api.CodeInvalid, true)
	c.do("GET", "/v1/sessions/s1/resolve", "", 400, api.CodeInvalid, true)
	c.do("PUT", "/v1/sessions/s1/policy", `{"mode":"sideways"}`, 400, api.CodeInvalid, true)
	c.do("POST", "/v1/sessions/s1/cwd", `{"cd":"nope"}`, 400, api.CodeInvalid, false)
	c.do("GET", "/v1/sessions/nope", "", 404, api.CodeNotFound, false)
	c.do("DELETE", "/v1/sessions/nope", "", 404, api.CodeNotFound, false)
	c.do("GET", "/v1/sessions/nope/events", "", 404, api.CodeNotFound, false)
	c.do("GET", "/v1/nothing", "", 404, api.CodeNotFound, true)
	c.do("PATCH", "/v1/healthz", "", 405, api.CodeMethod, true)
	c.do("POST", "/v1/sessions", `{"id":"s1","root":"`+root+`"}`, 409, api.CodeExists, false)
	c.do("POST", "/v1/sessions/s1/cwd", `{"cd":"`+strings.Repeat("x", mounts.MaxBodyBytes)+`"}`, 413, api.CodeTooLarge, true)

	// busy: a process holds the mount.
	hold := exec.Command("sleep", "600")
	hold.Dir = filepath.Join(d.mountBase, "s2")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	c.do("DELETE", "/v1/sessions/s2", "", 409, api.CodeBusy, false)
	hold.Process.Kill()
	hold.Wait()
	c.do("DELETE", "/v1/sessions/s2", "", 204, "", false)

	// root_changed: the root moved away and a symlink put in its place.
	moved := root + ".moved"
	if err := os.Rename(root, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, root); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/sessions/s1/cwd", "", 409, api.CodeRootChanged, false)
	c.do("GET", "/v1/sessions/s1/resolve?path=x", "", 409, api.CodeRootChanged, false)
	os.Remove(root)
	if err := os.Rename(moved, root); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/sessions/s1/cwd", "", 200, "", false)

	// origin_gone: the root removed on the host.
	gone := filepath.Join(dir, "gone")
	mkTree(t, gone, "d/")
	c.do("POST", "/v1/sessions", `{"id":"g","root":"`+gone+`","cwd":"d"}`, 201, "", false)
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/v1/sessions/g/cwd", "", 409, api.CodeOriginGone, false)
	c.do("DELETE", "/v1/sessions/g?force=true", "", 204, "", false)

	// failed: a record that cannot be read, found at the next start.
	c.do("DELETE", "/v1/sessions/s1", "", 204, "", false)
	d.stop()
	if err := os.WriteFile(filepath.Join(d.stateDir, "sessions", "broken.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, dir)
	c2 := newAPICheck(t, d2.socket)
	c2.do("GET", "/v1/sessions", "", 200, "", false)
	c2.do("GET", "/v1/sessions/broken", "", 200, "", false)
	c2.do("GET", "/v1/sessions/broken/cwd", "", 409, api.CodeFailed, false)
	c2.do("DELETE", "/v1/sessions/broken", "", 204, "", false)
	for k := range c2.codes {
		c.codes[k] = true
	}

	// forbidden: what a peer without credentials gets, from the same handler.
	rec := httptest.NewRecorder()
	mounts.NewAPI(nil, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sessions", nil))
	if rec.Code != 403 {
		t.Fatalf("no peer credentials: %d, want 403", rec.Code)
	}
	c.validateSchema("ErrorBody", rec.Body.Bytes(), "403")
	c.codes[api.CodeForbidden] = true

	for _, code := range api.Codes {
		if !c.codes[code] && code != api.CodeInternal {
			t.Errorf("no answer with code %q was validated", code)
		}
	}
}
