package mounts

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// fuzzBody is a request value with the shapes the API's bodies have: a
// string, a list, a nested object.
type fuzzBody struct {
	ID     string   `json:"id"`
	Paths  []string `json:"paths,omitempty"`
	Nested *struct {
		Mode string `json:"mode"`
	} `json:"nested,omitempty"`
}

// FuzzDecodeBody feeds arbitrary request bodies to the API's decoder: no
// panic; a refusal is CodeInvalid or CodeTooLarge on one line; an
// acceptance is one valid JSON object within the size limit, with no
// unknown field, that means the same when decoded by encoding/json.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"id": "a"}`, `{"id": "a", "paths": ["x"], "nested": {"mode": "ro"}}`, `{"id": "a"} {}`, `{"idd": 1}`,
		`null`, `[]`, `"x"`, `1`, ``, `   `, `{"id": "a"}   `, `{"nested": {"mode": "ro", "x": 1}}`, `{"id":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/sessions", bytes.NewReader(body))
		var v fuzzBody
		err := decodeBody(r, &v)
		if err != nil {
			if c := CodeOf(err); c != CodeInvalid && c != CodeTooLarge {
				t.Fatalf("body %q: code %q (%v), want invalid or too_large", body, c, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("body %q: a multi-line error %q", body, err)
			}
			return
		}
		trimmed := bytes.TrimSpace(body)
		switch {
		case len(body) > MaxBodyBytes:
			t.Fatalf("body of %d bytes accepted (limit %d)", len(body), MaxBodyBytes)
		case !json.Valid(body):
			t.Fatalf("body %q accepted but not valid JSON", body)
		case len(trimmed) == 0 || trimmed[0] != '{':
			t.Fatalf("body %q accepted but not an object", body)
		}
		var want fuzzBody
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("body %q accepted, encoding/json refuses it: %v", body, err)
		}
		got, _ := json.Marshal(v)
		exp, _ := json.Marshal(want)
		if !bytes.Equal(got, exp) {
			t.Fatalf("body %q decoded to %s, encoding/json says %s", body, got, exp)
		}
	})
}
