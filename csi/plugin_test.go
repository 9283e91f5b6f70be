package csi_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	wcsi "github.com/wsfs/wsfs/csi"
)

// mkProject makes a project under the allowed root: a file, a .git with
// hooks (protected by default), a link that escapes to the outside
// directory (which holds secret.txt), and a link to the allowed root's
// "shared" directory (which holds shared.txt).
func mkProject(t testing.TB, e *env, name string) string {
	t.Helper()
	root := filepath.Join(e.allowed, name)
	for _, d := range []string{root, filepath.Join(root, ".git", "hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.outside, "secret.txt"), []byte("s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(root, "escape")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	shared := filepath.Join(e.allowed, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "shared.txt"), []byte("sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shared, filepath.Join(root, "shared")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	return root
}

// A volume published at a target serves the project: a write lands in the
// root; a protected path gives EACCES; escaping links never reach the node
// (checkEscapes). Denials are logged with the pod's identity. Unpublish leaves no mount, no session record and no target
// directory.
func TestPublishWriteDenyUnpublish(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	p := e.start(t)
	target := filepath.Join(e.pods, "uid-1", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	vid := "csi-" + strings.Repeat("ab", 32) // kubelet's ephemeral id shape, 68 chars
	attrs := podAttrs(root, "agent-1")
	attrs["addRoots"] = filepath.Join(e.allowed, "shared") + "=ro"
	if err := p.publish(vid, target, false, attrs); err != nil {
		t.Fatalf("publish: %v\n%s", err, p.logText())
	}
	sid := wcsi.SessionID(vid)

	if got, err := os.ReadFile(filepath.Join(target, "a.txt")); err != nil || string(got) != "a\n" {
		t.Fatalf("read through the target: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(target, "new.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatalf("write through the target: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "new.txt")); err != nil || string(got) != "hello\n" {
		t.Fatalf("the write did not land in the root: %q, %v", got, err)
	}
	err := os.WriteFile(filepath.Join(target, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	if errnoOf(err) != syscall.EACCES {
		t.Fatalf("write to .git/hooks: %v, want EACCES", err)
	}
	checkEscapes(t, e, target)

	// The record carries the pod identity; the denial log lines name it.
	data, err := os.ReadFile(filepath.Join(e.state, "sessions", sid+".json"))
	if err != nil {
		t.Fatalf("session record: %v", err)
	}
	var rec struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"csi.storage.k8s.io/pod.name": "agent-1", "csi.storage.k8s.io/pod.namespace": "agents",
		"csi.storage.k8s.io/pod.uid": "uid-agent-1", "csi.storage.k8s.io/ephemeral": "true",
		wcsi.LabelVolume: vid, wcsi.LabelTarget: target,
	} {
		if rec.Labels[k] != want {
			t.Errorf("record label %s = %q, want %q", k, rec.Labels[k], want)
		}
	}
	denials := p.waitLogLines(1, "msg=denied")
	t.Logf("denials:\n%s", strings.Join(denials, "\n"))
	for _, line := range denials {
		for _, want := range []string{"csi.storage.k8s.io/pod.name=agent-1", "csi.storage.k8s.io/pod.namespace=agents", "csi.storage.k8s.io/pod.uid=uid-agent-1", "session=" + sid} {
			if !strings.Contains(line, want) {
				t.Errorf("denial line lacks %s: %s", want, line)
			}
		}
	}

	// Published again with the same attributes: OK, nothing new.
	if err := p.publish(vid, target, false, attrs); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	wantCode(t, "publish at a second target", p.publish(vid, target+"2", false, attrs), codes.FailedPrecondition)
	wantCode(t, "publish read-only after read-write", p.publish(vid, target, true, attrs), codes.AlreadyExists)
	other := podAttrs(root, "agent-1")
	wantCode(t, "publish with other attributes", p.publish(vid, target, false, other), codes.AlreadyExists)
	if _, err := os.Stat(target + "2"); !os.IsNotExist(err) {
		t.Fatalf("refused second target was made: %v", err)
	}

	for i := range 2 { // idempotent
		if err := p.unpublish(vid, target); err != nil {
			t.Fatalf("unpublish #%d: %v\n%s", i+1, err, p.logText())
		}
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left after unpublish: %v", left)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target left after unpublish: %v", err)
	}
	if got := entries(t, filepath.Join(e.state, "sessions")); len(got) != 0 {
		t.Fatalf("session files left after unpublish: %v", got)
	}
	if got := mountpointsLeft(t, e); len(got) != 0 {
		t.Fatalf("mountpoints left after unpublish: %v", got)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "new.txt")); string(got) != "hello\n" {
		t.Fatalf("project data after unpublish: %q", got)
	}
}

// A read-only publish serves a read-only bind: writes fail with EROFS from
// the kernel, reads work.
func TestPublishReadOnly(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	p := e.start(t)
	target := filepath.Join(e.pods, "mount-ro")
	if err := p.publish("vol-ro", target, true, podAttrs(root, "ro")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(target, "a.txt")); err != nil || string(got) != "a\n" {
		t.Fatalf("read: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(target, "n"), nil, 0o644); errnoOf(err) != syscall.EROFS {
		t.Fatalf("write to a read-only publish: %v, want EROFS", err)
	}
	if err := p.unpublish("vol-ro", target); err != nil {
		t.Fatal(err)
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}

// Roots outside --allowed-roots are refused InvalidArgument, however they
// are spelled (.. tricks, symlinks out, additional roots, full-access), and
// a refusal leaves nothing: no target, no record, no mount, no mountpoint.
func TestPublishRefusesOutsideAllowedRoots(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	if err := os.Symlink(e.outside, filepath.Join(e.allowed, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(e.allowed, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := e.start(t)
	target := filepath.Join(e.pods, "mount")
	cases := map[string]map[string]string{
		"outside":             {"root": e.outside},
		"dotdot":              {"root": e.allowed + "/sub/../../outside"},
		"symlink out":         {"root": e.allowed + "/link-out"},
		"through symlink":     {"root": e.allowed + "/link-out/."},
		"allowed parent":      {"root": e.dir},
		"relative":            {"root": "allowed/proj"},
		"missing root":        {"root": e.allowed + "/nope"},
		"no root":             {},
		"add root outside rw": {"root": root, "addRoots": e.outside + "=rw"},
		"add root outside ro": {"root": root, "addRoots": e.outside + "=ro"},
		"add root via link":   {"root": root, "addRoots": e.allowed + "/link-out=rw"},
		"add root bad access": {"root": root, "addRoots": e.allowed + "/sub=write"},
		"full-access":         {"root": root, "mode": "full-access"},
		"unknown mode":        {"root": root, "mode": "rw"},
		"unknown key":         {"root": root, "rooot": root},
		"bad symlinks":        {"root": root, "symlinks": "chase"},
		"bad session":         {"root": root, "session": "a/b"},
		"state dir":           {"root": e.state},
	}
	for name, vc := range cases {
		err := p.publish("vol-"+strings.ReplaceAll(name, " ", "-"), target, false, vc)
		wantCode(t, name, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), "volume attribute") {
			t.Errorf("%s: the message does not name the attribute: %v", name, err)
		}
	}
	// Bad requests.
	ctx := context.Background()
	for name, req := range map[string]*csi.NodePublishVolumeRequest{
		"no volume id":  {TargetPath: target, VolumeCapability: volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: map[string]string{"root": root}},
		"no target":     {VolumeId: "v", VolumeCapability: volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: map[string]string{"root": root}},
		"no capability": {VolumeId: "v", TargetPath: target, VolumeContext: map[string]string{"root": root}},
		"block": {VolumeId: "v", TargetPath: target, VolumeContext: map[string]string{"root": root}, VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
		"target in allowed root": {VolumeId: "v", TargetPath: filepath.Join(root, "t"), VolumeCapability: volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: map[string]string{"root": root}},
		"target in mount base":   {VolumeId: "v", TargetPath: filepath.Join(e.mnt, "t"), VolumeCapability: volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: map[string]string{"root": root}},
	} {
		_, err := p.node.NodePublishVolume(ctx, req)
		wantCode(t, name, err, codes.InvalidArgument)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused publish made the target: %v", err)
	}
	if got := entries(t, filepath.Join(e.state, "sessions")); len(got) != 0 {
		t.Fatalf("a refused publish left session files: %v", got)
	}
	if got := mountpointsLeft(t, e); len(got) != 0 {
		t.Fatalf("a refused publish left mountpoints: %v", got)
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("a refused publish left mounts: %v", left)
	}
	if got := entries(t, root); slices.Contains(got, "t") {
		t.Fatalf("a refused publish made a target in the project")
	}
}

// Identity and node information.
func TestIdentityAndNodeInfo(t *testing.T) {
	e := newEnv(t)
	p := e.start(t)
	ctx := context.Background()
	info, err := p.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != wcsi.DefaultDriverName || info.GetVendorVersion() == "" {
		t.Fatalf("GetPluginInfo: %v, %v", info, err)
	}
	caps, err := p.id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 0 {
		t.Fatalf("GetPluginCapabilities: %v, %v (want none: no Controller service)", caps, err)
	}
	probe, err := p.id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("Probe: %v, %v (want ready)", probe, err)
	}
	ni, err := p.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "node-1" {
		t.Fatalf("NodeGetInfo: %v, %v", ni, err)
	}
	nc, err := p.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil || len(nc.GetCapabilities()) != 1 || nc.GetCapabilities()[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_GET_VOLUME_STATS {
		t.Fatalf("NodeGetCapabilities: %v, %v", nc, err)
	}
	_, err = p.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v"})
	wantCode(t, "NodeStageVolume", err, codes.Unimplemented)
}

// What csi-sanity's "Node Service should be idempotent" checks, which it
// skips for a plugin without a Controller: NodePublishVolume ten times at
// one target, NodeGetVolumeStats, NodeUnpublishVolume ten times, each
// answering OK; stats of an unknown volume or path are NotFound.
func TestIdempotentLifecycle(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "proj")
	p := e.start(t)
	target := filepath.Join(e.pods, "mount")
	vid := "csi-" + strings.Repeat("0f", 32)
	for i := range 10 {
		if err := p.publish(vid, target, false, podAttrs(root, "idem")); err != nil {
			t.Fatalf("publish #%d: %v", i+1, err)
		}
	}
	ctx := context.Background()
	st, err := p.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vid, VolumePath: target})
	if err != nil || len(st.GetUsage()) != 2 || st.GetUsage()[0].GetTotal() <= 0 {
		t.Fatalf("NodeGetVolumeStats: %v, %v", st, err)
	}
	_, err = p.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vid, VolumePath: "/some/path"})
	wantCode(t, "stats at another path", err, codes.NotFound)
	_, err = p.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "nope", VolumePath: target})
	wantCode(t, "stats of an unknown volume", err, codes.NotFound)
	if left := mountsUnder(t, target); len(left) != 1 {
		t.Fatalf("ten publishes stacked %d mounts at the target", len(left))
	}
	for i := range 10 {
		if err := p.unpublish(vid, target); err != nil {
			t.Fatalf("unpublish #%d: %v", i+1, err)
		}
	}
	if left := mountsUnder(t, e.dir); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}

// checkEscapes checks the links of mkProject that leave the root, as the
// mount at target presents them. They are links. With a host view (the
// daemon's <mount-base>/@host/<id>) their text leads into it and the policy
// decides there: EACCES for reads and writes outside every root (a csi
// volume's policy has Outside none), a read and EROFS for a write in the
// read-only additional root. Without a host view their text is the
// physical path, which in a pod names the pod's own file system: a process
// in a mount namespace without the node's directories (tmpfs over them, as
// a container has) reads nothing and writes nothing of the node's there.
func checkEscapes(t *testing.T, e *env, target string) {
	t.Helper()
	shared := filepath.Join(e.allowed, "shared")
	text, err := os.Readlink(filepath.Join(target, "escape"))
	if err != nil {
		t.Fatalf("the escaping link is not presented as a link: %v", err)
	}
	if strings.HasPrefix(text, filepath.Join(e.mnt, "@host")+"/") {
		err = os.WriteFile(filepath.Join(target, "escape", "secret.txt"), []byte("owned\n"), 0o644)
		if errnoOf(err) != syscall.EACCES {
			t.Fatalf("write through the escaping link: %v, want EACCES", err)
		}
		if got, err := os.ReadFile(filepath.Join(target, "escape", "secret.txt")); errnoOf(err) != syscall.EACCES {
			t.Fatalf("read through the escaping link: %q, %v, want EACCES", got, err)
		}
		if got, err := os.ReadFile(filepath.Join(target, "shared", "shared.txt")); err != nil || string(got) != "sh\n" {
			t.Fatalf("read through the link into the read-only root: %q, %v", got, err)
		}
		if err := os.WriteFile(filepath.Join(target, "shared", "shared.txt"), nil, 0o644); errnoOf(err) != syscall.EROFS {
			t.Fatalf("write through the link into the read-only root: %v, want EROFS", err)
		}
	} else {
		if text != e.outside {
			t.Fatalf("escaping link presented as %q, want its physical target %s or a host-view path", text, e.outside)
		}
		t.Logf("no host view: escaping links show their physical path; checking them from a pod-like mount namespace")
		script := `mount -t tmpfs none "$1" && mount -t tmpfs none "$2" || exit 9
cat "$3/escape/secret.txt" "$3/shared/shared.txt" 2>/dev/null && echo read-node-file
echo owned > "$3/escape/secret.txt"; echo owned > "$3/shared/shared.txt"; echo done`
		out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", e.outside, shared, target).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "done" {
			t.Fatalf("pod-like namespace: %v: %s", err, out)
		}
	}
	for file, want := range map[string]string{filepath.Join(e.outside, "secret.txt"): "s\n", filepath.Join(shared, "shared.txt"): "sh\n"} {
		if got, err := os.ReadFile(file); err != nil || string(got) != want {
			t.Fatalf("%s changed: %q, %v", file, got, err)
		}
	}
}
