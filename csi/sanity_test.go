package csi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// standInController is the Controller csi-sanity's Node specs need for
// their volumes: CreateVolume answers the request's parameters as the
// volume's volume_context, as kubelet hands an inline volume's attributes
// to NodePublishVolume, and a volume id of kubelet's ephemeral shape ("csi-"
// and 64 hex digits). It is not the plugin under test (which has no
// Controller): the sanity specs of the Controller service are skipped.
type standInController struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
}

func (standInController) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "stand-in.controller.test", VendorVersion: "0"}, nil
}

func (standInController) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (standInController) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (standInController) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

func (standInController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	sum := sha256.Sum256([]byte(req.GetName()))
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      "csi-" + hex.EncodeToString(sum[:]),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: req.GetParameters(),
	}}, nil
}

func (standInController) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

// csi-sanity v5.6.0 against the plugin (a `wsfs csi` child on a Unix
// socket), its Node specs' volumes made by the stand-in Controller. The
// specs of the Controller and GroupController services are skipped (the
// plugin has none; they would test the stand-in). The summary and every
// skipped spec with its reason are logged.
func TestSanity(t *testing.T) {
	e := newEnv(t)
	root := mkProject(t, e, "sanity")
	p := e.start(t)

	ctrlSock := filepath.Join(e.dir, "controller.sock")
	l, err := net.Listen("unix", ctrlSock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	csi.RegisterIdentityServer(gs, standInController{})
	csi.RegisterControllerServer(gs, standInController{})
	go gs.Serve(l)
	t.Cleanup(gs.Stop)

	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + e.sock
	cfg.ControllerAddress = "unix://" + ctrlSock
	cfg.TargetPath = filepath.Join(e.pods, "csi-mount")
	cfg.StagingPath = filepath.Join(e.pods, "csi-staging")
	cfg.TestVolumeParameters = podAttrs(root, "sanity")

	var report types.Report
	ginkgo.ReportAfterSuite("wsfs", func(r ginkgo.Report) { report = r })
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, rep := ginkgo.GinkgoConfiguration()
	suite.SkipStrings = []string{`\[Controller Server\]`, `\[GroupController `}
	rep.Succinct, rep.NoColor = true, true
	ok := ginkgo.RunSpecs(t, "wsfs CSI sanity", suite, rep)
	sc.Finalize()

	counts := map[string]int{}
	var skipped []string
	for _, s := range report.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		counts[s.State.String()]++
		if s.State == types.SpecStatePassed {
			t.Logf("passed: %s", strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " / "))
		}
		if s.State == types.SpecStatePending {
			skipped = append(skipped, strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " / ")+": pending (marked PIt in csi-sanity itself)")
		}
		if s.State == types.SpecStateSkipped {
			why := s.Failure.Message
			if why == "" {
				why = "Controller/GroupController service spec (the plugin has no Controller; SkipStrings)"
			}
			skipped = append(skipped, strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " / ")+": "+why)
		}
	}
	sort.Strings(skipped)
	t.Logf("csi-sanity summary: %v", counts)
	for _, s := range skipped {
		t.Logf("skipped: %s", s)
	}
	if !ok || counts["passed"] == 0 {
		t.Fatalf("csi-sanity failed (%v)\nplugin log:\n%s", counts, p.logText())
	}
}
