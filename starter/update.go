package starter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// Resize sets the member count of the named roles. It returns once the cluster has
// accepted the change, with the generation to wait for; a refusal is an *Error naming what was refused.
func (s *Starter) Resize(ctx context.Context, name string, counts []workflows.RoleCount) (workflows.ChangeResult, error) {
	return s.ResizeRemoving(ctx, name, counts, nil)
}

// ResizeRemoving is Resize that also takes the named members away (resize --remove): each
// role they are in shrinks by as many, and those members are the ones that go. A role given
// a count may not have members named too.
func (s *Starter) ResizeRemoving(ctx context.Context, name string, counts []workflows.RoleCount, remove []string) (workflows.ChangeResult, error) {
	var res workflows.ChangeResult
	req, err := s.resizeRequest(ctx, name, counts, remove)
	if err == nil {
		req, err = s.signResize(ctx, name, req)
	}
	if err != nil {
		return res, err
	}
	err = s.update(ctx, name, workflows.ResizeUpdate, &res, req)
	return res, err
}

// resizeRequest adds to counts each named member's role at its desired count less the
// members named in it. A name of no role of the cluster gets no count: the cluster refuses
// it by name.
func (s *Starter) resizeRequest(ctx context.Context, name string, counts []workflows.RoleCount, remove []string) (workflows.ResizeRequest, error) {
	req := workflows.ResizeRequest{Counts: counts, Remove: remove}
	if len(remove) == 0 {
		return req, nil
	}
	desired, err := s.DesiredSpec(ctx, name)
	if err != nil {
		return req, err
	}
	leaving := map[string]int{}
	for _, member := range remove {
		if role, _, ok := spec.ParseMemberName(name, member); ok {
			if _, known := desired.Spec.Role(role); known {
				leaving[role]++
			}
		}
	}
	req.Counts = slices.Clone(counts)
	for _, role := range slices.Sorted(maps.Keys(leaving)) {
		if slices.ContainsFunc(counts, func(c workflows.RoleCount) bool { return c.Role == role }) {
			return req, apperr.Errorf(apperr.Invalid, "%s=N and --remove of its members: give one or the other for role %s", role, role)
		}
		r, _ := desired.Spec.Role(role)
		req.Counts = append(req.Counts, workflows.RoleCount{Role: role, Members: r.Members - leaving[role]})
	}
	return req, nil
}

// Apply makes c the desired spec of the existing cluster of the same name. The spec must
// come from spec.Load or spec.Parse, which validated it.
func (s *Starter) Apply(ctx context.Context, c spec.Cluster) (workflows.ChangeResult, error) {
	return s.ApplyEdited(ctx, EditedSpec{Spec: c})
}

// Retry runs again the failed configure of the named members in config_error (none: of
// every one), and returns the generation that does it.
func (s *Starter) Retry(ctx context.Context, name string, members []string) (workflows.ChangeResult, error) {
	var res workflows.ChangeResult
	err := s.update(ctx, name, workflows.RetryUpdate, &res, workflows.RetryRequest{Members: members})
	return res, err
}

// Cancel stops the cluster's operation in progress and returns the status it had.
func (s *Starter) Cancel(ctx context.Context, name string) (workflows.ClusterStatus, error) {
	var status workflows.ClusterStatus
	err := s.update(ctx, name, workflows.CancelUpdate, &status)
	return status, err
}

// update runs an update on the cluster's workflow and waits for its result, which every
// cluster update gives as soon as it is accepted. An update that reached a run as it
// continued as new is aborted unseen; it is sent again, under the same update ID, so that
// it is applied once.
func (s *Starter) update(ctx context.Context, name, update string, result any, args ...any) error {
	id := uuid.NewString()
	for attempt := 1; ; attempt++ {
		handle, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   workflows.ClusterWorkflowID(name),
			UpdateID:     id,
			UpdateName:   update,
			Args:         args,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = handle.Get(ctx, result)
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			if code, ok := apperr.Known(appErr.Type()); ok {
				return apperr.Errorf(code, "%s", appErr.Message()) // a validator's refusal
			}
		}
		err = s.clusterError(ctx, name, update, err)
		if !errors.Is(err, errNewRun) || attempt == 3 {
			return err
		}
	}
}

// errNewRun marks a "not found" from a cluster whose workflow is running: the run the
// request reached has just continued as new.
var errNewRun = errors.New("the cluster's workflow moved to a new run")

// clusterError names what went wrong reaching a cluster's workflow: no such cluster, a
// closed one (its workflow only completes once the cluster is deleted), or anything else.
// The server says "not found" for both of the first two, in words that vary with the
// moment (an update admitted while the workflow closes is "aborted by closing workflow"),
// so it is asked which it is.
func (s *Starter) clusterError(ctx context.Context, name, action string, err error) error {
	switch {
	case err == nil:
		return nil
	case !isNotFound(err):
		return fmt.Errorf("%s %s: %w", action, name, err)
	}
	desc, descErr := s.client.DescribeWorkflowExecution(ctx, workflows.ClusterWorkflowID(name), "")
	switch {
	case isNotFound(descErr):
		return notFound(name)
	case descErr != nil:
		return fmt.Errorf("%s %s: %w", action, name, err)
	}
	switch status := desc.GetWorkflowExecutionInfo().GetStatus(); status {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return fmt.Errorf("%s %s: %w: %w", action, name, errNewRun, err)
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return deleted(name)
	default:
		return apperr.Errorf(apperr.Gone, "cluster %q takes no more changes: its workflow was %s (see `clusterflow status %s`)", name, closedHow(status), name)
	}
}

// closedHow says how a workflow closed, in a word: "terminated", "timed_out" ….
func closedHow(status enums.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_"))
}
