package confine

import (
	"fmt"
	"slices"
	"strings"
)

// PassedEnv are the names of the caller's environment variables a jail
// gets by default (wsfs exec --confine; issue 20 item 12): what a shell, a
// terminal program and locale-aware tools need, nothing that may carry a
// credential (tokens, cloud keys, SSH_AUTH_SOCK, proxies with passwords).
// Every LC_* name passes too. The exec command sets WSFS_SESSION,
// WSFS_ROOT, PWD and TMPDIR itself; anything else is added by name with
// JailEnv's extra (`--env NAME` or `--env NAME=VALUE`).
var PassedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM",
	"LANG", "LANGUAGE", "TZ",
}

// JailSetEnv are the variables the exec command sets in every jail itself
// (the session's ID, its root, the jail's working directory and the
// session's private temp directory): JailEnv refuses an extra entry that
// names one, since the jail's own value would replace it.
var JailSetEnv = []string{"WSFS_SESSION", "WSFS_ROOT", "PWD", "TMPDIR"}

// JailEnv returns the environment a jail starts with: the entries of
// environ (NAME=VALUE, as os.Environ gives them) whose names are in
// PassedEnv or start with LC_, then each of extra: "NAME" passes environ's
// NAME (nothing when unset), "NAME=VALUE" sets it. A later entry replaces
// an earlier one of the same name. The error names the first extra entry
// whose name is empty, holds a NUL byte or is not a portable name
// (letters, digits, '_', not starting with a digit: POSIX.1-2017 8.1), or
// is one of JailSetEnv.
func JailEnv(environ, extra []string) ([]string, error) {
	var out []string
	set := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		for i, e := range out {
			if n, _, _ := strings.Cut(e, "="); n == name {
				out = append(out[:i], out[i+1:]...)
				break
			}
		}
		out = append(out, kv)
	}
	lookup := map[string]string{}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		lookup[name] = kv
		if strings.HasPrefix(name, "LC_") || slices.Contains(PassedEnv, name) {
			set(kv)
		}
	}
	for _, e := range extra {
		name, _, hasValue := strings.Cut(e, "=")
		if !portableName(name) || strings.ContainsRune(e, 0) {
			return nil, fmt.Errorf("--env %q: want NAME or NAME=VALUE, NAME of letters, digits and '_' not starting with a digit", e)
		}
		if slices.Contains(JailSetEnv, name) {
			return nil, fmt.Errorf("--env %q: the jail sets %s itself; %s cannot be given", e, name, strings.Join(JailSetEnv, ", "))
		}
		if hasValue {
			set(e)
		} else if kv, ok := lookup[name]; ok {
			set(kv)
		}
	}
	return out, nil
}

// portableName reports whether s is a portable environment variable name.
func portableName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
