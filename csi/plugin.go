// Package csi is wsfs's Kubernetes CSI node plugin: the CSI Identity and
// Node services (CSI spec v1.13, github.com/container-storage-interface/spec)
// over the same session manager as `wsfs serve` (package mounts). There is
// no Controller service: volumes are ephemeral inline volumes
// (CSIDriver volumeLifecycleModes [Ephemeral]), one session per volume.
//
// NodePublishVolume checks the volume's attributes (volume.go), creates the
// session with mounts.Manager.Create, and bind-mounts the session's mount at
// target_path; NodeUnpublishVolume unmounts the target and removes the
// session. Both are idempotent. The plugin's whole state is in the session
// records (labels LabelVolume, LabelTarget, ...), so a restarted plugin
// mounts every session again (Manager.Recover) and binds each at its target
// again (Start).
package csi

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/policy"
)

// DefaultDriverName is the CSI driver name (GetPluginInfo, the CSIDriver
// object's name, the csi: volumes' driver field).
const DefaultDriverName = "csi.wsfs.io"

// Config configures a Plugin.
type Config struct {
	// DriverName is the driver's name; empty means DefaultDriverName.
	DriverName string
	// Version is GetPluginInfo's vendor_version.
	Version string
	// NodeID is NodeGetInfo's node_id (the Kubernetes node name). Required.
	NodeID string
	// AllowedRoots are the directories volumes may serve (their root and
	// every additional root must lie under one, physically). At least one;
	// each absolute, an existing directory, not "/", and apart from the
	// Manager's state directory and mount base.
	AllowedRoots []string
	// Manager is the session manager (mounts.New), not yet recovered:
	// Start recovers it.
	Manager *mounts.Manager
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Plugin serves the CSI Identity and Node services. Its methods are safe
// for concurrent use; calls on one volume are serialized.
type Plugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	name, version, nodeID string
	allowed               []string // canonical
	m                     *mounts.Manager
	api                   *mounts.API // for the daemon's metrics
	log                   *slog.Logger
	locks                 [64]sync.Mutex // by volume id hash

	mu   sync.Mutex
	vols map[string]string // volume id → session id

	ready   atomic.Bool
	fuseErr atomic.Pointer[string] // why FUSE does not work; nil when it does
	stats   *opStats
}

// New checks cfg and returns a Plugin; call Start, then Serve.
func New(cfg Config) (*Plugin, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("node id: required")
	}
	if cfg.Manager == nil {
		return nil, errors.New("csi: a session manager is required")
	}
	p := &Plugin{
		name: cfg.DriverName, version: cfg.Version, nodeID: cfg.NodeID,
		m: cfg.Manager, log: cfg.Logger, vols: map[string]string{}, stats: newOpStats(),
	}
	if p.name == "" {
		p.name = DefaultDriverName
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.api = mounts.NewAPI(p.m, p.log)
	roots, err := CanonicalRoots(cfg.AllowedRoots)
	if err != nil {
		return nil, err
	}
	if err := CheckApart(cfg.AllowedRoots, p.m.StateDir(), p.m.MountBase()); err != nil {
		return nil, err
	}
	p.allowed = roots
	why := "not started"
	p.fuseErr.Store(&why)
	return p, nil
}

// CanonicalRoots checks allowed roots and returns their canonical paths:
// at least one; each absolute, an existing directory (followed), not "/".
// Errors name the root and the rule.
func CanonicalRoots(roots []string) ([]string, error) {
	if len(roots) == 0 {
		return nil, errors.New("allowed roots: at least one directory is required")
	}
	var out []string
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("allowed root %q: must be an absolute path", r)
		}
		c, err := identity.Canonical(r)
		if err != nil {
			return nil, fmt.Errorf("allowed root %q: %s", r, identity.ErrnoText(err))
		}
		if ok, err := statDir(c); err != nil || !ok {
			return nil, fmt.Errorf("allowed root %q: not a directory", r)
		}
		if c == "/" {
			return nil, fmt.Errorf("allowed root %q: must not be / (every path would be allowed)", r)
		}
		out = append(out, c)
	}
	return out, nil
}

