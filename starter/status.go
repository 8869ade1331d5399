package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/clusterflow/clusterflow/workflows"
)

// queryTimeout bounds a status query, which needs a running worker to answer.
const queryTimeout = 15 * time.Second

// Status asks the cluster's workflow for its status, and adds running scripts' latest
// lines of output.
func (s *Starter) Status(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	status, err := s.query(ctx, name)
	if err == nil {
		s.addLastLines(ctx, &status)
	}
	return status, err
}

// query asks the cluster's workflow for its status, as the status query answers it.
func (s *Starter) query(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	queryCtx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var status workflows.ClusterStatus
	resp, err := s.client.QueryWorkflow(queryCtx, workflows.ClusterWorkflowID(name), "", workflows.StatusQuery)
	switch {
	case err != nil && ctx.Err() != nil:
		return status, ctx.Err()
	case isNotFound(err):
		return status, &NotFoundError{Name: name}
	case noAnswer(err):
		return status, &NoWorkerError{TaskQueue: s.taskQueue, Err: err}
	case err != nil:
		return status, fmt.Errorf("query status of %s: %w", name, err)
	}
	if err := resp.Get(&status); err != nil {
		return status, fmt.Errorf("decode status of %s: %w", name, err)
	}
	return status, nil
}

// noAnswer recognises a query that no worker picked up in time, or that the server did not
// even dispatch because no worker has polled lately (say, right after a server restart).
func noAnswer(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	var notReady *serviceerror.WorkflowNotReady
	var precondition *serviceerror.FailedPrecondition
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &notReady) ||
		errors.As(err, &precondition) && strings.Contains(precondition.Error(), "no poller seen")
}
