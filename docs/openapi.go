// Package docs holds the documents the wsfs binary serves: the OpenAPI 3.1
// description of the daemon's API (openapi.yaml, served as JSON at
// GET /v1/openapi.json).
package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// OpenAPIYAML is docs/openapi.yaml as committed.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// OpenAPIJSON returns the OpenAPI document as JSON (the same value as the
// YAML; mapping keys must be strings, as OpenAPI requires).
func OpenAPIJSON() ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(OpenAPIYAML, &v); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	return json.Marshal(v)
}

// jsonable converts yaml.v3's decoded maps to map[string]any, refusing a
// key that is not a string (a YAML 200: is an int; OpenAPI writes "200").
func jsonable(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c, err := jsonable(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			v[k] = c
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string (quote it)", k)
			}
			c, err := jsonable(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s, err)
			}
			out[s] = c
		}
		return out, nil
	case []any:
		for i, e := range v {
			c, err := jsonable(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			v[i] = c
		}
		return v, nil
	}
	return v, nil
}
