package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// RefusedError is a request the cluster's workflow refused before anything changed.
type RefusedError struct {
	Name, Reason string
}

func (e *RefusedError) Error() string { return e.Reason }

// DeletedError says the cluster is gone, so it takes no more changes.
type DeletedError struct{ Name string }

func (e *DeletedError) Error() string {
	return fmt.Sprintf("cluster %q is deleted; deploy it again to use the name", e.Name)
}

// Resize sets the member count of the named roles. It returns once the cluster has
// accepted the change, with the generation to wait for; a refusal is a *RefusedError.
func (s *Starter) Resize(ctx context.Context, name string, counts []workflows.RoleCount) (workflows.ChangeResult, error) {
	var res workflows.ChangeResult
	err := s.update(ctx, name, workflows.ResizeUpdate, &res, workflows.ResizeRequest{Counts: counts})
	return res, err
}

// Apply makes c the desired spec of the existing cluster of the same name. The spec must
// come from spec.Load or spec.Parse, which validated it.
func (s *Starter) Apply(ctx context.Context, c spec.Cluster) (workflows.ChangeResult, error) {
	var res workflows.ChangeResult
	err := s.update(ctx, c.Name, workflows.ApplyUpdate, &res, workflows.ApplyRequest{Spec: c})
	return res, err
}

// Cancel stops the cluster's operation in progress and returns the status it had.
func (s *Starter) Cancel(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	var status workflows.ClusterStatus
	err := s.update(ctx, name, workflows.CancelUpdate, &status)
	return status, err
}

// update runs an update on the cluster's workflow and waits for its result, which every
// cluster update gives as soon as it is accepted.
func (s *Starter) update(ctx context.Context, name, update string, result any, args ...any) error {
	handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.ClusterWorkflowID(name),
		UpdateName:   update,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, result)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == workflows.RefusedErrorType {
		return &RefusedError{Name: name, Reason: appErr.Message()}
	}
	return clusterError(name, update, err)
}

// clusterError names what went wrong reaching a cluster's workflow: no such cluster, a
// deleted one (its workflow only completes once deleted), or anything else.
func clusterError(name, action string, err error) error {
	switch {
	case err == nil:
		return nil
	case isNotFound(err) && strings.Contains(err.Error(), "already completed"):
		return &DeletedError{Name: name}
	case isNotFound(err):
		return &NotFoundError{Name: name}
	}
	return fmt.Errorf("%s %s: %w", action, name, err)
}
