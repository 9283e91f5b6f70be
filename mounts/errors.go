package mounts

import (
	"errors"
	"fmt"

	"github.com/wsfs/wsfs/mounts/api"
)

// Code is the API's error class (api.Code): the API puts it in
// {"error":{"code":...}} with the status Code.Status gives; the CLI maps it to
// an exit code.
type Code = api.Code

// Error is the error type of every Manager method (api.Error): a Code and a
// one-line message naming the input and the rule; Err is the cause, if any
// (for errors.Is / errors.As, e.g. a *fusefs.BusyError).
type Error = api.Error

// The error codes (see package api for each one's meaning and status).
const (
	CodeInvalid     = api.CodeInvalid
	CodeNotFound    = api.CodeNotFound
	CodeExists      = api.CodeExists
	CodeBusy        = api.CodeBusy
	CodeOriginGone  = api.CodeOriginGone
	CodeRootChanged = api.CodeRootChanged
	CodeFailed      = api.CodeFailed
	CodeForbidden   = api.CodeForbidden
	CodeTooLarge    = api.CodeTooLarge
	CodeMethod      = api.CodeMethod
	CodeInternal    = api.CodeInternal
)

// Sentinels for errors.Is: errors.Is(err, mounts.ErrNotFound) is true for
// every *Error whose Code is CodeNotFound.
var (
	ErrInvalid     = api.ErrInvalid
	ErrNotFound    = api.ErrNotFound
	ErrExists      = api.ErrExists
	ErrBusy        = api.ErrBusy
	ErrOriginGone  = api.ErrOriginGone
	ErrRootChanged = api.ErrRootChanged
	ErrFailed      = api.ErrFailed
)

// errorf returns an *Error with code and a formatted message; a %w operand
// becomes Err.
func errorf(code Code, format string, a ...any) *Error {
	err := fmt.Errorf(format, a...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// CodeOf returns the Code of err: the Code of the *Error it wraps, else
// CodeInternal. nil has code "".
func CodeOf(err error) Code { return api.CodeOf(err) }
