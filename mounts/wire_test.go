package mounts

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// fill sets every field of v (a pointer) to a non-zero value, recursively,
// so a conversion that forgets a field shows in the JSON.
func fill(v reflect.Value, seed string) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.String:
		v.SetString(seed)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(len(seed)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, seed+"k")
		fill(e, seed+"v")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), seed+"0")
		v.Set(s)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 1, 2, 3, 4e6, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), seed+"."+v.Type().Field(i).Name)
			}
		}
	}
}

// jsonOf marshals v to a generic JSON value.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWireFieldsMatch checks that each daemon value and its API value carry
// the same JSON, every field set: a field added on one side only, or not
// copied by the conversion, fails here.
func TestWireFieldsMatch(t *testing.T) {
	var s Session
	fill(reflect.ValueOf(&s).Elem(), "s")
	if got, want := jsonOf(t, apiSession(s)), jsonOf(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("Session: api JSON\n%v\nwant (mounts JSON)\n%v", got, want)
	}
	// Requests go the other way: every field of the API's request reaches
	// the Manager's Spec.
	var req api.CreateRequest
	fill(reflect.ValueOf(&req).Elem(), "q")
	if got, want := jsonOf(t, specOf(req)), jsonOf(t, req); !reflect.DeepEqual(got, want) {
		t.Errorf("CreateRequest: Spec JSON\n%v\nwant (api JSON)\n%v", got, want)
	}
	var ps policy.Spec
	fill(reflect.ValueOf(&ps).Elem(), "p")
	ap := APIPolicy(ps)
	if got, want := jsonOf(t, PolicySpec(&ap)), jsonOf(t, ps); !reflect.DeepEqual(got, want) {
		t.Errorf("Policy round trip\n%v\nwant\n%v", got, want)
	}
	if got := PolicySpec(nil); !reflect.DeepEqual(got, policy.Spec{}) {
		t.Errorf("PolicySpec(nil) = %+v, want the zero spec (every default)", got)
	}
}
