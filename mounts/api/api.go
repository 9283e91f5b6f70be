// Package api holds the values of the wsfs daemon's HTTP API (`wsfs serve`,
// docs/api.md, docs/openapi.yaml): request and response bodies as they travel
// as JSON, and the error codes. It depends on the standard library only, so
// a host that talks to the daemon (mounts/client, or its own code) links no
// FUSE server.
//
// The daemon (package mounts) converts its own values into these at the HTTP
// boundary; a test there checks that both carry the same JSON fields.
package api

import (
	"errors"
	"net/http"
	"time"
)

// Version is the API's path prefix and the version the OpenAPI document
// describes.
const Version = "v1"

// Policy modes (Policy.Mode), from the policy package.
const (
	ModeReadOnly       = "read-only"
	ModeWorkspaceWrite = "workspace-write"
	ModeFullAccess     = "full-access"
)

// Root accesses (Root.Access).
const (
	AccessNone      = "none"
	AccessReadOnly  = "read-only"
	AccessReadWrite = "read-write"
)

// Symlink modes (CreateRequest.Symlinks, Session.Symlinks).
const (
	SymlinksContain = "contain"
	SymlinksFollow  = "follow"
)

// Session states (Session.State).
const (
	StateMounted = "mounted"
	StateFailed  = "failed"
)

// Event types (Event.Type).
const (
	EventCd      = "cd"
	EventRecover = "recover"
)

// Root is an additional root of a policy: a directory and its access
// ("none", "read-only", "read-write").
type Root struct {
	Path   string `json:"path"`
	Access string `json:"access"`
}

// Policy is a session's policy spec. On input every field may be left out:
// Mode defaults to "workspace-write" (or the parent's, for a sub-session),
// Primary to the session's physical root, Temp to the platform temp area
// (nil: the default; empty: none), Protected to the four git names (nil: the
// default; empty: none). On output every default is filled in.
type Policy struct {
	Mode       string   `json:"mode,omitempty"`
	Primary    string   `json:"primary"`
	Additional []Root   `json:"additional,omitempty"`
	Temp       []string `json:"temp"`
	Protected  []string `json:"protected"`
	// Outside is the access of paths outside every root: empty for the
	// mode's (read-only; read-write in full-access), "none" to make them
	// unreachable.
	Outside string `json:"outside,omitempty"`
	// ProtectedOutside are places outside the writable roots (absolute)
	// whose objects are protected by identity: a hard link inside a root
	// reaching one is EACCES. ProtectedRepos are directories whose
	// repository's config and hooks are protected so. The daemon adds a
	// sub-session's parent's (those outside the child's writable roots)
	// to any given.
	ProtectedOutside []string `json:"protected_outside,omitempty"`
	ProtectedRepos   []string `json:"protected_repos,omitempty"`
}

// PolicyPatch is the body of PATCH /v1/sessions/{id}/policy: the fields to
// change, each optional. Mode replaces the mode; Additional roots are added
// (one naming an existing root's directory replaces its access); Protected
// subpaths are added to the list in force.
type PolicyPatch struct {
	Mode       string   `json:"mode,omitempty"`
	Additional []Root   `json:"additional,omitempty"`
	Protected  []string `json:"protected,omitempty"`
}

// CreateRequest is the body of POST /v1/sessions.
type CreateRequest struct {
	// ID names the session: 1 to 64 of [A-Za-z0-9._-], not "." or "..".
	ID string `json:"id"`
	// Root is the project directory, absolute; the mount serves its
	// physical path.
	Root string `json:"root"`
	// Mountpoint is where to mount, absolute; empty means <mount-base>/<id>.
	Mountpoint string `json:"mountpoint,omitempty"`
	// Policy is the session's policy; nil means the default (or, with
	// Parent, the parent's policy).
	Policy *Policy `json:"policy,omitempty"`
	// Symlinks is the symlink mode; empty means "contain" (or the parent's).
	Symlinks string `json:"symlinks,omitempty"`
	// Parent names a session the new one descends from: it starts in the
	// parent's working directory and inherits the parent's policy and
	// symlink mode unless given, and may never be granted more than the
	// parent.
	Parent string `json:"parent,omitempty"`
	// Cwd is the starting working directory (relative to the mount root,
	// absolute inside the mountpoint, or an absolute host path inside the
	// root). At most one of Parent and Cwd.
	Cwd string `json:"cwd,omitempty"`
	// AllowWrite are directories the session's jails (wsfs exec --confine)
	// may write directly, besides the temp directory (a build cache, say):
	// absolute, existing, neither inside the root nor containing it, not "/".
	AllowWrite []string `json:"allow_write,omitempty"`
	// Users are the uids besides root that may use the session's mounts
	// (at most 64; not 0; no duplicates): the mounts are made allow_other
	// and every other uid gets EACCES, logged. Empty: root only; a
	// sub-session inherits its parent's and may list no uid the parent
	// does not.
	Users []uint32 `json:"users,omitempty"`
	// Labels are free-form key/value pairs kept in the record and added to
	// the session's log lines (at most 32; keys 1 to 128 printable ASCII
	// characters without space, quote, backslash or '='; values at most
	// 1024 bytes without control characters).
	Labels map[string]string `json:"labels,omitempty"`
	// Layer puts the session on a copy-on-write layer kept in the
	// daemon's state: the session sees the project with its own changes
	// on top, and the project on disk changes only at commit (POST
	// /v1/sessions/{id}/commit). Removed with the session. Refused with
	// Parent: a sub-session of a layered session runs on its parent's
	// layer without asking (Session.LayerOf).
	Layer bool `json:"layer,omitempty"`
}

