package role

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// How a role child takes members away: decommission, then teardown and removal.

// decommissionAll runs decommission on members about to leave, at most maxInFlight at
// once. It changes no member's state: a member decommissioned is torn down next, and one
// whose decommission failed stays, with its output, until a retry.
func (r *roleWorkflow) decommissionAll(ctx workflow.Context) {
	r.forEachMember(ctx, r.limit(), func(ctx workflow.Context, i int) {
		m := &r.members[i]
		r.set(ctx, i, m.State, spec.EventDecommission, "running decommission ("+m.RemovedFor+")")
		res, err := r.runScript(ctx, i, spec.EventDecommission)
		switch {
		case flow.IsCanceled(err):
			r.set(ctx, i, m.State, spec.EventDecommission, "decommission canceled")
		case err != nil:
			r.set(ctx, i, m.State, spec.EventDecommission, "decommission failed: "+flow.ErrorMessage(err))
			m.Decommission = plan.DecommissionFailed
			if r.tailed < tailsPerChild {
				r.tailed++
				m.StdoutTail, m.StderrTail = flow.ScriptTails(err)
			}
		default:
			r.set(ctx, i, m.State, spec.EventDecommission, fmt.Sprintf("decommissioned in %s", res.Duration.Round(time.Millisecond)))
			m.Decommission = plan.DecommissionDone
		}
	})
}

// teardownAll tears members down in parallel. Teardown is best effort: a failing teardown
// script is recorded, and the member is removed all the same.
func (r *roleWorkflow) teardownAll(ctx workflow.Context) {
	r.forEachMember(ctx, r.in.MaxInFlight, r.teardown)
}

func (r *roleWorkflow) teardown(ctx workflow.Context, i int) {
	m := &r.members[i]
	var teardownErr error
	setUp := m.HasSetup()
	lifecycle := workflow.GetVersion(ctx, change.Lifecycle, workflow.DefaultVersion, 1) >= 1
	if lifecycle {
		setUp = m.ConfigureRan()
	}
	if setUp && r.in.Role.Wants(spec.EventTeardown) {
		r.set(ctx, i, plan.MemberDeleting, spec.EventTeardown, "running teardown")
		_, teardownErr = r.runScript(ctx, i, spec.EventTeardown)
		if lifecycle && flow.HasErrorType(teardownErr, backend.ErrNoSandbox) {
			teardownErr = nil // its setup was stopped before it made anything: nothing to undo
		}
	} else {
		r.set(ctx, i, plan.MemberDeleting, m.Event, "removing")
	}
	if err := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithQuickActivity(ctx, "remove "+m.Name), m.Host), flow.ActRemoveMember, r.ref(i)).Get(ctx, nil); err != nil {
		r.set(ctx, i, plan.MemberDeleting, m.Event, "could not remove sandbox: "+flow.ErrorMessage(err))
		return
	}
	r.set(ctx, i, plan.MemberDeleted, m.Event, "")
	if teardownErr != nil {
		m.Detail = workflows.TeardownFailed + flow.ErrorMessage(teardownErr)
		// Tails for the first few only, as for failed configures: a wide role's failed
		// teardowns would make the child's result too large to carry.
		if !lifecycle || r.tailed < tailsPerChild {
			r.tailed++
			m.StdoutTail, m.StderrTail = flow.ScriptTails(teardownErr)
		}
	}
}