// CheckApart refuses an allowed root that is, contains or lies inside the
// state directory or the mount base (a volume could then serve the plugin's
// records or its own mounts). The two need not exist yet: they are compared
// by identity.TargetKey, the path they will have.
func CheckApart(roots []string, stateDir, mountBase string) error {
	canon, err := CanonicalRoots(roots)
	if err != nil {
		return err
	}
	for _, place := range [][2]string{{"state directory", stateDir}, {"mount base", mountBase}} {
		d, err := identity.TargetKey(place[1])
		if err != nil {
			return fmt.Errorf("%s %q: %s", place[0], place[1], identity.ErrnoText(err))
		}
		for i, c := range canon {
			if identity.Within(c, d) || identity.Within(d, c) {
				return fmt.Errorf("allowed root %q (physical %s): overlaps the %s %s", roots[i], c, place[0], d)
			}
		}
	}
	return nil
}

// Name returns the driver name.
func (p *Plugin) Name() string { return p.name }

// TargetReport is what Start did for one recorded volume's target.
type TargetReport struct {
	Volume, Session, Target string
	// Restored is true when the target serves the session's mount again.
	Restored bool
	// Detail says what was done or why the target was not restored.
	Detail string
}

// Start recovers the Manager's sessions (re-mounting every recorded one),
// rebuilds the volume index from the session labels, binds every published
// volume at its target again (a dead bind left by a killed plugin is
// detached first), checks that FUSE works, and marks the plugin ready
// (Probe). It returns a report per recorded volume; a volume that could not
// be restored is logged and reported, not fatal.
func (p *Plugin) Start(ctx context.Context) []TargetReport {
	if err := p.m.Recover(ctx); err != nil {
		p.log.Error("csi: recover", "err", err)
	}
	var reports []TargetReport
	for _, s := range p.m.List(ctx) {
		vid := s.Labels[LabelVolume]
		if vid == "" {
			continue
		}
		target := s.Labels[LabelTarget]
		p.mu.Lock()
		p.vols[vid] = s.ID
		p.mu.Unlock()
		r := TargetReport{Volume: vid, Session: s.ID, Target: target}
		switch {
		case s.State != mounts.StateMounted:
			r.Detail = "session not mounted: " + s.Error
		default:
			detail, err := p.ensureBound(s, target, s.Labels[LabelReadOnly] == "true")
			r.Restored, r.Detail = err == nil, detail
			if err != nil {
				r.Detail = err.Error()
			}
		}
		if r.Restored {
			p.log.Info("csi: target restored", "volume", vid, "session", s.ID, "target", target, "detail", r.Detail)
		} else {
			p.log.Error("csi: target not restored", "volume", vid, "session", s.ID, "target", target, "reason", r.Detail)
		}
		reports = append(reports, r)
	}
	if err := p.checkFUSE(); err != nil {
		why := err.Error()
		p.fuseErr.Store(&why)
		p.log.Error("csi: FUSE does not work; not ready", "err", err)
	} else {
		p.fuseErr.Store(nil)
	}
	p.ready.Store(true)
	return reports
}

// ensureBound makes target serve session s's mount: nothing to do when it
// does; a stale wsfs mount there (a killed plugin's) is detached and the
// session bound again. It says what it did.
func (p *Plugin) ensureBound(s mounts.Session, target string, readOnly bool) (string, error) {
	st, e, err := inspectTarget(target, s.Mountpoint)
	if err != nil {
		return "", fmt.Errorf("mount table: %v", err)
	}
	detail := "bound"
	switch st {
	case targetServed:
		return "already served", nil
	case targetForeign:
		return "", fmt.Errorf("target %s holds a %s mount, not this volume's; left alone", target, e.FSType)
	case targetStale:
		if err := unbindTarget(target); err != nil {
			return "", err
		}
		detail = "stale mount detached, bound again (running containers keep the dead mount until they restart)"
	}
	if ok, err := statDir(filepath.Dir(target)); err != nil || !ok {
		return "", fmt.Errorf("target %s: parent directory missing (the pod is gone?)", target)
	}
	if _, err := bindTarget(s.Mountpoint, target, readOnly); err != nil {
		return "", err
	}
	return detail, nil
}