// Session is one session, as create, list and show return it.
type Session struct {
	ID string `json:"id"`
	// Origin is the root as the client spelled it.
	Origin string `json:"origin"`
	// Root is the physical root the mount serves.
	Root string `json:"root"`
	// Mountpoint is the canonical mountpoint.
	Mountpoint string `json:"mountpoint"`
	// Mode is the policy's mode.
	Mode string `json:"mode"`
	// Policy is the policy in force, every default filled in.
	Policy   Policy `json:"policy"`
	Symlinks string `json:"symlinks"`
	Parent   string `json:"parent,omitempty"`
	// Cwd is the working directory inside the mount, as last set.
	Cwd string `json:"cwd"`
	// CwdPhysical is Cwd's physical path on the host.
	CwdPhysical string `json:"cwd_physical"`
	// TmpDir is the session's private temp directory (mode 0700).
	TmpDir string `json:"tmpdir"`
	// AllowWrite are the directories its jails may write directly
	// (canonical).
	AllowWrite []string `json:"allow_write,omitempty"`
	// Users are the uids the session serves besides root.
	Users []uint32 `json:"users,omitempty"`
	// Labels are the labels given at create.
	Labels  map[string]string `json:"labels,omitempty"`
	Created time.Time         `json:"created"`
	// State is "mounted" or "failed" (Error says why).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Layer is the session's layer directory (upper, work and merged
	// directories and the baseline journal) when it runs on a layer; ""
	// otherwise.
	Layer string `json:"layer,omitempty"`
	// LayerOf is, for a sub-session of a layered session, the session
	// whose layer its mount serves (its diff, commit, discard,
	// checkpoints and rollback are that session's); "" otherwise.
	LayerOf string `json:"layer_of,omitempty"`
	// Transport is how requests reach the session's mount: "io-uring"
	// (FUSE over io_uring) or "/dev/fuse"; absent while it is not
	// mounted (state "failed").
	Transport string `json:"transport,omitempty"`
}

// Change is one path a layered session changed, as GET
// /v1/sessions/{id}/diff lists it.
type Change struct {
	// Path is relative to the session's root.
	Path string `json:"path"`
	// Kind is "added", "deleted", "modified", "type_changed" or
	// "renamed" (a directory the session renamed, or a file it renamed
	// unchanged; From names where it was, whose own "deleted" entry is
	// listed too).
	Kind string `json:"kind"`
	// Type is the object's type in the session ("file", "dir",
	// "symlink", "fifo", "socket", "char", "block"); for "deleted" the
	// project's.
	Type string `json:"type"`
	// From is a renamed directory's or file's path in the project.
	From string `json:"from,omitempty"`
	// Fields says what a "modified" entry changed: "content", "target"
	// (a symlink's text), "mode", "owner", "xattr"; for a "renamed"
	// directory, what changed of the directory itself compared with its
	// origin ("mode", "owner", "xattr"), which a commit gives it.
	Fields []string `json:"fields,omitempty"`
	// Conflict, when set, says how the project changed at Path since the
	// session's first change there: commit refuses the path unless forced.
	Conflict string `json:"conflict,omitempty"`
	// Diff is a unified diff (project, then session) of a text file's
	// content, when asked for and both sides are text under 1 MiB (an
	// added or deleted file's against /dev/null, as git diff shows it); at
	// most 16 MiB of diff text per answer (the one that reaches it ends past
	// it), later files without.
	Diff string `json:"diff,omitempty"`
	// Links are the other paths of the same file in the session (its
	// hard links, listed or not), sorted; a commit makes the paths it
	// applies one file in the project too.
	Links []string `json:"links,omitempty"`
}

// DiffResult is the body of GET /v1/sessions/{id}/diff: the session's
// changes, sorted by path, parents before their children.
type DiffResult struct {
	Session string   `json:"session"`
	Changes []Change `json:"changes"`
}

