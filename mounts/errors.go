package mounts

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error class. The API puts it in
// {"error":{"code":...}} and maps it to an HTTP status with Code.Status; the
// CLI prints the message and maps the class to an exit code.
type Code string

// The error codes. Each is stable: clients may match on it.
const (
	// CodeInvalid is bad input: a malformed id, a relative or missing origin,
	// a mountpoint inside the root, a policy that does not compile, an
	// unknown JSON field, a path that is not a directory. HTTP 400.
	CodeInvalid Code = "invalid"
	// CodeNotFound is an unknown session id (or API route). HTTP 404.
	CodeNotFound Code = "not_found"
	// CodeExists is a session id or mountpoint already in use. HTTP 409.
	CodeExists Code = "exists"
	// CodeBusy is a mount held by processes (the message names them). HTTP 409.
	CodeBusy Code = "busy"
	// CodeOriginGone is a session whose physical root no longer exists, so
	// its working directory cannot be recovered. HTTP 409.
	CodeOriginGone Code = "origin_gone"
	// CodeRootChanged is a session whose physical root path now names
	// another object than the directory its mount serves (the host moved the
	// directory and put another, or a symlink, in its place), so paths cannot
	// be walked as the mount sees them. HTTP 409.
	CodeRootChanged Code = "root_changed"
	// CodeFailed is a session whose mount could not be restored at startup;
	// only show and remove work on it. HTTP 409.
	CodeFailed Code = "failed"
	// CodeForbidden is a request from a peer uid other than the daemon's.
	// HTTP 403.
	CodeForbidden Code = "forbidden"
	// CodeTooLarge is a request body over the limit (MaxBodyBytes). HTTP 413.
	CodeTooLarge Code = "too_large"
	// CodeMethod is an HTTP method a route does not accept. HTTP 405.
	CodeMethod Code = "method_not_allowed"
	// CodeInternal is a failure of the host (a mount or file system call
	// that failed for a reason other than the input). HTTP 500.
	CodeInternal Code = "internal"
)

// Status returns the HTTP status code of c: 400, 403, 404, 405, 409, 413, or
// 500 for CodeInternal and unknown codes.
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

// Error is the error type of every Manager method: a Code and a one-line
// message naming the input and the rule. Err is the underlying cause, if any
// (for errors.Is / errors.As, e.g. a *fusefs.BusyError).
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

// Sentinels for errors.Is: errors.Is(err, mounts.ErrNotFound) is true for
// every *Error whose Code is CodeNotFound.
var (
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrExists      = &Error{Code: CodeExists}
	ErrBusy        = &Error{Code: CodeBusy}
	ErrOriginGone  = &Error{Code: CodeOriginGone}
	ErrRootChanged = &Error{Code: CodeRootChanged}
	ErrFailed      = &Error{Code: CodeFailed}
)

// errorf returns an *Error with code and a formatted message; a %w operand
// becomes Err.
func errorf(code Code, format string, a ...any) *Error {
	err := fmt.Errorf(format, a...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

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
