package starter

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/workflows"
)

// Delete asks the cluster to delete itself and returns once the request is accepted.
// Deleting a cluster that is already being deleted is accepted too.
func (s *Starter) Delete(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	var status workflows.ClusterStatus
	handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.ClusterWorkflowID(name),
		UpdateName:   workflows.DeleteUpdate,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, &status)
	}
	switch {
	case isNotFound(err) && strings.Contains(err.Error(), "already completed"):
		// The workflow only completes once deleted.
		return s.Status(ctx, name)
	case isNotFound(err):
		return status, &NotFoundError{Name: name}
	case err != nil:
		return status, fmt.Errorf("delete %s: %w", name, err)
	}
	return status, nil
}
