package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// UnknownJSONField finds where data, one JSON value decoded into a value of
// type t with encoding/json's DisallowUnknownFields, holds its first
// unknown field: the field's path in the document ("policy",
// "policy.additional[1]"; "" at the top level), the key itself and its
// line (from 1). ok is false when data has no unknown field for t. Keys
// match fields as encoding/json matches them: the json tag's name, else the
// field's name, case-insensitively. encoding/json's own error names only
// the key (`json: unknown field "extra"`); this says where it is.
func UnknownJSONField(data []byte, t reflect.Type) (path, key string, line int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var off int64
	// After a syntax error Token fails for good while More may go on
	// answering true (it only peeks), so every loop stops at the first one.
	broken := false
	var walk func(t reflect.Type, at string) bool
	walk = func(t reflect.Type, at string) bool {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		tok, err := dec.Token()
		if err != nil {
			broken = true
			return false
		}
		d, isDelim := tok.(json.Delim)
		if !isDelim {
			return false
		}
		switch d {
		case '{':
			for !broken && dec.More() {
				start := dec.InputOffset()
				kt, err := dec.Token()
				if err != nil {
					broken = true
					return false
				}
				k, _ := kt.(string)
				var ft reflect.Type
				switch {
				case t != nil && t.Kind() == reflect.Struct:
					f, found := jsonField(t, k)
					if !found {
						path, key, off = at, k, start
						return true
					}
					ft = f.Type
				case t != nil && t.Kind() == reflect.Map:
					ft = t.Elem()
				}
				if walk(ft, joinPath(at, k)) {
					return true
				}
			}
		case '[':
			var et reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				et = t.Elem()
			}
			for i := 0; !broken && dec.More(); i++ {
				if walk(et, at+"["+strconv.Itoa(i)+"]") {
					return true
				}
			}
		}
		_, _ = dec.Token() // the closing delimiter
		return false
	}
	if !walk(t, "") {
		return "", "", 0, false
	}
	// The key's opening quote is the first '"' at or after the offset
	// before it (whitespace and a ',' may come first).
	rest := data[off:]
	if i := bytes.IndexByte(rest, '"'); i >= 0 {
		off += int64(i)
	}
	return path, key, 1 + bytes.Count(data[:off], []byte("\n")), true
}

// joinPath appends the object key k to path.
func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// jsonField returns the field of struct type t that the JSON key k decodes
// into (encoding/json's rule: the tag's name, else the field's name,
// case-insensitively; "-" and unexported fields never).
func jsonField(t reflect.Type, k string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, k) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
