// Package starter is clusterflow's client library: it deploys, resizes, changes, cancels,
// deletes, watches and queries clusters through Temporal. The CLI is a thin shell around it.
package starter

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/workflows"
)

// Starter talks to the cluster workflows on one task queue.
type Starter struct {
	client    client.Client
	taskQueue string
}

// New returns a Starter; an empty task queue means workflows.DefaultTaskQueue.
func New(c client.Client, taskQueue string) *Starter {
	if taskQueue == "" {
		taskQueue = workflows.DefaultTaskQueue
	}
	return &Starter{client: c, taskQueue: taskQueue}
}

// NotFoundError says no cluster has the name.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("cluster %q not found (see `clusterflow list`)", e.Name)
}

// AlreadyExistsError refuses a deploy over an existing cluster.
type AlreadyExistsError struct{ Name string }

func (e *AlreadyExistsError) Error() string {
	return fmt.Sprintf("cluster %q already exists; delete it first (`clusterflow delete %s`) or choose another name", e.Name, e.Name)
}

// NoWorkerError explains a query nobody answered.
type NoWorkerError struct {
	TaskQueue string
	Err       error
}

func (e *NoWorkerError) Error() string {
	return fmt.Sprintf("no clusterflow worker answered on task queue %q (is `clusterflow dev` or `clusterflow worker` running?): %v", e.TaskQueue, e.Err)
}

func (e *NoWorkerError) Unwrap() error { return e.Err }

// IsBadInput tells errors caused by what the user asked for (exit status 2) from failures.
func IsBadInput(err error) bool {
	var notFound *NotFoundError
	var exists *AlreadyExistsError
	var refused *RefusedError
	var deleted *DeletedError
	return errors.As(err, &notFound) || errors.As(err, &exists) || errors.As(err, &refused) || errors.As(err, &deleted)
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
