package csi

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsfs/wsfs/fusefs"
	"github.com/wsfs/wsfs/identity"
	"github.com/wsfs/wsfs/mounts"
	"github.com/wsfs/wsfs/policy"
)

// The volume_context keys a volume's attributes may hold (an inline csi:
// volume's volumeAttributes). Every other key is refused, except those under
// PodInfoPrefix, which kubelet adds.
const (
	// KeyRoot is the project directory: absolute, resolving physically to a
	// directory under one of the plugin's allowed roots. Required.
	KeyRoot = "root"
	// KeyMode is the policy mode: read-only or workspace-write (the
	// default). full-access is refused: it would make every path the
	// plugin can reach writable to the pod.
	KeyMode = "mode"
	// KeyAddRoots is a comma-separated list of additional roots
	// PATH=ro|rw|none, each under an allowed root.
	KeyAddRoots = "addRoots"
	// KeyProtect is a comma-separated list of subpaths protected (git's
	// names are the repository rule's, whatever the list).
	KeyProtect = "protect"
	// KeySymlinks is the symlink mode (fusefs.ParseSymlinkMode); default
	// contain.
	KeySymlinks = "symlinks"
	// KeySession is the session id; default SessionID(volume id).
	KeySession = "session"
	// KeyUsers is a comma-separated list of uids besides root that may use
	// the volume (fusefs.ParseUsers): a pod's runAsUser. The session's
	// mounts are then allow_other and every other uid gets EACCES, logged.
	// Default: root only.
	KeyUsers = "users"
	// KeyLayer is "true" to run the volume's session on a copy-on-write
	// layer in the plugin's state (mounts.Spec.Layer,
	// <state-dir>/layers/<session>): the pod's writes stay there and reach
	// the project only when an operator commits them (the daemon API on
	// `wsfs csi --api-socket`); the layer goes with the session at
	// unpublish. "false" (the default when absent): none. Any other value
	// is refused.
	KeyLayer = "layer"
)

// PodInfoPrefix prefixes the keys kubelet adds to volume_context when the
// CSIDriver has podInfoOnMount (and always for ephemeral volumes:
// "csi.storage.k8s.io/ephemeral").
const PodInfoPrefix = "csi.storage.k8s.io/"

// podInfoKeys are the pod-identity keys copied into the session's labels
// (and so into every log line of its mount, denials included).
var podInfoKeys = []string{
	PodInfoPrefix + "pod.name",
	PodInfoPrefix + "pod.namespace",
	PodInfoPrefix + "pod.uid",
	PodInfoPrefix + "serviceAccount.name",
	PodInfoPrefix + "ephemeral",
}

// The labels the plugin keeps in each session record: they are the
// plugin's whole state (a restart rebuilds everything from them).
const (
	// LabelVolume is the CSI volume id.
	LabelVolume = "wsfs.io/csi.volume"
	// LabelTarget is the target_path the session is bind-mounted at.
	LabelTarget = "wsfs.io/csi.target"
	// LabelTargetGiven is target_path as kubelet spelled it, when that
	// differs from LabelTarget (a symlinked kubelet directory): an unpublish
	// after the pod directory is gone can only be matched by it.
	LabelTargetGiven = "wsfs.io/csi.target-given"
	// LabelReadOnly is "true" when the bind at the target is read-only.
	LabelReadOnly = "wsfs.io/csi.readonly"
	// LabelContext is a digest of the volume's attributes, so that a
	// repeated NodePublishVolume with other attributes is told apart.
	LabelContext = "wsfs.io/csi.context"
)

// hashedPrefix starts every session id SessionID derives by hashing; a
// volume id that starts with it is hashed too, so the two kinds of ids never
// meet.
const hashedPrefix = "h."

