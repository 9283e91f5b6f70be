package confine

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestJailEnv: only the allow-listed names and LC_* pass; --env adds by
// name (the caller's value, nothing when unset) or with a value, later
// entries winning; bad names, and the names the jail sets itself
// (JailSetEnv), are refused naming the entry.
func TestJailEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=k", "GITHUB_TOKEN=t", "LC_ALL=C", "SSH_AUTH_SOCK=/s", "GOFLAGS=-mod=mod", "TERM=xterm", "odd"}
	got, err := JailEnv(environ, []string{"GOFLAGS", "MISSING", "FOO=a=b", "TERM=dumb"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "GOFLAGS=-mod=mod", "FOO=a=b", "TERM=dumb"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JailEnv = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "=x", "1A", "A-B", "A B=c", "A\x00"} {
		if _, err := JailEnv(nil, []string{bad}); err == nil || err.Error() != fmt.Sprintf("--env %q: want NAME or NAME=VALUE, NAME of letters, digits and '_' not starting with a digit", bad) {
			t.Errorf("JailEnv(--env %q) error = %v", bad, err)
		}
	}
	for _, own := range []string{"TMPDIR=/x", "TMPDIR", "WSFS_SESSION=s", "WSFS_ROOT=/r", "PWD"} {
		name, _, _ := strings.Cut(own, "=")
		want := fmt.Sprintf("--env %q: the jail sets %s itself; WSFS_SESSION, WSFS_ROOT, PWD, TMPDIR cannot be given", own, name)
		if _, err := JailEnv([]string{"TMPDIR=/t", "PWD=/p"}, []string{own}); err == nil || err.Error() != want {
			t.Errorf("JailEnv(--env %q) error = %v, want %q", own, err, want)
		}
	}
}
