package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// An empty Temp or Protected list means "none" and must survive the JSON
// and YAML round trips a daemon record and a policy file go through; an
// absent one means the default.
func TestSpecRoundTripKeepsEmptyLists(t *testing.T) {
	empty := Spec{Primary: "/p", Temp: []string{}, Protected: []string{}}
	b, err := json.Marshal(empty)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(b, &back))
	require.NotNil(t, back.Temp, "json: %s", b)
	require.NotNil(t, back.Protected, "json: %s", b)
	require.Empty(t, back.Temp)

	y, err := yaml.Marshal(empty)
	require.NoError(t, err)
	back = Spec{}
	require.NoError(t, yaml.Unmarshal(y, &back))
	require.NotNil(t, back.Temp, "yaml: %s", y)
	require.NotNil(t, back.Protected, "yaml: %s", y)

	var absent Spec
	require.NoError(t, json.Unmarshal([]byte(`{"primary":"/p"}`), &absent))
	require.Nil(t, absent.Temp)
	require.Nil(t, absent.Protected)
}
