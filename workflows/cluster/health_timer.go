package cluster

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// watchHealth is the cluster's one health timer. Members' timers are deadlines in the
// state (MemberHealth.Due), so one Temporal timer, set for the nearest of them or the next
// reconcile, serves them all and survives continue-as-new. A health change wakes it to
// re-aim.
func (rx *reactor) watchHealth(ctx workflow.Context) {
	nextReconcile := workflow.Now(ctx).Add(rx.w.spec.ReconcileInterval())
	for !rx.w.deleteRequested {
		wake := nextReconcile
		if due, ok := health.NextDue(rx.w.state.Roles); ok && due.Before(wake) {
			wake = due
		}
		seen := rx.w.healthVersion
		_, err := workflow.AwaitWithTimeout(ctx, max(wake.Sub(workflow.Now(ctx)), time.Millisecond), func() bool {
			return rx.w.healthVersion != seen || rx.w.deleteRequested
		})
		if err != nil || rx.w.deleteRequested {
			return
		}
		if rx.w.inMaintenance() {
			// Timers that expire meanwhile fire once it ends, and a reconcile checks the
			// members against their hosts at once: they may have moved servers.
			if err := workflow.Await(ctx, func() bool { return !rx.w.inMaintenance() || rx.w.deleteRequested }); err != nil {
				return
			}
			nextReconcile = workflow.Now(ctx)
			continue
		}
		now := workflow.Now(ctx)
		rx.fireDue(ctx, now)
		if !now.Before(nextReconcile) {
			rx.reconcile(ctx)
			rx.w.reconcilesThisRun++
			nextReconcile = workflow.Now(ctx).Add(rx.w.spec.ReconcileInterval())
		}
	}
}

// fireDue raises HealthTimeout for every member whose timer has expired.
func (rx *reactor) fireDue(ctx workflow.Context, now time.Time) {
	for i := range rx.w.state.Roles {
		rs := &rx.w.state.Roles[i]
		for j := range rs.Members {
			m := &rs.Members[j]
			if !health.TimerArmed(rs, m) || m.Health.Due.After(now) {
				continue
			}
			rx.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: m.Name, Event: plan.HealthTimeout, Reason: health.TimeoutReason(m), Source: "clusterflow"})
		}
	}
}
