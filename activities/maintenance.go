package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"

	"github.com/clusterflow/clusterflow/workflows"
)

// SignalAll lists the running workflows of the broadcast's type and signals each one, and
// then each of Also; a workflow that closed meanwhile is skipped. It returns how many of
// the type it reached. It uses the worker's own client, through the server's visibility,
// so that no workflow needs to keep a registry of the others.
func (a *Activities) SignalAll(ctx context.Context, b workflows.Broadcast) (int, error) {
	c := activity.GetClient(ctx)
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", b.WorkflowType)
	reached := 0
	var page []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: page, PageSize: 1000})
		if err != nil {
			return reached, fmt.Errorf("list the running %s workflows: %w", b.WorkflowType, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if err := c.SignalWorkflow(ctx, id, "", b.Signal, b.Arg); err != nil && !isNotFound(err) {
				return reached, fmt.Errorf("signal %s: %w", id, err)
			}
			reached++
			activity.RecordHeartbeat(ctx, reached) // the SDK throttles what it sends
		}
		if page = resp.GetNextPageToken(); len(page) == 0 {
			break
		}
	}
	for _, id := range b.Also {
		if err := c.SignalWorkflow(ctx, id, "", b.Signal, b.Arg); err != nil && !isNotFound(err) {
			return reached, fmt.Errorf("signal %s: %w", id, err)
		}
	}
	return reached, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