// LayerRequest is the body of POST /v1/sessions/{id}/commit and
// /v1/sessions/{id}/discard.
type LayerRequest struct {
	// Paths limit the call to these paths and what lies below them
	// (relative to the root, or absolute inside the root or the
	// mountpoint); empty means every change.
	Paths []string `json:"paths,omitempty"`
	// Force commits paths the host changed since the session did
	// (conflicts), overwriting the host's change. Commit only.
	Force bool `json:"force,omitempty"`
}

// PathError is one path a commit or discard did not apply, and why.
type PathError struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// LayerResult is the body a commit or discard answers: the paths applied,
// in order, and those left in the layer (refused by the policy, in
// conflict, or failed), each with its reason.
type LayerResult struct {
	Session   string      `json:"session"`
	Applied   []string    `json:"applied"`
	Refused   []PathError `json:"refused,omitempty"`
	Conflicts []PathError `json:"conflicts,omitempty"`
}

// CheckpointRequest is the body of POST /v1/sessions/{id}/checkpoints and
// POST /v1/sessions/{id}/rollback.
type CheckpointRequest struct {
	// Name is the checkpoint's: 1 to 64 of A-Z a-z 0-9 . _ -, not
	// starting with '.'.
	Name string `json:"name"`
}

// Checkpoint is one checkpoint of a layered session: a copy of its layer
// (what it changed) and its baseline, kept until removed with the session
// or on its own.
type Checkpoint struct {
	Name string `json:"name"`
	// Created is when it was taken (UTC, whole seconds).
	Created time.Time `json:"created"`
	// Files counts the objects of the layer's copy (whiteouts and
	// directories included, the root not), Bytes the bytes of its regular
	// files.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// CheckpointList is the body of GET /v1/sessions/{id}/checkpoints: the
// session's checkpoints, oldest first (then by name).
type CheckpointList struct {
	Session     string       `json:"session"`
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// RollbackResult is the body a rollback answers: the paths of the session's
// view it changed to the checkpoint's, parents first, and those it could
// not, each with its reason.
type RollbackResult struct {
	Session    string      `json:"session"`
	Checkpoint string      `json:"checkpoint"`
	Applied    []string    `json:"applied"`
	Refused    []PathError `json:"refused,omitempty"`
}

// SessionList is the body of GET /v1/sessions: every session, sorted by id.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// CwdRequest is the body of POST /v1/sessions/{id}/cwd.
type CwdRequest struct {
	// Cd is the directory to change to: relative to the current directory,
	// absolute inside the mountpoint, or an absolute host path inside the
	// root.
	Cd string `json:"cd"`
}

// Event is one entry of a session's working-directory log.
type Event struct {
	// Seq numbers a session's events from 1, in order.
	Seq int `json:"seq"`
	// Time is when the event was logged (UTC).
	Time time.Time `json:"time"`
	// Type is "cd" or "recover".
	Type string `json:"type"`
	// From and To are directories inside the mount.
	From string `json:"from"`
	To   string `json:"to"`
	// Reason says why a "recover" happened; empty for "cd".
	Reason string `json:"reason,omitempty"`
}

// EventList is the body of GET /v1/sessions/{id}/events, oldest first.
type EventList struct {
	Session string  `json:"session"`
	Events  []Event `json:"events"`
}

// WorkDir is a session's working directory, as GET and POST
// /v1/sessions/{id}/cwd return it.
type WorkDir struct {
	Session string `json:"session"`
	// Path is the directory inside the mount.
	Path string `json:"path"`
	// Physical is its physical path on the host.
	Physical string `json:"physical"`
	// Changed is true when this call changed the directory.
	Changed bool `json:"changed"`
	// Events are the events this call logged, oldest first.
	Events []Event `json:"events,omitempty"`
}

// Decision is a policy decision.
type Decision struct {
	Allow bool `json:"allow"`
	// Errno names the errno a denial gives ("EROFS", "EACCES", ...).
	Errno string `json:"errno,omitempty"`
	// Rule names the rule that decided ("primary:read-write", ...).
	Rule string `json:"rule"`
}

// Resolution is the body of GET /v1/sessions/{id}/resolve.
type Resolution struct {
	Session string `json:"session"`
	// Path is the path as asked.
	Path string `json:"path"`
	// Cwd is the directory (inside the mount) a relative path resolved
	// against.
	Cwd string `json:"cwd"`
	// Display is the path as a process in the session spells it.
	Display string `json:"display"`
	// Key is the physical object the kernel reaches (or would create).
	Key string `json:"key"`
	// MountPath is the object's path inside the mount; empty when the walk
	// leaves the mount.
	MountPath string `json:"mount_path,omitempty"`
	// Read and Write are the policy's decisions on Key.
	Read  Decision `json:"read"`
	Write Decision `json:"write"`
}

// Synced is the body of the answer to POST /v1/sessions/{id}/sync, sent
// once every host change made before the request is visible through the
// session's mount, host view and jail views.
type Synced struct {
	Session string `json:"session"`
}

// Health is the body of GET /v1/healthz.
type Health struct {
	// Status is "ok".
	Status string `json:"status"`
	// Sessions is the number of sessions (mounted or failed).
	Sessions int `json:"sessions"`
	// StateDir and MountBase are the daemon's canonical state directory
	// and mount base (a jail hides them).
	StateDir  string `json:"state_dir,omitempty"`
	MountBase string `json:"mount_base,omitempty"`
}

// Jail is the body of the answer to POST /v1/sessions/{id}/jails: the
// caller, registered as a jail of the session (the daemon holds a pidfd on
// it and ends it before it unmounts, removes or restarts the session).
type Jail struct {
	Session string `json:"session"`
	PID     int    `json:"pid"`
}

// Code is a stable, machine-readable error class: the API puts it in
// {"error":{"code":...}} with the HTTP status Code.Status gives.
type Code string

// The error codes. Each is stable: clients may match on it.
const (
	// CodeInvalid is bad input: a malformed id, a relative or missing root,
	// a mountpoint inside the root, a policy that does not compile or that
	// widens a parent's, an unknown JSON field, a path that is not a
	// directory. HTTP 400.
	CodeInvalid Code = "invalid"
	// CodeForbidden is a request from a peer uid other than the daemon's.
	// HTTP 403.
	CodeForbidden Code = "forbidden"
	// CodeNotFound is an unknown session id, checkpoint or API route. HTTP
	// 404.
	CodeNotFound Code = "not_found"
	// CodeMethod is an HTTP method a route does not accept. HTTP 405.
	CodeMethod Code = "method_not_allowed"
	// CodeExists is a session id, mountpoint or checkpoint name already in
	// use. HTTP 409.
	CodeExists Code = "exists"
	// CodeBusy is a mount held by processes (the message names them). HTTP 409.
	CodeBusy Code = "busy"
	// CodeOriginGone is a session whose physical root no longer exists, so
	// its working directory cannot be recovered. HTTP 409.
	CodeOriginGone Code = "origin_gone"
	// CodeRootChanged is a session whose physical root path now names
	// another object than the directory its mount serves. HTTP 409.
	CodeRootChanged Code = "root_changed"
	// CodeFailed is a session whose mount could not be restored at startup;
	// only show and remove work on it. HTTP 409.
	CodeFailed Code = "failed"
	// CodeTooLarge is a request body over the limit (1 MiB). HTTP 413.
	CodeTooLarge Code = "too_large"
	// CodeInternal is a failure of the host (a mount or file system call
	// that failed for a reason other than the input). HTTP 500.
	CodeInternal Code = "internal"
)

// Codes lists every code, in the order above.
var Codes = []Code{CodeInvalid, CodeForbidden, CodeNotFound, CodeMethod, CodeExists, CodeBusy,
	CodeOriginGone, CodeRootChanged, CodeFailed, CodeTooLarge, CodeInternal}

// Status returns the HTTP status of c: 400, 403, 404, 405, 409, 413, or 500
// for CodeInternal and unknown codes.
func (c Code) Status() int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeMethod:
		return http.StatusMethodNotAllowed
	case CodeExists, CodeBusy, CodeOriginGone, CodeRootChanged, CodeFailed:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON body of every API error:
// {"error":{"code":"not_found","message":"session \"x\": no such session"}}.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the inside of ErrorBody.
type ErrorObject struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Errno is the name of the errno the failure carries ("ENOTDIR",
	// "ELOOP", "EACCES" for a walk a resolve or cd refused), as `wsfs
	// resolve --json` reports it; empty when it carries none.
	Errno string `json:"errno,omitempty"`
}

// Error is an API refusal: a Code and a one-line message naming the input
// and the rule. Err is the underlying cause, if any (for errors.Is /
// errors.As); it does not travel over the API.
type Error struct {
	Code    Code
	Message string
	Err     error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) (and the other sentinels) match any
// *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is: errors.Is(err, api.ErrNotFound) is true for every
// *Error whose Code is CodeNotFound.
var (
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrForbidden   = &Error{Code: CodeForbidden}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrExists      = &Error{Code: CodeExists}
	ErrBusy        = &Error{Code: CodeBusy}
	ErrOriginGone  = &Error{Code: CodeOriginGone}
	ErrRootChanged = &Error{Code: CodeRootChanged}
	ErrFailed      = &Error{Code: CodeFailed}
	ErrTooLarge    = &Error{Code: CodeTooLarge}
)

// CodeOf returns the Code of err: the Code of the *Error it wraps, else
// CodeInternal. nil has code "".
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
