package cluster

import (
	"slices"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// preview is what a change would do, worked out on the state as it is and changing
// nothing: the validator's refusal, or the members removed and added role by role, and the
// batches a rollout would take, as the executor would take them if every update succeeds.
func (u *updates) preview(req workflows.PreviewRequest) workflows.Preview {
	var next spec.Cluster
	var err error
	switch {
	case req.Spec != nil:
		next = *req.Spec
		err = u.validateApply(workflows.ApplyRequest{Spec: next})
	default:
		next = resized(u.w.spec, workflows.ResizeRequest{Counts: req.Counts})
		err = u.validateResize(workflows.ResizeRequest{Counts: req.Counts, Remove: req.Remove})
	}
	if err != nil {
		return workflows.Preview{Refused: flow.ErrorMessage(err)}
	}
	summary := describeChange(u.w.spec, next)
	if summary == "" {
		return workflows.Preview{}
	}
	state := u.w.state
	if len(req.Remove) > 0 {
		// A copy: the query changes nothing.
		state.Roles = slices.Clone(state.Roles)
		for i := range state.Roles {
			state.Roles[i].Members = slices.Clone(state.Roles[i].Members)
		}
		markLeaving(state.Roles, req.Remove)
	}
	return rollout.Preview(&state, u.w.spec, next, summary)
}
