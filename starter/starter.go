// Package starter is clusterflow's client library: it deploys, resizes, changes, cancels,
// deletes, watches and queries clusters through Temporal. The CLI is a thin shell around it.
package starter

import (
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/payloadlimit"
	"github.com/clusterflow/clusterflow/workflows"
)

// Starter talks to the cluster workflows on one task queue.
type Starter struct {
	client    client.Client
	taskQueue string
	// dataConverter decodes what the starter reads outside the SDK's own calls (activity
	// heartbeat details); it must be the client's, codec included.
	dataConverter converter.DataConverter
	// signer, when set, signs what the Starter deploys, applies and resizes (SignWith).
	signer *signer
}

// New returns a Starter; an empty task queue means workflows.DefaultTaskQueue.
func New(c client.Client, taskQueue string) *Starter {
	if taskQueue == "" {
		taskQueue = workflows.DefaultTaskQueue
	}
	return &Starter{client: c, taskQueue: taskQueue, dataConverter: payloadlimit.New()}
}

// WithDataConverter tells the Starter the converter its client was made with (from
// ClientOptions), so that what it decodes itself goes through the same codec.
func (s *Starter) WithDataConverter(dc converter.DataConverter) *Starter {
	if dc != nil {
		s.dataConverter = dc
	}
	return s
}

// Errors are *Error values, with a code a caller tests with ErrorCodeOf: ErrNotFound for
// an unknown cluster, ErrConflict for a name in use or a request the cluster's state
// refuses, ErrGone for a deleted cluster, ErrInvalid for a request the cluster refused as
// malformed, ErrUnavailable when no worker answers.

// Error is the one error type of clusterflow's API: a code and a message, the same words
// in the CLI, the starter and over HTTP. An update's validator refuses with a Temporal
// ApplicationError whose type is the code, and the starter turns it back into an Error.
type Error = apperr.Error

// ErrorCode says what kind of problem an Error is; ErrorCodeOf reads it from any error.
type ErrorCode = apperr.Code

const (
	ErrInvalid     = apperr.Invalid
	ErrNotFound    = apperr.NotFound
	ErrConflict    = apperr.Conflict
	ErrGone        = apperr.Gone
	ErrUnavailable = apperr.Unavailable
	ErrFailed      = apperr.Failed
	ErrInternal    = apperr.Internal
)

// ErrorCodeOf is err's code: ErrInternal for an error without one.
func ErrorCodeOf(err error) ErrorCode { return apperr.CodeOf(err) }

func notFound(name string) error {
	return apperr.Errorf(apperr.NotFound, "cluster %q not found (see `clusterflow list`)", name)
}

func alreadyExists(name string) error {
	return apperr.Errorf(apperr.Conflict, "cluster %q already exists; delete it first (`clusterflow delete %s`) or choose another name", name, name)
}

func deleted(name string) error {
	return apperr.Errorf(apperr.Gone, "cluster %q is deleted; deploy it again to use the name", name)
}

func noWorker(taskQueue string, err error) error {
	return apperr.Errorf(apperr.Unavailable, "no clusterflow worker answered on task queue %q (is `clusterflow dev` or `clusterflow worker` running?): %w", taskQueue, err)
}

func isNotFound(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound)
}

// missingSearchAttribute recognises the server's refusal of an unregistered attribute.
func missingSearchAttribute(err error) bool {
	var invalid *serviceerror.InvalidArgument
	return errors.As(err, &invalid) && strings.Contains(invalid.Error(), "search attribute")
}
