package mounts

import (
	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/mounts/api"
	"github.com/wsfs/wsfs/policy"
)

// The API's values (package api) are the daemon's values as they travel:
// plain strings where the daemon has typed modes. These functions convert at
// the HTTP boundary; TestWireFieldsMatch checks both sides carry the same
// JSON fields, so a field added to one and not the other fails a test.

// APIPolicy returns s as the API shows it (the CLI sends a policy file this way).
func APIPolicy(s policy.Spec) api.Policy {
	p := api.Policy{Mode: string(s.Mode), Primary: s.Primary, Temp: s.Temp, Protected: s.Protected, Outside: string(s.Outside),
		ProtectedOutside: s.ProtectedOutside, ProtectedRepos: s.ProtectedRepos}
	if s.Additional != nil {
		p.Additional = make([]api.Root, len(s.Additional))
		for i, r := range s.Additional {
			p.Additional[i] = api.Root{Path: r.Path, Access: string(r.Access)}
		}
	}
	return p
}

// PolicySpec returns the policy spec of an API policy (nil: the zero spec,
// every field left to its default).
func PolicySpec(p *api.Policy) policy.Spec {
	if p == nil {
		return policy.Spec{}
	}
	s := policy.Spec{Mode: policy.Mode(p.Mode), Primary: p.Primary, Temp: p.Temp, Protected: p.Protected, Outside: policy.Access(p.Outside),
		ProtectedOutside: p.ProtectedOutside, ProtectedRepos: p.ProtectedRepos}
	if p.Additional != nil {
		s.Additional = make([]policy.Root, len(p.Additional))
		for i, r := range p.Additional {
			s.Additional[i] = policy.Root{Path: r.Path, Access: policy.Access(r.Access)}
		}
	}
	return s
}

// APIPatch returns p as the API sends it (the CLI's session policy flags).
func APIPatch(p policy.Patch) api.PolicyPatch {
	ap := APIPolicy(policy.Spec{Mode: p.Mode, Additional: p.Additional})
	return api.PolicyPatch{Mode: ap.Mode, Additional: ap.Additional, Protected: p.Protected}
}

// policyPatch returns the policy patch of an API patch.
func policyPatch(p api.PolicyPatch) policy.Patch {
	s := PolicySpec(&api.Policy{Mode: p.Mode, Additional: p.Additional})
	return policy.Patch{Mode: s.Mode, Additional: s.Additional, Protected: p.Protected}
}

// specOf returns the Manager's Spec of a create request.
func specOf(r api.CreateRequest) Spec {
	return Spec{
		ID: r.ID, Root: r.Root, Mountpoint: r.Mountpoint, Policy: PolicySpec(r.Policy),
		Symlinks: fusefs.SymlinkMode(r.Symlinks), Parent: r.Parent, Cwd: r.Cwd, AllowWrite: r.AllowWrite, Users: r.Users, Labels: r.Labels, Layer: r.Layer,
	}
}

// apiSession returns s as the API shows it.
func apiSession(s Session) api.Session {
	return api.Session{
		ID: s.ID, Origin: s.Origin, Root: s.Root, Mountpoint: s.Mountpoint,
		Mode: string(s.Mode), Policy: APIPolicy(s.Policy), Symlinks: string(s.Symlinks),
		Parent: s.Parent, Cwd: s.Cwd, CwdPhysical: s.CwdPhysical, TmpDir: s.TmpDir, AllowWrite: s.AllowWrite, Users: s.Users, Labels: s.Labels,
		Created: s.Created, State: s.State, Error: s.Error, Layer: s.Layer, LayerOf: s.LayerOf, Transport: s.Transport,
	}
}
