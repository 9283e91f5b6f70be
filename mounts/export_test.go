package mounts

// SetPolicyCompileHook sets the hook changePolicy calls while it compiles
// a session's policy (the session's lock not held), for tests; the
// returned function removes it. Set it before the manager serves requests.
func SetPolicyCompileHook(f func(id string)) (restore func()) {
	policyCompileHook = f
	return func() { policyCompileHook = nil }
}
