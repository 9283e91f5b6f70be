package fusefs_test

// Acceptance 6: Mount refuses bad input, and after each refusal no mount,
// no new directory and no process is left behind.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsfs/wsfs/fusefs"
)

// dirListing lists every path under dir (for "no new directory" checks).
func dirListing(t *testing.T, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestMountRefusals(t *testing.T) {
	type tc struct {
		name  string
		setup func(t *testing.T, top string) fusefs.Config
	}
	pol := func(t *testing.T, primary string) fusefs.Config {
		// the policy is valid on its own; only the mount's input is bad
		return fusefs.Config{Policy: compileT(t, specFor(t, canonT(t, primary)))}
	}
	cases := []tc{
		{"missing root", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/mnt", 0o755)
			mkdirT(t, top+"/policyroot", 0o755)
			c := pol(t, top+"/policyroot")
			c.Root, c.Mountpoint = top+"/nonexistent", top+"/mnt"
			return c
		}},
		{"root is a file", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/mnt", 0o755)
			writeFileT(t, top+"/file", "x", 0o644)
			mkdirT(t, top+"/policyroot", 0o755)
			c := pol(t, top+"/policyroot")
			c.Root, c.Mountpoint = top+"/file", top+"/mnt"
			return c
		}},
		{"mountpoint inside root", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root/mnt", 0o755)
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint = top+"/root", top+"/root/mnt"
			return c
		}},
		{"mountpoint equals root", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root", 0o755)
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint = top+"/root", top+"/root"
			c.NonEmpty = true
			return c
		}},
		{"mountpoint inside root via a symlink spelling", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root/deep/mnt", 0o755)
			symlinkT(t, top+"/root/deep", top+"/alias")
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint = top+"/root", top+"/alias/mnt"
			return c
		}},
		{"root inside mountpoint", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/mnt/root", 0o755)
			c := pol(t, top+"/mnt/root")
			c.Root, c.Mountpoint = top+"/mnt/root", top+"/mnt"
			c.NonEmpty = true // so only the containment rule can refuse it
			return c
		}},
		{"non-empty mountpoint without NonEmpty", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root", 0o755)
			mkdirT(t, top+"/mnt", 0o755)
			writeFileT(t, top+"/mnt/existing", "x", 0o644)
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint = top+"/root", top+"/mnt"
			return c
		}},
		{"missing mountpoint", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root", 0o755)
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint = top+"/root", top+"/nomnt"
			return c
		}},
		{"nil policy", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root", 0o755)
			mkdirT(t, top+"/mnt", 0o755)
			return fusefs.Config{Root: top + "/root", Mountpoint: top + "/mnt"}
		}},
		{"unknown symlink mode", func(t *testing.T, top string) fusefs.Config {
			mkdirT(t, top+"/root", 0o755)
			mkdirT(t, top+"/mnt", 0o755)
			c := pol(t, top+"/root")
			c.Root, c.Mountpoint, c.Symlinks = top+"/root", top+"/mnt", "bogus"
			return c
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := canonT(t, t.TempDir())
			cfg := c.setup(t, top)
			before := dirListing(t, top)
			srv, err := fusefs.Mount(cfg)
			if err == nil {
				t.Errorf("Mount(root=%s, mnt=%s): want an error, got a mount", cfg.Root, cfg.Mountpoint)
				srv.Unmount(true)
			} else {
				msg := err.Error()
				t.Logf("refusal: %s", msg)
				if strings.Contains(msg, "\n") {
					t.Errorf("error is not one line: %q", msg)
				}
			}
			if m := mountsUnder(top); len(m) > 0 {
				t.Errorf("mounts left after a refused Mount: %v", m)
				for _, mp := range m {
					unmountLazy(mp)
				}
			}
			if after := dirListing(t, top); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Errorf("refused Mount changed the tree under %s:\n  before %v\n  after  %v", top, before, after)
			}
		})
	}

	t.Run("non-empty mountpoint with NonEmpty mounts", func(t *testing.T) {
		top := canonT(t, t.TempDir())
		mkdirT(t, top+"/root", 0o755)
		writeFileT(t, top+"/root/served", "served", 0o644)
		mkdirT(t, top+"/mnt", 0o755)
		writeFileT(t, top+"/mnt/hidden", "x", 0o644)
		cfg := pol(t, top+"/root")
		cfg.Root, cfg.Mountpoint, cfg.NonEmpty = top+"/root", top+"/mnt", true
		mountCfgT(t, cfg)
		if got := names(t, top+"/mnt"); strings.Join(got, ",") != "served" {
			t.Errorf("NonEmpty mount lists %v, want [served]", got)
		}
	})

	t.Run("root spelled through a symlink serves the physical root", func(t *testing.T) {
		top := canonT(t, t.TempDir())
		mkdirT(t, top+"/real/sub", 0o755)
		writeFileT(t, top+"/real/f", "physical", 0o644)
		symlinkT(t, top+"/real/sub", top+"/link")
		mkdirT(t, top+"/mnt", 0o755)
		cfg := pol(t, top+"/real")
		cfg.Root, cfg.Mountpoint = top+"/link/..", top+"/mnt" // the kernel's link/.. is /real
		srv := mountCfgT(t, cfg)
		if got := srv.Root(); got != top+"/real" {
			t.Errorf("Root() = %q, want the physical %q", got, top+"/real")
		}
		if got := names(t, top+"/mnt"); strings.Join(got, ",") != "f,sub" {
			t.Errorf("mount of link/.. lists %v, want [f sub]", got)
		}
	})
}

// unmountLazy detaches a mount the test just saw left behind.
func unmountLazy(mp string) { syscall.Unmount(mp, syscall.MNT_DETACH) }
