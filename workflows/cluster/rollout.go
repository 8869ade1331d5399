package cluster

import (
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// A rollout moves the members of the roles an apply changed to the new revision, role by
// role in dependency order: canaries first, alone, then batches of the role's maxInFlight,
// never taking the role past its maxUnavailable. Each updated member is watched before the
// next batch starts; a down or unhealthy report about it, its host lost, or a failed
// upgrade pauses the rollout, and members not yet moved stay on the revision they ran. A
// rollout is part of the pass that converges to its generation, so a resize, a cancel, a
// delete or maintenance act on it as on any operation.

// Handlers, registered with the other updates (changes.go).

func (c *cluster) validateRolloutPause() error {
	if err := c.refuseChange("rollout pause"); err != nil {
		return err
	}
	switch ro := c.state.Rollout; {
	case !rollout.Running(&c.state):
		return flow.Refused(apperr.Conflict, "rollout pause refused: cluster %s has no rollout in progress", c.state.Name)
	case ro.Paused != "":
		return flow.Refused(apperr.Conflict, "rollout pause refused: the %s is already paused: %s", ro.What(), ro.Paused)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutPause(ctx workflow.Context) (workflows.RolloutStatus, error) {
	w.state.Rollout.Paused, w.state.Rollout.Member, w.state.Rollout.PausedAt = "paused by an operator", "", workflow.Now(ctx)
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}

func (c *cluster) validateRolloutResume() error {
	if err := c.refuseChange("rollout resume"); err != nil {
		return err
	}
	if !rollout.Running(&c.state) || c.state.Rollout.Paused == "" {
		return flow.Refused(apperr.Conflict, "rollout resume refused: cluster %s has no paused rollout", c.state.Name)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutResume(ctx workflow.Context) (workflows.RolloutStatus, error) {
	ro := w.state.Rollout
	ro.Paused, ro.Member, ro.Tripped, ro.TrippedBy = "", "", "", ""
	w.NewGeneration(ro.What() + " resumed")
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}

func (c *cluster) validateRolloutUndo(req workflows.UndoRequest) error {
	if err := c.refuseChange("rollout undo"); err != nil {
		return err
	}
	next, err := rollout.UndoSpec(&c.state, c.spec, req.ToRevision)
	if err != nil {
		return err
	}
	return c.validateApply(workflows.ApplyRequest{Spec: next})
}

func (w *clusterWorkflow) onRolloutUndo(ctx workflow.Context, req workflows.UndoRequest) (workflows.RolloutStatus, error) {
	to := req.ToRevision
	if to == 0 {
		to = w.state.Revision - 1
	}
	next, err := rollout.UndoSpec(&w.state, w.spec, to)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	w.applySpec(ctx, next, req.By, fmt.Sprintf("undo to revision %d", to))
	return rollout.Answer(&w.state, w.spec), nil
}

// The rollout pass.

func (c *cluster) validateRestart(req workflows.RestartRequest) error {
	_, err := c.restartTargets(req)
	return err
}

func (w *clusterWorkflow) onRestart(ctx workflow.Context, req workflows.RestartRequest) (workflows.RolloutStatus, error) {
	targets, err := w.restartTargets(req)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	rollout.Start(&w.state, &workflows.RolloutRecord{Revision: w.state.Revision, Restart: true, Started: workflow.Now(ctx)})
	total := 0
	for _, role := range slices.Sorted(maps.Keys(targets)) {
		rs := w.state.Role(role)
		for _, name := range targets[role] {
			rs.Member(name).RestartDue = true
			total++
		}
	}
	w.NewGeneration(fmt.Sprintf("rolling restart of %d members", total))
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}
