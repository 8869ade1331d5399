package health

import (
	"time"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// Watch is the cluster's one health timer. Members' timers are deadlines in the
// state (MemberHealth.Due), so one Temporal timer, set for the nearest of them or the next
// reconcile, serves them all and survives continue-as-new. A health change wakes it to
// re-aim.
func (hm *Machine) Watch(ctx workflow.Context, c Cluster) {
	nextReconcile := workflow.Now(ctx).Add(c.Desired().ReconcileInterval())
	for !c.Deleting() {
		wake := nextReconcile
		if due, ok := NextDue(c.State().Roles); ok && due.Before(wake) {
			wake = due
		}
		seen := hm.version
		_, err := workflow.AwaitWithTimeout(ctx, max(wake.Sub(workflow.Now(ctx)), time.Millisecond), func() bool {
			return hm.version != seen || c.Deleting()
		})
		if err != nil || c.Deleting() {
			return
		}
		if c.InMaintenance() {
			// Timers that expire meanwhile fire once it ends, and a reconcile checks the
			// members against their hosts at once: they may have moved servers.
			if err := workflow.Await(ctx, func() bool { return !c.InMaintenance() || c.Deleting() }); err != nil {
				return
			}
			nextReconcile = workflow.Now(ctx)
			continue
		}
		now := workflow.Now(ctx)
		hm.fireDue(ctx, c, now)
		if !now.Before(nextReconcile) {
			hm.Reconcile(ctx, c)
			hm.reconciles++
			nextReconcile = workflow.Now(ctx).Add(c.Desired().ReconcileInterval())
		}
	}
}

// fireDue raises HealthTimeout for every member whose timer has expired.
func (hm *Machine) fireDue(ctx workflow.Context, c Cluster, now time.Time) {
	for i := range c.State().Roles {
		rs := &c.State().Roles[i]
		for j := range rs.Members {
			m := &rs.Members[j]
			if !TimerArmed(rs, m) || m.Health.Due.After(now) {
				continue
			}
			hm.Step(ctx, c, rs, m, workflows.MemberEvent{Member: m.Name, Event: plan.HealthTimeout, Reason: TimeoutReason(m), Source: "clusterflow"})
		}
	}
}