// checkFUSE mounts an empty directory through fusefs and stats the mount
// root: FUSE works when that answers.
func (p *Plugin) checkFUSE() error {
	dir := filepath.Join(p.m.StateDir(), "csi-probe")
	root, mp := filepath.Join(dir, "root"), filepath.Join(dir, "mnt")
	if e, ok := mountEntry(mp); ok && e.FSType == wsfsFSType {
		fusefs.Unmount(mp, true) // a killed plugin's probe
	}
	for _, d := range []string{root, mp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	pol, err := policy.Compile(policy.Spec{Mode: policy.ModeReadOnly, Primary: root, Temp: []string{}})
	if err != nil {
		return err
	}
	srv, err := fusefs.Mount(fusefs.Config{Root: root, Mountpoint: mp, Policy: pol, Logger: p.log, Session: "csi-probe"})
	if err != nil {
		return fmt.Errorf("probe mount: %v", err)
	}
	var st unix.Statfs_t
	serr := unix.Statfs(mp, &st)
	if err := srv.Unmount(false); err != nil {
		p.log.Warn("csi: probe unmount", "err", err)
	}
	if serr == nil && st.Type != unix.FUSE_SUPER_MAGIC {
		serr = fmt.Errorf("probe mount: statfs type %#x, not FUSE", st.Type)
	}
	return serr
}

// mountEntry returns the mount table's entry at mp.
func mountEntry(mp string) (fusefs.MountEntry, bool) {
	table, err := fusefs.MountTable()
	if err != nil {
		return fusefs.MountEntry{}, false
	}
	e, ok := table[mp]
	return e, ok
}

// Register registers the Identity and Node services on s.
func (p *Plugin) Register(s *grpc.Server) {
	csi.RegisterIdentityServer(s, p)
	csi.RegisterNodeServer(s, p)
}

// Interceptor logs and counts every call (method, volume, gRPC code,
// duration); a panic becomes codes.Internal.
func (p *Plugin) Interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("csi: panic", "method", info.FullMethod, "panic", r)
			err = status.Errorf(codes.Internal, "%s: internal error", info.FullMethod)
		}
		code := status.Code(err)
		d := time.Since(start)
		p.stats.observe(filepath.Base(info.FullMethod), code, d)
		args := []any{"method", filepath.Base(info.FullMethod), "code", code.String(), "duration", d}
		if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
			args = append(args, "volume", v.GetVolumeId())
		}
		switch {
		case err != nil && (code == codes.Internal || code == codes.Unknown):
			p.log.Error("csi: call", append(args, "err", err)...)
		case err != nil:
			p.log.Info("csi: call", append(args, "err", err)...)
		default:
			p.log.Debug("csi: call", args...)
		}
	}()
	return handler(ctx, req)
}

// lock locks volume id's stripe and returns its unlock.
func (p *Plugin) lock(volumeID string) func() {
	h := fnv.New32a()
	h.Write([]byte(volumeID))
	l := &p.locks[h.Sum32()%uint32(len(p.locks))]
	l.Lock()
	return l.Unlock
}

// Close unbinds every target (lazily) and closes the Manager (unmounting
// every session; records stay, so the next Start serves them again). It
// returns when ctx is done even if an unmount still waits for a mount
// another mount namespace holds.
func (p *Plugin) Close(ctx context.Context) error {
	p.ready.Store(false)
	for _, s := range p.m.List(context.Background()) {
		if t := s.Labels[LabelTarget]; t != "" && s.Labels[LabelVolume] != "" {
			if st, _, _ := inspectTarget(t, s.Mountpoint); st == targetServed || st == targetStale {
				if err := unbindTarget(t); err != nil {
					p.log.Warn("csi: close: unbind", "target", t, "err", err)
				}
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.m.Close(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("close: sessions still unmounting: %w", ctx.Err())
	}
}

// Detach stops the plugin for a successor on the same state directory
// (mounts.Config.Store): the targets stay bound and the sessions mounted,
// their connections kept (mounts.Manager.Detach), so the pods' volumes
// pause rather than die; the next plugin's Start finds every target
// already served.
func (p *Plugin) Detach(ctx context.Context) error {
	p.ready.Store(false)
	return p.m.Detach(ctx)
}

// ServeAPI answers the daemon API (docs/api.md, mounts.API: the same
// routes as wsfs serve, peer uid checked) on l until ctx is done: how an
// operator reaches a volume's session, such as a layered volume's diff
// and commit. It does not close the Manager.
func (p *Plugin) ServeAPI(ctx context.Context, l net.Listener) error {
	return p.api.Serve(ctx, l)
}

// Published returns the published volumes (volume id → session id).
func (p *Plugin) Published() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.vols))
	for k, v := range p.vols {
		out[k] = v
	}
	return out
}

