package starter

import (
	"context"
	"fmt"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
)

// Maintenance says whether the fleet's maintenance is on; off when it was never set.
func (s *Starter) Maintenance(ctx context.Context) (workflows.Maintenance, error) {
	resp, err := s.client.QueryWorkflow(ctx, workflows.MaintenanceWorkflowID, "", workflows.MaintenanceQuery)
	switch {
	case isNotFound(err):
		return workflows.Maintenance{}, nil
	case err != nil:
		return workflows.Maintenance{}, fmt.Errorf("read maintenance: %w", err)
	}
	var m workflows.Maintenance
	if err := resp.Get(&m); err != nil {
		return workflows.Maintenance{}, fmt.Errorf("read maintenance: %w", err)
	}
	return m, nil
}

// SetMaintenance turns maintenance on, with a reason, or off. It returns once every
// running cluster and the host registry have been told.
func (s *Starter) SetMaintenance(ctx context.Context, on bool, reason string) (workflows.MaintenanceResult, error) {
	var res workflows.MaintenanceResult
	err := s.updateWithStart(ctx, entity{workflows.MaintenanceWorkflowID, workflows.MaintenanceWorkflowName, workflows.MaintenanceInput{}, "clusterflow maintenance flag"},
		workflows.SetMaintenanceUpdate, workflows.MaintenanceRequest{On: on, Reason: reason}, &res)
	return res, updateError("set maintenance", err)
}

// refuseInMaintenance refuses what the starter is about to do while maintenance is on.
// Clusters refuse changes themselves too; this covers what reaches no cluster (a deploy, a
// drain) and names the maintenance before anything is sent.
func (s *Starter) refuseInMaintenance(ctx context.Context, what string) error {
	// The flag answers through a worker: without one, say so rather than hang here.
	queryCtx, cancel := context.WithTimeout(ctx, hostsQueryLimit)
	defer cancel()
	m, err := s.Maintenance(queryCtx)
	if err != nil && queryCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return noWorker(s.taskQueue, err)
	}
	if err != nil {
		return err
	}
	if m.On {
		return m.Refusal(what)
	}
	return nil
}

// requireMaintenance refuses what may only run in maintenance.
func (s *Starter) requireMaintenance(ctx context.Context, what string) (workflows.Maintenance, error) {
	m, err := s.Maintenance(ctx)
	if err != nil {
		return m, err
	}
	if !m.On {
		return m, apperr.Errorf(apperr.Conflict, "%s refused: maintenance is off on this server; run `clusterflow maintenance on --reason …` first", what)
	}
	return m, nil
}
