// Package apperr is clusterflow's one error type: a code that says what kind of problem it
// is, and a message in the words a user reads, the same in the CLI and over HTTP. The code
// is mapped to an exit status and to an HTTP status here, and nowhere else.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
)

// Code says what kind of problem an error is.
type Code string

const (
	// Invalid: the request is malformed or asks for what cannot be (a bad flag, spec, count
	// or event).
	Invalid Code = "invalid"
	// NotFound: no such cluster or member.
	NotFound Code = "not_found"
	// Conflict: the cluster's state refuses the request now (it exists already, is being
	// deleted, has nothing to cancel or resume).
	Conflict Code = "conflict"
	// Gone: the cluster was deleted; its name can be deployed again.
	Gone Code = "gone"
	// Unavailable: Temporal or a worker did not answer; trying again later may work.
	Unavailable Code = "unavailable"
	// Maintenance: maintenance is on, and refuses changes until it ends; trying again
	// then will work.
	Maintenance Code = "maintenance"
	// Failed: the operation ran and failed, or was canceled; its report says why.
	Failed Code = "failed"
	// Internal: anything else.
	Internal Code = "internal"

	// The HTTP gateway's own refusals, made before a request reaches Temporal.

	// Unauthenticated: no token, or one that is not known.
	Unauthenticated Code = "unauthenticated"
	// Forbidden: the token may not do that.
	Forbidden Code = "forbidden"
	// TooLarge: the request body is over the limit.
	TooLarge Code = "too_large"
	// UnsupportedMedia: the request body is not JSON.
	UnsupportedMedia Code = "unsupported_media"
	// RateLimited: the caller sent too many requests; it may retry later.
	RateLimited Code = "rate_limited"
)

// Error is an error with a code. Problems, when set, locate what is wrong in a request
// field by field; Message then sums them up.
type Error struct {
	Code     Code
	Message  string
	Problems []Problem
	cause    error
}

// Problem is one thing wrong with a request, located by its field path, e.g.
// roles[1].dependsOn.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

func (e *Error) Error() string { return e.Message }

// Unwrap gives the error that caused this one, if any, to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.cause }

// Errorf makes an error with a code; a %w verb keeps its operand as the cause.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), cause: errors.Unwrap(err)}
}

// Wrap gives err a code, keeping its message; nil stays nil.
func Wrap(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Message: err.Error(), cause: err}
}

// CodeOf is the code of the first *Error in err's chain: Internal if there is none, and ""
// for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err has the code.
func Is(err error, code Code) bool { return CodeOf(err) == code }

// Exit statuses: scripts rely on these. 2 means nothing was started because of what was
// asked; 1 that something ran and failed, or could not be reached.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitBadInput = 2
)

// ExitCode is the CLI's exit status for err.
func ExitCode(err error) int {
	switch CodeOf(err) {
	case "":
		return ExitOK
	case Invalid, NotFound, Conflict, Gone, Maintenance, Unauthenticated, Forbidden, TooLarge, UnsupportedMedia:
		return ExitBadInput
	}
	return ExitFailed
}

// HTTPStatus is the HTTP status for err.
func HTTPStatus(err error) int {
	switch CodeOf(err) {
	case "":
		return http.StatusOK
	case Invalid:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case Gone:
		return http.StatusGone
	case Unavailable, Maintenance:
		return http.StatusServiceUnavailable
	case Unauthenticated:
		return http.StatusUnauthorized
	case Forbidden:
		return http.StatusForbidden
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case UnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case RateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// Codes lists every code, for those who map them.
var Codes = []Code{Invalid, NotFound, Conflict, Gone, Unavailable, Maintenance, Failed, Internal,
	Unauthenticated, Forbidden, TooLarge, UnsupportedMedia, RateLimited}

// Known reports whether s names a code, as a refusal's type does when it crosses Temporal.
func Known(s string) (Code, bool) {
	for _, c := range Codes {
		if string(c) == s {
			return c, true
		}
	}
	return "", false
}