// SessionID maps a CSI volume id to a session id ([A-Za-z0-9._-]{1,64}, see
// mounts.ValidID), injectively: a volume id that is itself a valid session id
// and does not start with "h." is kept as it is (readable in listings); any
// other (kubelet's ephemeral ids, "csi-" and 64 hex digits, are 68
// characters) becomes "h." and the unpadded base64url SHA-256 of the id (45
// characters). The two images are disjoint by their first two characters, so
// two volume ids share a session id only if SHA-256 collides.
func SessionID(volumeID string) string {
	if mounts.ValidID(volumeID) == nil && !strings.HasPrefix(volumeID, hashedPrefix) {
		return volumeID
	}
	sum := sha256.Sum256([]byte(volumeID))
	return hashedPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// volume is a NodePublishVolume request's volume_context, parsed.
type volume struct {
	session  string
	root     string // as given
	policy   policy.Spec
	symlinks fusefs.SymlinkMode
	users    []uint32          // KeyUsers
	layer    bool              // KeyLayer
	labels   map[string]string // pod identity
	digest   string            // of the attributes (LabelContext)
}

// parseContext parses and checks volume_context against the allowed roots
// (canonical). Errors name the key and the rule, on one line.
func parseContext(volumeID string, vc map[string]string, allowed []string) (volume, error) {
	v := volume{session: SessionID(volumeID), labels: map[string]string{}}
	for k := range vc {
		switch {
		case k == KeyRoot, k == KeyMode, k == KeyAddRoots, k == KeyProtect, k == KeySymlinks, k == KeySession, k == KeyUsers, k == KeyLayer:
		case strings.HasPrefix(k, PodInfoPrefix):
		default:
			return v, fmt.Errorf("volume attribute %q: unknown (want %s, %s, %s, %s, %s, %s, %s or %s)", k, KeyRoot, KeyMode, KeyAddRoots, KeyProtect, KeySymlinks, KeySession, KeyUsers, KeyLayer)
		}
	}
	if s, ok := vc[KeySession]; ok {
		if err := mounts.ValidID(s); err != nil {
			return v, fmt.Errorf("volume attribute %s: %v", KeySession, err)
		}
		v.session = s
	}

	v.root = vc[KeyRoot]
	if v.root == "" {
		return v, fmt.Errorf("volume attribute %s: required (a directory under %s)", KeyRoot, strings.Join(allowed, ", "))
	}
	if _, err := checkAllowed(KeyRoot, v.root, allowed, true); err != nil {
		return v, err
	}

	switch m := policy.Mode(vc[KeyMode]); m {
	case "", policy.ModeWorkspaceWrite, policy.ModeReadOnly:
		v.policy.Mode = m
	case policy.ModeFullAccess:
		return v, fmt.Errorf("volume attribute %s %q: refused (it would make every path the plugin can reach writable to the pod); want %s or %s", KeyMode, m, policy.ModeReadOnly, policy.ModeWorkspaceWrite)
	default:
		return v, fmt.Errorf("volume attribute %s %q: unknown mode (want %s or %s)", KeyMode, m, policy.ModeReadOnly, policy.ModeWorkspaceWrite)
	}

	for _, item := range splitList(vc[KeyAddRoots]) {
		i := strings.LastIndexByte(item, '=')
		ok := i > 0
		var path, acc string
		if ok {
			path, acc = item[:i], item[i+1:]
		}
		name := acc
		if long, short := shortAccess[acc]; short {
			name = string(long)
		}
		access, err := policy.ParseAccess(name)
		ok = ok && err == nil
		if !ok || path == "" {
			return v, fmt.Errorf("volume attribute %s %q: want PATH=ro|rw|none", KeyAddRoots, item)
		}
		if _, err := checkAllowed(KeyAddRoots+" "+path, path, allowed, true); err != nil {
			return v, err
		}
		v.policy.Additional = append(v.policy.Additional, policy.Root{Path: path, Access: access})
	}

	v.policy.Protected = slices.Clone(policy.DefaultProtected)
	for _, p := range splitList(vc[KeyProtect]) {
		if !slices.Contains(v.policy.Protected, p) {
			v.policy.Protected = append(v.policy.Protected, p)
		}
	}
	// No temp area: the pod has its own /tmp, and the plugin's state
	// directory is not the pod's business. Nothing outside the roots is
	// reachable: a pod may make a link to any path, and the plugin runs as
	// root on the node (outside every root is readable by default).
	v.policy.Temp = []string{}
	v.policy.Outside = policy.AccessNone

	sl, err := fusefs.ParseSymlinkMode(vc[KeySymlinks])
	if err != nil {
		return v, fmt.Errorf("volume attribute %s: %v", KeySymlinks, err)
	}
	v.symlinks = sl

	if v.users, err = fusefs.ParseUsers(vc[KeyUsers]); err != nil {
		return v, fmt.Errorf("volume attribute %v", err) // "users: uid 0: ..."
	}

	if s, ok := vc[KeyLayer]; ok {
		switch s {
		case "true":
			v.layer = true
		case "false":
		default:
			return v, fmt.Errorf("volume attribute %s %q: want true or false", KeyLayer, s)
		}
	}

	for _, k := range podInfoKeys {
		if val, ok := vc[k]; ok {
			v.labels[k] = val
		}
	}
	v.digest = contextDigest(vc)
	return v, nil
}

// shortAccess are the short spellings of addRoots accesses (as the CLI's
// --add-root takes them); the long names are accepted too.
var shortAccess = map[string]policy.Access{"ro": policy.AccessReadOnly, "rw": policy.AccessReadWrite}

// splitList splits a comma-separated attribute, dropping blank items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// contextDigest digests the attributes that define the volume (the pod
// identity keys kubelet adds are left out: they are the same for one
// volume, and service account tokens change).
func contextDigest(vc map[string]string) string {
	h := sha256.New()
	for _, k := range []string{KeyRoot, KeyMode, KeyAddRoots, KeyProtect, KeySymlinks, KeySession} {
		fmt.Fprintf(h, "%s=%q\n", k, vc[k])
	}
	// Only when given: a volume published before the attribute existed
	// keeps its digest (a republish after an upgrade still matches).
	if s, ok := vc[KeyLayer]; ok {
		fmt.Fprintf(h, "%s=%q\n", KeyLayer, s)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// checkAllowed resolves path physically (identity.Canonical: symlinks and
// ".." as the kernel walks them) and returns its canonical path when it is
// an allowed root or lies below one; else an error naming what and the rule.
// With mustBeDir the path must be a directory.
func checkAllowed(what, path string, allowed []string, mustBeDir bool) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("volume attribute %s %q: must be an absolute path", what, path)
	}
	c, err := identity.Canonical(path)
	if err != nil {
		return "", fmt.Errorf("volume attribute %s %q: %s", what, path, identity.ErrnoText(err))
	}
	if !underAny(c, allowed) {
		desc := ""
		if c != filepath.Clean(path) {
			desc = " (physically " + c + ")"
		}
		return "", fmt.Errorf("volume attribute %s %q%s: not under an allowed root (%s)", what, path, desc, strings.Join(allowed, ", "))
	}
	if mustBeDir {
		if fi, err := statDir(c); err != nil {
			return "", fmt.Errorf("volume attribute %s %q: %v", what, path, err)
		} else if !fi {
			return "", fmt.Errorf("volume attribute %s %q: not a directory", what, path)
		}
	}
	return c, nil
}

// underAny reports whether canonical path p is one of roots or below one.
func underAny(p string, roots []string) bool {
	for _, r := range roots {
		if identity.Within(p, r) {
			return true
		}
	}
	return false
}
