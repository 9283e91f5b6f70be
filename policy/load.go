package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadFile reads a Spec from a JSON or YAML file, using the Spec field names
// (mode, primary, additional[].path, additional[].access, temp, protected).
// A ".json" name is JSON, ".yaml" or ".yml" is YAML; any other name is JSON
// when its first non-blank byte is '{', else YAML. Unknown fields, trailing
// data and an empty file are errors, each one line prefixed "policy: <path>:".
// LoadFile does not compile the spec: pass it to Compile.
func LoadFile(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once, as for every other error
		}
		return Spec{}, fmt.Errorf("policy: %s: %s", path, oneLine(err))
	}
	var s Spec
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case ext == ".json":
		s, err = ParseJSON(data)
	case ext == ".yaml" || ext == ".yml":
		s, err = ParseYAML(data)
	case bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")):
		s, err = ParseJSON(data)
	default:
		s, err = ParseYAML(data)
	}
	if err != nil {
		return Spec{}, fmt.Errorf("policy: %s: %s", path, strings.TrimPrefix(err.Error(), "policy: "))
	}
	return s, nil
}

// ParseJSON decodes a Spec from JSON, refusing unknown fields, trailing data
// and empty input. Errors are one line, prefixed "policy: json:", and name
// the field and the JSON types, not Go's ("primary: want a string, got a
// number").
func ParseJSON(data []byte) (Spec, error) {
	var s Spec
	if len(bytes.TrimSpace(data)) == 0 {
		return Spec{}, errors.New("policy: json: empty policy")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			where := te.Field
			if where == "" {
				where = "the policy"
			}
			return Spec{}, fmt.Errorf("policy: json: %s: want %s, got %s", where, userType(te.Type), article(te.Value))
		}
		if path, key, line, ok := UnknownJSONField(data, reflect.TypeOf(s)); ok {
			in := ""
			if path != "" {
				in = " in " + path
			}
			return Spec{}, fmt.Errorf("policy: json: line %d: unknown field %q%s", line, key, in)
		}
		return Spec{}, fmt.Errorf("policy: json: %s", strings.TrimPrefix(oneLine(err), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, errors.New("policy: json: trailing data after the policy object")
	}
	return s, nil
}

// ParseYAML decodes a Spec from YAML (one document), refusing unknown fields,
// further documents and empty input. Errors are one line, prefixed
// "policy: yaml:", and name the line, the field and the YAML kinds, not Go's
// types ("line 2: unknown field \"moed\"", "line 3: temp: want a list, got
// a string").
func ParseYAML(data []byte) (Spec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return Spec{}, errors.New("policy: yaml: empty policy")
		}
		return Spec{}, fmt.Errorf("policy: yaml: %s", strings.TrimPrefix(oneLine(err), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return Spec{}, errors.New("policy: yaml: more than one document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return Spec{}, errors.New("policy: yaml: empty policy")
	}
	var problems []string
	checkYAML(root, reflect.TypeOf(Spec{}), "", &problems)
	if len(problems) > 0 {
		return Spec{}, fmt.Errorf("policy: yaml: %s", strings.Join(problems, "; "))
	}
	var s Spec
	if err := root.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("policy: yaml: %s", yamlErrorText(err))
	}
	return s, nil
}

// checkYAML checks node against the Go type t (a Spec, or part of one) the
// way a user reads the file: unknown fields, and a value of the wrong kind
// (a list where one string goes), each as "line N: FIELD: ..." in problems.
// Scalars are left to the decoder, which turns any scalar into a string.
func checkYAML(node *yaml.Node, t reflect.Type, field string, problems *[]string) {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return // an absent value: the zero value
	}
	where := field
	if where == "" {
		where = "the policy"
	}
	want := userKind(t)
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			*problems = append(*problems, fmt.Sprintf("line %d: %s: want %s, got %s", node.Line, where, want, yamlKind(node)))
			return
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i], node.Content[i+1]
			f, ok := yamlField(t, key.Value)
			if !ok {
				in := ""
				if field != "" {
					in = " in " + field
				}
				*problems = append(*problems, fmt.Sprintf("line %d: unknown field %q%s", key.Line, key.Value, in))
				continue
			}
			name := key.Value
			if field != "" {
				name = field + "." + name
			}
			checkYAML(val, f.Type, name, problems)
		}
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			*problems = append(*problems, fmt.Sprintf("line %d: %s: want %s, got %s", node.Line, where, want, yamlKind(node)))
			return
		}
		for i, item := range node.Content {
			checkYAML(item, t.Elem(), fmt.Sprintf("%s[%d]", field, i), problems)
		}
	default:
		if node.Kind != yaml.ScalarNode {
			*problems = append(*problems, fmt.Sprintf("line %d: %s: want %s, got %s", node.Line, where, want, yamlKind(node)))
		}
	}
}

// yamlField returns the field of struct type t whose yaml tag names key.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// userKind names what a value of Go type t is written as in a policy file.
func userKind(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(Spec{}):
		return "a policy (a mapping of mode, primary, additional, temp, protected)"
	case t == reflect.TypeOf(Root{}):
		return "a root (a mapping of path and access)"
	case t.Kind() == reflect.Slice && t.Elem() == reflect.TypeOf(Root{}):
		return "a list of roots"
	case t.Kind() == reflect.Slice:
		return "a list of strings"
	case t.Kind() == reflect.Struct:
		return "a mapping"
	}
	return "a string"
}

// userType is userKind for the Go type json.UnmarshalTypeError reports.
func userType(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	return userKind(t)
}

// yamlKind names the kind of a YAML node as a user reads it.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	}
	return "a string"
}

// article puts "a" or "an" before a JSON value kind ("number", "array",
// "object", "string", "bool"), naming them as the user wrote them.
func article(kind string) string {
	switch kind {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "bool":
		return "true or false"
	}
	if kind == "" {
		return "another kind of value"
	}
	return "a " + kind
}

// yamlErrorText is a yaml.v3 decoding error on one line: its "unmarshal
// errors:" list (one "line N: ..." per line) joined with "; " ("line 2:
// mapping key \"mode\" already defined at line 1").
func yamlErrorText(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:")
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
