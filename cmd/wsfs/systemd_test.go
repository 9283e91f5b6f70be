package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitFile reads a systemd unit as key → values (a key may repeat).
func unitFile(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not key=value: %q", path, line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestSystemdUnit checks hack/systemd/wsfs.service: its ExecStart is a valid
// `wsfs serve` command line whose state directory and socket are the
// directories systemd makes (StateDirectory, RuntimeDirectory, kept over a
// stop); it uses no option that would give the daemon a mount namespace of
// its own (its mounts would then not reach the host); and, where
// systemd-analyze exists, `systemd-analyze verify` accepts it.
func TestSystemdUnit(t *testing.T) {
	const path = "../../hack/systemd/wsfs.service"
	u := unitFile(t, path)
	one := func(k string) string {
		t.Helper()
		if len(u[k]) != 1 {
			t.Fatalf("%s: %s set %d times, want once", path, k, len(u[k]))
		}
		return u[k][0]
	}
	argv := strings.Fields(one("ExecStart"))
	if len(argv) < 2 || argv[0] != "/usr/local/bin/wsfs" || argv[1] != "serve" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/wsfs serve ... (what make install installs)", argv)
	}
	cmd := newServeCmd()
	if err := cmd.ParseFlags(argv[2:]); err != nil {
		t.Fatalf("ExecStart flags %q: %v", argv[2:], err)
	}
	get := func(name string) string { v, _ := cmd.Flags().GetString(name); return v }
	if one("StateDirectory") != "wsfs" || get("state-dir") != "/var/lib/wsfs" {
		t.Errorf("StateDirectory %q, --state-dir %q: want wsfs and /var/lib/wsfs", one("StateDirectory"), get("state-dir"))
	}
	if one("RuntimeDirectory") != "wsfs" || filepath.Dir(get("socket")) != "/run/wsfs" || !strings.HasPrefix(get("mount-base"), "/run/wsfs/") {
		t.Errorf("RuntimeDirectory %q, --socket %q, --mount-base %q: want wsfs and both under /run/wsfs", one("RuntimeDirectory"), get("socket"), get("mount-base"))
	}
	if one("RuntimeDirectoryPreserve") != "yes" {
		t.Errorf("RuntimeDirectoryPreserve %q: the mount base is in /run/wsfs; systemd must not remove it at stop", one("RuntimeDirectoryPreserve"))
	}
	for _, k := range []string{"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
		"ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths",
		"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectProc",
		"ProcSubset", "PrivateUsers", "MountFlags", "RootDirectory", "RootImage"} {
		if _, ok := u[k]; ok {
			t.Errorf("%s is set: it gives the service its own mount namespace, and the sessions' mounts would not reach the host", k)
		}
	}
	for _, k := range []string{"NoNewPrivileges", "CapabilityBoundingSet", "DeviceAllow", "RestrictAddressFamilies", "SystemCallFilter"} {
		if len(u[k]) == 0 {
			t.Errorf("%s is not set: the unit is meant to be hardened", k)
		}
	}
	if !strings.Contains(one("CapabilityBoundingSet"), "CAP_SYS_ADMIN") || one("DeviceAllow") != "/dev/fuse rw" {
		t.Errorf("the daemon needs CAP_SYS_ADMIN and /dev/fuse: CapabilityBoundingSet %q, DeviceAllow %q", one("CapabilityBoundingSet"), one("DeviceAllow"))
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: verify skipped")
		return
	}
	// verify wants ExecStart's binary to exist: point it at this test binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "wsfs.service")
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/wsfs", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", tmp).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
