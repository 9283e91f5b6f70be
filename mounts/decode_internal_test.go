package mounts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsfs/wsfs/mounts/api"
)

// overLimitsList returns n JSON strings "p0", "p1", ... joined by commas:
// 100,000 of them are about 1 MB.
func overLimitsList(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"p%d"`, i)
	}
	return sb.String()
}

// BenchmarkDecodePatchOverLimits: a policy PATCH body of 100,000 protected
// subpaths (about 1 MB, within MaxBodyBytes) is refused while it is
// decoded, naming the field and the limit (issue 20 item 8: a 400 in
// under 10 ms).
func BenchmarkDecodePatchOverLimits(b *testing.B) {
	body := []byte(`{"protected":[` + overLimitsList(100000) + `]}`)
	b.ReportAllocs()
	for b.Loop() {
		var p api.PolicyPatch
		err := decodeBodyCounted(httptest.NewRequest("PATCH", "/v1/sessions/s/policy", bytes.NewReader(body)), &p, policyCounts("s", ""))
		if err == nil || err.Error() != `session "s": policy: protected: 100000 entries, at most 1024` || CodeOf(err) != CodeInvalid {
			b.Fatalf("decode: %v", err)
		}
	}
}

// apiT is the API of a Manager in a temporary directory (no session is
// made), served in-process with the test's own credentials as the peer's.
type apiT struct {
	a    *API
	proj string // an existing directory, for a root
}

func newAPIT(tb testing.TB) *apiT {
	tb.Helper()
	dir := tb.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := New(Config{StateDir: filepath.Join(dir, "state"), MountBase: filepath.Join(dir, "mnt"), Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		tb.Fatal(err)
	}
	return &apiT{a: NewAPI(m, logger), proj: proj}
}

// do serves one request and returns its status and error body.
func (s *apiT) do(method, path string, body []byte) (int, api.ErrorBody) {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), peerKey{}, peer{cred: &unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid())}}))
	w := httptest.NewRecorder()
	s.a.ServeHTTP(w, r)
	var eb api.ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &eb)
	return w.Code, eb
}

// BenchmarkCreateOverLimits: a session create (POST /v1/sessions) whose
// policy holds 100,000 protected subpaths (about 1 MB) is a 400 naming the
// field and the limit, refused before the body is decoded (issue 20 item
// 8: in under 10 ms; the whole request, the error body written).
func BenchmarkCreateOverLimits(b *testing.B) {
	s := newAPIT(b)
	body := []byte(`{"id":"lim","root":"` + s.proj + `","policy":{"protected":[` + overLimitsList(100000) + `]}}`)
	b.ReportAllocs()
	for b.Loop() {
		status, eb := s.do("POST", "/v1/sessions", body)
		if status != 400 || eb.Error.Message != `session "lim": policy: protected: 100000 entries, at most 1024` {
			b.Fatalf("create: %d %+v", status, eb)
		}
	}
}

// TestCreateOverLimitsFirst: a session create whose policy is over a count
// limit (policy.additional, temp or protected) is refused with Compile's
// message before anything else is looked at (the root need not exist, the
// rest of the body is not decoded), as PUT and PATCH of a policy are; a
// create with no valid id is refused for its id, and one at the limits
// for what comes next (its root), as before.
func TestCreateOverLimitsFirst(t *testing.T) {
	s := newAPIT(t)
	roots := make([]string, 257)
	for i := range roots {
		roots[i] = fmt.Sprintf(`{"path":"/r%d","access":"none"}`, i)
	}
	for _, c := range []struct{ body, want string }{
		{`{"id":"l1","root":"/nonexistent","policy":{"protected":[` + overLimitsList(100000) + `]}}`,
			`session "l1": policy: protected: 100000 entries, at most 1024`},
		{`{"policy":{"mode":"read-only","additional":[` + strings.Join(roots, ",") + `]},"root":"/nonexistent","id":"l2"}`,
			`session "l2": policy: additional: 257 entries, at most 256`},
		{`{"id":"l3","root":"/nonexistent","policy":{"temp":[` + overLimitsList(65) + `]},"colour":1}`,
			`session "l3": policy: temp: 65 entries, at most 64`},
		{`{"id":"../x","root":"/nonexistent","policy":{"temp":[` + overLimitsList(65) + `]}}`,
			`session id "../x": must be 1 to 64 of A-Z a-z 0-9 . _ - and not "." or ".."`},
		{`{"id":"l4","root":"/nonexistent","policy":{"temp":["/tmp"],"protected":[` + overLimitsList(1024) + `]}}`,
			`session "l4": root "/nonexistent": no such directory`},
	} {
		status, eb := s.do("POST", "/v1/sessions", []byte(c.body))
		if status != 400 || eb.Error.Code != CodeInvalid || eb.Error.Message != c.want {
			t.Errorf("create %.60s...: %d %+v, want 400 %q", c.body, status, eb, c.want)
		}
	}
}

// TestScanBodyCounts: the entries of each array reached from the top
// through objects only, by its path of keys, whatever the entries are
// (arrays in arrays are not counted); the top-level strings by key.
func TestScanBodyCounts(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                    "map[] map[]",
		`{"a":[]}`:              "map[a:0] map[]",
		`{"a":[ ]}`:             "map[a:0] map[]",
		`{"a":[1]}`:             "map[a:1] map[]",
		`{"a":[ 1 , 22 ,333 ]}`: "map[a:3] map[]",
		`{"a":["x,y","]",{"b":[1,2,3],"c":"d"},[4,5],null,true]}`:        "map[a:6] map[]",
		`{"p":{"q":[1,2]},"r":[[1,2,3]],"s":"[1,2]"}`:                    "map[p.q:2 r:1] map[s:[1,2]]",
		"{\"a\":[\n1,\n\t2\r\n]}":                                        "map[a:2] map[]",
		`{"id":"x\"y","p":{"id":"z","t":{"u":[{}]}},"q":"\u0041","n":1}`: `map[p.t.u:1] map[id:x"y q:A]`,
	} {
		got, err := scanBody([]byte(body))
		if err != nil || fmt.Sprint(got.counts, " ", got.strs) != want {
			t.Errorf("scanBody(%s) = %v %v, %v, want %s", body, got.counts, got.strs, err, want)
		}
	}
}
