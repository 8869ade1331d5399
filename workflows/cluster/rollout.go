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

func (u *updates) validateRolloutPause() error {
	if err := u.refuseChange("rollout pause"); err != nil {
		return err
	}
	switch ro := u.w.state.Rollout; {
	case !rollout.Running(&u.w.state):
		return flow.Refused(apperr.Conflict, "rollout pause refused: cluster %s has no rollout in progress", u.w.state.Name)
	case ro.Paused != "":
		return flow.Refused(apperr.Conflict, "rollout pause refused: the %s is already paused: %s", ro.What(), ro.Paused)
	}
	return nil
}

func (u *updates) onRolloutPause(ctx workflow.Context) (workflows.RolloutStatus, error) {
	u.w.state.Rollout.Paused, u.w.state.Rollout.Member, u.w.state.Rollout.PausedAt = "paused by an operator", "", workflow.Now(ctx)
	u.w.Touch(ctx)
	return rollout.Answer(&u.w.state, u.w.spec), nil
}

func (u *updates) validateRolloutResume() error {
	if err := u.refuseChange("rollout resume"); err != nil {
		return err
	}
	if !rollout.Running(&u.w.state) || u.w.state.Rollout.Paused == "" {
		return flow.Refused(apperr.Conflict, "rollout resume refused: cluster %s has no paused rollout", u.w.state.Name)
	}
	return nil
}

func (u *updates) onRolloutResume(ctx workflow.Context) (workflows.RolloutStatus, error) {
	ro := u.w.state.Rollout
	ro.Paused, ro.Member, ro.Tripped, ro.TrippedBy = "", "", "", ""
	u.w.NewGeneration(ro.What() + " resumed")
	u.w.Touch(ctx)
	return rollout.Answer(&u.w.state, u.w.spec), nil
}

func (u *updates) validateRolloutUndo(req workflows.UndoRequest) error {
	if err := u.refuseChange("rollout undo"); err != nil {
		return err
	}
	next, err := rollout.UndoSpec(&u.w.state, u.w.spec, req.ToRevision)
	if err != nil {
		return err
	}
	return u.validateApply(workflows.ApplyRequest{Spec: next})
}

func (u *updates) onRolloutUndo(ctx workflow.Context, req workflows.UndoRequest) (workflows.RolloutStatus, error) {
	to := req.ToRevision
	if to == 0 {
		to = u.w.state.Revision - 1
	}
	next, err := rollout.UndoSpec(&u.w.state, u.w.spec, to)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	u.applySpec(ctx, next, req.By, fmt.Sprintf("undo to revision %d", to))
	return rollout.Answer(&u.w.state, u.w.spec), nil
}

// The rollout pass.

func (u *updates) validateRestart(req workflows.RestartRequest) error {
	_, err := u.restartTargets(req)
	return err
}

func (u *updates) onRestart(ctx workflow.Context, req workflows.RestartRequest) (workflows.RolloutStatus, error) {
	targets, err := u.restartTargets(req)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	rollout.Start(&u.w.state, &workflows.RolloutRecord{Revision: u.w.state.Revision, Restart: true, Started: workflow.Now(ctx)})
	total := 0
	for _, role := range slices.Sorted(maps.Keys(targets)) {
		rs := u.w.state.Role(role)
		for _, name := range targets[role] {
			rs.Member(name).RestartDue = true
			total++
		}
	}
	u.w.NewGeneration(fmt.Sprintf("rolling restart of %d members", total))
	u.w.Touch(ctx)
	return rollout.Answer(&u.w.state, u.w.spec), nil
}
