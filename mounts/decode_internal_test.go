package mounts

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsfs/wsfs/mounts/api"
)

// BenchmarkDecodePatchOverLimits: decoding a policy PATCH body of 100,000
// protected subpaths (about 1 MB, within MaxBodyBytes), the first step of
// its 400 (issue 20 item 8).
func BenchmarkDecodePatchOverLimits(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"protected":[`)
	for i := 0; i < 100000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"p%d"`, i)
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		var p api.PolicyPatch
		if err := decodeBody(httptest.NewRequest("PATCH", "/v1/sessions/s/policy", bytes.NewReader(body)), &p); err != nil {
			b.Fatal(err)
		}
	}
}
