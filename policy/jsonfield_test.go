package policy_test

import (
	"reflect"
	"testing"

	"github.com/wsfs/wsfs/policy"
)

// TestUnknownJSONField: the first unknown key's path, name and line, with
// encoding/json's case-insensitive matching of known ones.
func TestUnknownJSONField(t *testing.T) {
	type req struct {
		ID     string       `json:"id"`
		Policy *policy.Spec `json:"policy,omitempty"`
		Labels map[string]string
	}
	for _, tc := range []struct {
		in, path, key string
		line          int
		ok            bool
	}{
		{`{"id":"x","policy":{"mode":"read-only","extra":1}}`, "policy", "extra", 1, true},
		{"{\n \"id\": \"x\",\n \"policy\": {\n  \"additional\": [{\"path\":\"/a\",\"access\":\"none\"},\n   {\"path\":\"/b\", \"acess\":\"none\"}]}}", "policy.additional[1]", "acess", 5, true},
		{`{"ID":"x","labels":{"any":"thing"},"nope":[1,{"z":2}]}`, "", "nope", 1, true},
		{`{"id":"x","policy":{"Mode":"read-only"}}`, "", "", 0, false},
	} {
		path, key, line, ok := policy.UnknownJSONField([]byte(tc.in), reflect.TypeOf(req{}))
		if path != tc.path || key != tc.key || line != tc.line || ok != tc.ok {
			t.Errorf("UnknownJSONField(%s) = %q %q %d %v, want %q %q %d %v", tc.in, path, key, line, ok, tc.path, tc.key, tc.line, tc.ok)
		}
	}
}
