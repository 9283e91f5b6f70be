package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
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
		return Spec{}, fmt.Errorf("policy: %v", oneLine(err))
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
// and empty input. Errors are one line, prefixed "policy: json:".
func ParseJSON(data []byte) (Spec, error) {
	var s Spec
	if len(bytes.TrimSpace(data)) == 0 {
		return Spec{}, errors.New("policy: json: empty policy")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("policy: json: %s", strings.TrimPrefix(oneLine(err), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, errors.New("policy: json: trailing data after the policy object")
	}
	return s, nil
}

// ParseYAML decodes a Spec from YAML (one document), refusing unknown fields,
// further documents and empty input. Errors are one line, prefixed
// "policy: yaml:".
func ParseYAML(data []byte) (Spec, error) {
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if err == io.EOF {
			return Spec{}, errors.New("policy: yaml: empty policy")
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return Spec{}, fmt.Errorf("policy: yaml: %s", strings.Join(te.Errors, "; "))
		}
		return Spec{}, fmt.Errorf("policy: yaml: %s", strings.TrimPrefix(oneLine(err), "yaml: "))
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return Spec{}, errors.New("policy: yaml: more than one document")
	}
	return s, nil
}
