package csi_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	wcsi "github.com/wsfs/wsfs/csi"
)

// manifestsDir holds the Kubernetes manifests.
const manifestsDir = "../deploy/kubernetes"

// loadManifests parses every document of every YAML file in manifestsDir
// strictly into its k8s.io/api type (an unknown or duplicate field fails),
// by kind.
func loadManifests(t *testing.T) map[string][]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestsDir, err)
	}
	out := map[string][]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "v1 Pod":
				obj = &corev1.Pod{}
			case "apps/v1 DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "storage.k8s.io/v1 CSIDriver":
				obj = &storagev1.CSIDriver{}
			default:
				t.Fatalf("%s document %d: unexpected %s %s", f, i, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", f, i, head.Kind, err)
			}
			out[head.Kind] = append(out[head.Kind], obj)
		}
	}
	return out
}

// The manifests parse strictly into k8s.io/api types (a typo fails), and
// say what the plugin needs: an ephemeral-only CSIDriver with pod info, a
// privileged DaemonSet with /dev/fuse, Bidirectional propagation into
// kubelet's pods directory, the registration sidecar on the plugin's
// socket, and an example Pod whose inline volume uses only known
// attributes.
func TestManifests(t *testing.T) {
	m := loadManifests(t)
	if len(m["CSIDriver"]) != 1 || len(m["DaemonSet"]) != 1 || len(m["Pod"]) != 1 {
		t.Fatalf("want one CSIDriver, DaemonSet and Pod; got %d, %d, %d", len(m["CSIDriver"]), len(m["DaemonSet"]), len(m["Pod"]))
	}

	drv := m["CSIDriver"][0].(*storagev1.CSIDriver)
	if drv.Name != wcsi.DefaultDriverName {
		t.Errorf("CSIDriver name %q, want %q", drv.Name, wcsi.DefaultDriverName)
	}
	if !slices.Equal(drv.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}) {
		t.Errorf("volumeLifecycleModes %v, want [Ephemeral]", drv.Spec.VolumeLifecycleModes)
	}
	if drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired || drv.Spec.PodInfoOnMount == nil || !*drv.Spec.PodInfoOnMount {
		t.Errorf("want attachRequired false and podInfoOnMount true")
	}

	ds := m["DaemonSet"][0].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	var plugin, registrar *corev1.Container
	for i, c := range spec.Containers {
		switch {
		case slices.Contains(c.Args, "csi"):
			plugin = &spec.Containers[i]
		case strings.Contains(c.Image, "csi-node-driver-registrar"):
			registrar = &spec.Containers[i]
		}
	}
	if plugin == nil || registrar == nil {
		t.Fatalf("DaemonSet: want the wsfs csi container and node-driver-registrar")
	}
	if plugin.SecurityContext == nil || plugin.SecurityContext.Privileged == nil || !*plugin.SecurityContext.Privileged {
		t.Errorf("the plugin container must be privileged (mount(2), /dev/fuse)")
	}
	mounted := map[string]corev1.VolumeMount{}
	for _, vm := range plugin.VolumeMounts {
		mounted[hostPaths[vm.Name]] = vm
	}
	if vm, ok := mounted["/dev/fuse"]; !ok || vm.MountPath != "/dev/fuse" {
		t.Errorf("the plugin container lacks /dev/fuse")
	}
	if vm, ok := mounted["/var/lib/kubelet/pods"]; !ok || vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional || vm.MountPath != "/var/lib/kubelet/pods" {
		t.Errorf("the plugin container must mount /var/lib/kubelet/pods at the same path with Bidirectional propagation")
	}
	flags := map[string]string{}
	for _, a := range plugin.Args {
		if k, v, ok := strings.Cut(a, "="); ok {
			flags[k] = v
		}
	}
	for _, f := range []string{"--endpoint", "--node-id", "--state-dir", "--mount-base", "--allowed-roots"} {
		if flags[f] == "" {
			t.Errorf("the plugin container lacks %s", f)
		}
	}
	sock, err := wcsi.ParseEndpoint(flags["--endpoint"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(registrar.Args, "--csi-address="+sock) ||
		!slices.Contains(registrar.Args, "--kubelet-registration-path=/var/lib/kubelet/plugins/"+drv.Name+"/"+filepath.Base(sock)) {
		t.Errorf("registrar args %v do not match the endpoint %s and driver %s", registrar.Args, sock, drv.Name)
	}

	pod := m["Pod"][0].(*corev1.Pod)
	var found bool
	for _, v := range pod.Spec.Volumes {
		if v.CSI == nil {
			continue
		}
		found = true
		if v.CSI.Driver != drv.Name {
			t.Errorf("example volume driver %q, want %q", v.CSI.Driver, drv.Name)
		}
		known := []string{wcsi.KeyRoot, wcsi.KeyMode, wcsi.KeyAddRoots, wcsi.KeyProtect, wcsi.KeySymlinks, wcsi.KeySession, wcsi.KeyUsers}
		for k := range v.CSI.VolumeAttributes {
			if !slices.Contains(known, k) {
				t.Errorf("example volume attribute %q: unknown to the plugin", k)
			}
		}
		root := v.CSI.VolumeAttributes[wcsi.KeyRoot]
		if !strings.HasPrefix(root, flags["--allowed-roots"]+"/") {
			t.Errorf("example root %q is not under the DaemonSet's --allowed-roots %s", root, flags["--allowed-roots"])
		}
	}
	if !found {
		t.Errorf("the example Pod has no inline csi volume")
	}
}
