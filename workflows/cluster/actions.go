package cluster

import (
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// validateRunAction refuses an action while another is asked for or running: one at a
// time, so that their results read plainly.
func (u *updates) validateRunAction(req workflows.ActionRequest) error {
	for _, a := range u.w.state.Actions {
		if a.State == workflows.ActionPending || a.State == workflows.ActionRunning {
			return flow.Refused(apperr.Conflict, "run refused: action %s (%d) is %s on cluster %s; run the next once it is done", a.Action, a.ID, a.State, u.w.state.Name)
		}
	}
	_, err := u.actionTargets(req)
	return err
}

// onRunAction records the action; the next pass runs it.
func (u *updates) onRunAction(ctx workflow.Context, req workflows.ActionRequest) (workflows.ActionStatus, error) {
	if _, err := u.actionTargets(req); err != nil {
		return workflows.ActionStatus{}, err
	}
	id := 1
	if n := len(u.w.state.Actions); n > 0 {
		id = u.w.state.Actions[n-1].ID + 1
	}
	a := workflows.ActionStatus{
		ID: id, Action: req.Action, Role: req.Role, Members: req.Members, Params: req.Params, Parallel: req.Parallel,
		By: spec.Clip(req.By, 256), State: workflows.ActionPending, Asked: workflow.Now(ctx),
	}
	u.w.state.Actions = append(u.w.state.Actions, a)
	if n := len(u.w.state.Actions); n > keptActions {
		u.w.state.Actions = slices.Clone(u.w.state.Actions[n-keptActions:])
	}
	u.w.NewGeneration(fmt.Sprintf("action %s (%d)", req.Action, id))
	u.w.Touch(ctx)
	return a, nil
}

// runActions runs the actions asked for, in order, each on its members in every role at
// once. A failed run is reported, not retried; its member stays as it was.
func (e *executor) runActions(ctx workflow.Context) {
	for i := range e.w.state.Actions {
		a := &e.w.state.Actions[i]
		if a.State != workflows.ActionPending || ctx.Err() != nil {
			continue
		}
		if workflow.GetVersion(ctx, change.Rollouts, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return
		}
		req := workflows.ActionRequest{Action: a.Action, Role: a.Role, Members: a.Members, Params: a.Params}
		targets, err := e.w.updates.actionTargets(req)
		if err != nil {
			a.State, a.Ended = workflows.ActionCanceled, workflow.Now(ctx)
			a.Results = []workflows.ActionResult{{Detail: "not run: " + flow.ErrorMessage(err)}}
			continue
		}
		a.State = workflows.ActionRunning
		var work []plan.RoleWork
		for _, role := range slices.Sorted(maps.Keys(targets)) {
			rs := e.w.state.Role(role)
			var members []plan.Member
			for _, name := range targets[role] {
				members = append(members, *rs.Member(name))
			}
			work = append(work, plan.RoleWork{Role: role, Members: members, Batch: fmt.Sprintf("a%d", a.ID), MaxInFlight: a.Parallel,
				Action: &plan.ActionCall{Name: a.Action, Params: a.Params}})
		}
		e.w.Touch(ctx)
		e.runPass(ctx, &e.w.spec, plan.Given(plan.OpAction, work), nil)
		e.noteActionResults(a, targets)
		a.State, a.Ended = workflows.ActionDone, workflow.Now(ctx)
		if ctx.Err() != nil {
			a.State = workflows.ActionCanceled
		}
		e.w.Touch(ctx)
	}
}

// noteActionResults reads each member's outcome of the action, failures first, and puts
// a member whose run failed back to ready: an action changes nothing of its membership.
func (e *executor) noteActionResults(a *workflows.ActionStatus, targets map[string][]string) {
	event := spec.Event(a.Action)
	var failed, succeeded []workflows.ActionResult
	for _, role := range slices.Sorted(maps.Keys(targets)) {
		rs := e.w.state.Role(role)
		for _, name := range targets[role] {
			m := rs.Member(name)
			if m == nil || m.Event != event {
				continue // never ran: the run was cancelled first
			}
			r := workflows.ActionResult{Member: name, OK: m.State != plan.MemberConfigError, Detail: m.Detail, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail}
			m.StdoutTail, m.StderrTail = "", "" // the results keep them: a member's are for its trouble
			a.Ran++
			if r.OK {
				a.Succeeded++
				succeeded = append(succeeded, r)
				continue
			}
			a.Failed++
			m.State = plan.MemberReady
			failed = append(failed, r)
		}
	}
	a.Results = slices.Concat(failed, succeeded)
	a.Results = a.Results[:min(len(a.Results), workflows.ReportNames)]
}

// keptActions bounds the actions the state remembers, newest last.
const keptActions = 10
