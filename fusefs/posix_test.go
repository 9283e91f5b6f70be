package fusefs_test

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
	"github.com/wsfs/wsfs/fusefs"
)

// posixKernelSkips lists posixtest entries that cannot pass on this kernel,
// each with the kernel's reason. Empty: every entry must pass (posixtest's
// own t.Skip calls name their reason themselves).
var posixKernelSkips = map[string]string{}

// posixFollowMode lists posixtest entries whose assumptions contradict the
// default `contain` symlink mode by design (DESIGN.md, "Symlinks"); they run
// against a `follow` mount, where links are shown as stored, as go-fuse's
// loopback shows them. The contain-mode behaviour they touch is asserted in
// acceptance_policy_test.go instead.
var posixFollowMode = map[string]string{
	// readlink of the dangling escaping link /foobar gives, in contain
	// mode, the host view's path of /foobar (TestPresentLinkAgreesWithMount,
	// TestPolicyEscapingSymlinks assert that text).
	"SymlinkReadlink": "reads back /foobar; contain mode shows the host view's path of /foobar",
}

// TestPosix runs every entry of go-fuse's posixtest.All against a fresh wsfs
// mount (acceptance 1).
func TestPosix(t *testing.T) {
	if testing.Short() {
		t.Skip("suite test: skipped with -short")
	}
	var all []string
	for nm := range posixtest.All {
		all = append(all, nm)
	}
	sort.Strings(all)
	for _, nm := range all {
		fn := posixtest.All[nm]
		t.Run(nm, func(t *testing.T) {
			if why, ok := posixKernelSkips[nm]; ok {
				t.Skip(why)
			}
			var opts []mountOpt
			if why, ok := posixFollowMode[nm]; ok {
				t.Logf("run with --symlinks follow: %s", why)
				opts = append(opts, withSymlinks(fusefs.SymlinksFollow))
			}
			_, mnt, _ := mountT(t, opts...)
			fn(t, mnt)
		})
	}
}