// GetPluginInfo answers the driver name and version.
func (p *Plugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: p.name, VendorVersion: p.version}, nil
}

// GetPluginCapabilities answers none: no Controller service, no topology.
func (p *Plugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe answers ready once Start has restored the published volumes and
// only while FUSE works (Start's probe mount answered, and /dev/fuse opens
// now).
func (p *Plugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	ready := p.ready.Load()
	if why := p.fuseErr.Load(); why != nil {
		ready = false
	} else if fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		ready = false
		p.log.Warn("csi: probe: /dev/fuse", "err", err)
	} else {
		unix.Close(fd)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}

// NodeGetInfo answers the node id; no volume limit, no topology.
func (p *Plugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: p.nodeID}, nil
}

// NodeGetCapabilities answers GET_VOLUME_STATS (no staging, no expansion).
func (p *Plugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS}},
	}}}, nil
}

// invalid returns an InvalidArgument status.
func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, format, a...)
}

// statusOf maps a mounts error to a gRPC status: bad input InvalidArgument,
// an id or mountpoint in use AlreadyExists, a busy mount FailedPrecondition,
// the rest Internal.
func statusOf(err error) error {
	switch mounts.CodeOf(err) {
	case mounts.CodeInvalid:
		return status.Error(codes.InvalidArgument, err.Error())
	case mounts.CodeExists:
		return status.Error(codes.AlreadyExists, err.Error())
	case mounts.CodeBusy:
		return status.Error(codes.FailedPrecondition, err.Error())
	case mounts.CodeNotFound:
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// NodePublishVolume publishes an ephemeral volume: it checks the request
// (volume_id, an absolute target_path, a mount volume_capability: else
// InvalidArgument) and the volume's attributes (parseContext: InvalidArgument
// naming the attribute), creates the session (mounts.Manager.Create: the
// same code path as `wsfs serve`), and bind-mounts its mount at target_path,
// read-only when the request is readonly or the access mode is a reader-only
// one. Nothing is left when a step fails.
//
// Idempotent: the same volume at the same target with the same attributes
// and readonly flag answers OK (binding the target again when it no longer
// serves the session). The same volume at another target is
// FailedPrecondition (a wsfs volume has one target); with other attributes or
// another readonly flag AlreadyExists; a session id already used by another
// volume AlreadyExists.
func (p *Plugin) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	vid, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkVolumeTarget(vid, target); err != nil {
		return nil, err
	}
	switch {
	case req.GetVolumeCapability() == nil:
		return nil, invalid("volume %q: volume_capability: required", vid)
	case req.GetVolumeCapability().GetMount() == nil:
		return nil, invalid("volume %q: volume_capability: only the mount access type is supported (wsfs volumes are directories)", vid)
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	if mode == csi.VolumeCapability_AccessMode_UNKNOWN {
		return nil, invalid("volume %q: volume_capability.access_mode: required", vid)
	}
	if f := req.GetVolumeCapability().GetMount().GetMountFlags(); len(f) > 0 {
		return nil, invalid("volume %q: mount_flags %q: not supported (set the policy with the volume attributes)", vid, f)
	}
	readOnly := req.GetReadonly() || mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY || mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	given := filepath.Clean(target)
	target = canonicalTarget(target)
	for name, d := range map[string]string{"state directory": p.m.StateDir(), "mount base": p.m.MountBase()} {
		if identity.Within(target, d) || identity.Within(d, target) {
			return nil, invalid("volume %q: target_path %q overlaps the plugin's %s %s", vid, target, name, d)
		}
	}
	if underAny(target, p.allowed) {
		return nil, invalid("volume %q: target_path %q is under an allowed root; a volume may not be published into a project", vid, target)
	}
	v, err := parseContext(vid, req.GetVolumeContext(), p.allowed)
	if err != nil {
		return nil, invalid("volume %q: %v", vid, err)
	}
	defer p.lock(vid)()

	p.mu.Lock()
	sid, known := p.vols[vid]
	p.mu.Unlock()
	if known {
		s, err := p.m.Get(ctx, sid)
		if err == nil {
			return p.republish(s, vid, target, v, readOnly)
		}
		if mounts.CodeOf(err) != mounts.CodeNotFound {
			return nil, statusOf(err)
		}
		p.forget(vid)
	}

	labels := map[string]string{
		LabelVolume: vid, LabelTarget: target,
		LabelReadOnly: strconv.FormatBool(readOnly), LabelContext: v.digest,
	}
	if given != target {
		labels[LabelTargetGiven] = given
	}
	for k, val := range v.labels {
		labels[k] = val
	}
	s, err := p.m.Create(ctx, mounts.Spec{ID: v.session, Root: v.root, Policy: v.policy, Symlinks: v.symlinks, Users: v.users, Labels: labels, Layer: v.layer})
	if err != nil {
		if mounts.CodeOf(err) == mounts.CodeExists {
			if other, gerr := p.m.Get(ctx, v.session); gerr == nil && other.Labels[LabelVolume] != vid {
				return nil, status.Errorf(codes.AlreadyExists, "volume %q: session %q is in use by another volume", vid, v.session)
			}
		}
		return nil, statusOf(err)
	}
	undo := func(why string) {
		if rerr := p.m.Remove(context.Background(), s.ID, true); rerr != nil {
			p.log.Error("csi: publish: undo", "volume", vid, "session", s.ID, "why", why, "err", rerr)
		}
	}
	// The walk that Create did may have met a path swapped after
	// parseContext checked it: what the session serves must be allowed.
	if !underAny(s.Root, p.allowed) {
		undo("root outside the allowed roots")
		return nil, invalid("volume %q: volume attribute root %q resolved to %s while it was being published: not under an allowed root", vid, v.root, s.Root)
	}
	for _, r := range s.Policy.Additional {
		if !underAny(r.Path, p.allowed) {
			undo("additional root outside the allowed roots")
			return nil, invalid("volume %q: volume attribute addRoots: %s is not under an allowed root", vid, r.Path)
		}
	}
	if _, err := bindTarget(s.Mountpoint, target, readOnly); err != nil {
		undo("bind failed")
		return nil, status.Errorf(codes.Internal, "volume %q: %v", vid, err)
	}
	p.mu.Lock()
	p.vols[vid] = s.ID
	p.mu.Unlock()
	p.log.Info("csi: volume published", podArgs(s, "volume", vid, "session", s.ID, "root", s.Root, "target", target, "readonly", readOnly)...)
	return &csi.NodePublishVolumeResponse{}, nil
}

// republish answers a NodePublishVolume for a volume that has a session.
func (p *Plugin) republish(s mounts.Session, vid, target string, v volume, readOnly bool) (*csi.NodePublishVolumeResponse, error) {
	switch {
	case s.Labels[LabelTarget] != target:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q: published at %s; a wsfs volume has one target, not also %s", vid, s.Labels[LabelTarget], target)
	case s.Labels[LabelContext] != v.digest:
		return nil, status.Errorf(codes.AlreadyExists, "volume %q: published at %s with other volume attributes", vid, target)
	case s.Labels[LabelReadOnly] != strconv.FormatBool(readOnly):
		return nil, status.Errorf(codes.AlreadyExists, "volume %q: published at %s with readonly=%s", vid, target, s.Labels[LabelReadOnly])
	case s.State != mounts.StateMounted:
		return nil, status.Errorf(codes.Internal, "volume %q: session %q is not mounted: %s", vid, s.ID, s.Error)
	}
	if _, err := p.ensureBound(s, target, readOnly); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: %v", vid, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// forget drops a volume from the index.
func (p *Plugin) forget(vid string) {
	p.mu.Lock()
	delete(p.vols, vid)
	p.mu.Unlock()
}

// podArgs appends the session's pod identity labels to log args.
func podArgs(s mounts.Session, args ...any) []any {
	for _, k := range podInfoKeys {
		if v, ok := s.Labels[k]; ok {
			args = append(args, k, v)
		}
	}
	return args
}

// checkVolumeTarget is the rule both node calls apply to their volume_id and
// target_path (CSI spec: both required; kubelet passes an absolute path): an
// InvalidArgument status naming the field, or nil.
func checkVolumeTarget(vid, target string) error {
	switch {
	case vid == "":
		return invalid("volume_id: required")
	case target == "":
		return invalid("volume %q: target_path: required", vid)
	case !filepath.IsAbs(target):
		return invalid("volume %q: target_path %q: must be absolute", vid, target)
	}
	return nil
}

// NodeUnpublishVolume unmounts the target and removes the session and the
// target directory (a layered volume's layer with it: what was not
// committed is gone). volume_id and target_path are required
// (InvalidArgument). Idempotent: a volume that is not published (or not at
// this target) answers OK, clearing a dead wsfs mount left at the target.
func (p *Plugin) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	vid, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkVolumeTarget(vid, target); err != nil {
		return nil, err
	}
	given := filepath.Clean(target)
	target = canonicalTarget(target)
	defer p.lock(vid)()
	p.mu.Lock()
	sid, known := p.vols[vid]
	p.mu.Unlock()
	var s mounts.Session
	if known {
		var err error
		if s, err = p.m.Get(ctx, sid); err != nil {
			if mounts.CodeOf(err) != mounts.CodeNotFound {
				return nil, statusOf(err)
			}
			p.forget(vid)
			known = false
		}
	}
	if known && s.Labels[LabelTarget] != target && s.Labels[LabelTargetGiven] == given {
		target = s.Labels[LabelTarget] // the pod directory is gone: its spelling matches
	}
	if !known || s.Labels[LabelTarget] != target {
		// Not published here: clear a dead wsfs mount a lost plugin left.
		if e, ok := mountEntry(target); ok && e.FSType == wsfsFSType {
			// statfs(2) asks the server (stat(2) of a root may be
			// answered from the attribute cache); fusefs.Statfs asks
			// again past io_uring's ECONNABORTED.
			var st unix.Statfs_t
			if err := fusefs.Statfs(target, &st); err == unix.ENOTCONN {
				if err := unbindTarget(target); err != nil {
					return nil, status.Errorf(codes.Internal, "volume %q: %v", vid, err)
				}
			}
		}
		if !known {
			if err := removeTarget(target); err != nil {
				p.log.Warn("csi: unpublish: unknown volume's target", "volume", vid, "err", err)
			}
		}
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := unbindTarget(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: %v", vid, err)
	}
	// Lazily: kubelet asks once the pod's containers are gone, and a
	// reference another mount namespace leaked must not block it.
	if err := p.m.Remove(ctx, sid, true); err != nil && mounts.CodeOf(err) != mounts.CodeNotFound {
		return nil, statusOf(err)
	}
	p.forget(vid)
	if err := removeTarget(target); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: %v", vid, err)
	}
	p.log.Info("csi: volume unpublished", podArgs(s, "volume", vid, "session", sid, "target", target)...)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats answers the usage of the file system behind a
// published volume (statfs(2) of volume_path). volume_id and volume_path
// are required (InvalidArgument); a volume that is not published, or not at
// volume_path, is NotFound.
func (p *Plugin) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	vid, path := req.GetVolumeId(), req.GetVolumePath()
	switch {
	case vid == "":
		return nil, invalid("volume_id: required")
	case path == "":
		return nil, invalid("volume %q: volume_path: required", vid)
	}
	p.mu.Lock()
	sid, known := p.vols[vid]
	p.mu.Unlock()
	if !known {
		return nil, status.Errorf(codes.NotFound, "volume %q: not published", vid)
	}
	s, err := p.m.Get(ctx, sid)
	if err != nil {
		return nil, statusOf(err)
	}
	if !filepath.IsAbs(path) || s.Labels[LabelTarget] != canonicalTarget(path) {
		return nil, status.Errorf(codes.NotFound, "volume %q: not published at %q", vid, path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %q: statfs %s: %v", vid, path, err)
	}
	bs := int64(st.Bsize)
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
			{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
		},
	}, nil
}

// volumeIDs lists the published volumes sorted by volume id, for metrics.
func (p *Plugin) volumeIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.vols))
	for k := range p.vols {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	return ids
}
