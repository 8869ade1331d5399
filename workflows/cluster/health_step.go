package cluster

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// stepHealth feeds one event to a member's state machine (workflows/health) and carries
// out the transition: a replacement when the member enters replacing, a setup elsewhere
// when it goes back to pending.
func (rx *reactor) stepHealth(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult {
	rollout.NoteHealthReport(&rx.w.state, m.Name, ev)
	if rx.w.deleteRequested {
		return workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State, Ignored: fmt.Sprintf("cluster %s is being deleted", rx.w.state.Name)}
	}
	now := workflow.Now(ctx)
	if rx.w.inMaintenance() {
		result := health.Hold(m, ev, rx.w.state.Maintenance.Describe(), now)
		rx.w.logger.Info("Member health event held for maintenance", "Member", m.Name, "Event", ev.Event, "Source", ev.Source)
		rx.w.Touch(ctx)
		return result
	}
	r, _ := rx.w.RoleSpec(rs.Name)
	given := health.Given{
		Paused:         health.ReplacementPaused(rs, m, health.UnavailableLimit(rs, r)),
		SetUpElsewhere: rx.w.setUpElsewhere,
		// Asked only of a watch-only report, which no history of before it holds.
		WatchOnly: ev.WatchOnly && workflow.GetVersion(ctx, change.WatchOnlyReports, workflow.DefaultVersion, 1) >= 1,
	}
	result := health.Step(m, ev, r.Health.WithDefaults(), given, now)
	if result.Ignored != "" {
		rx.w.logger.Info("Member health event ignored", "Member", m.Name, "State", m.State, "Event", ev.Event, "Source", ev.Source)
		return result
	}
	rx.w.logger.Info("Member health", "Member", m.Name, "From", result.From, "To", result.To, "Event", ev.Event, "Reason", ev.Reason, "Source", ev.Source)
	switch result.To {
	case plan.MemberReplacing:
		rx.replace(rs, m, ev)
	case plan.MemberPending:
		rx.rehome(ctx, rs, m, result.From, ev)
	}
	rx.healthChanged(ctx)
	return result
}

// healthChanged wakes the health watcher, which rearms its timer, and re-evaluates the
// meltdown guard and the phase.
func (rx *reactor) healthChanged(ctx workflow.Context) {
	rx.w.healthVersion++
	rx.w.refreshMeltdown()
	rx.showHealth(ctx)
	rx.w.Touch(ctx)
}

// failedStartsAreDown makes each member whose start failed down, rather than failed: its
// setup stands; only its services are down, and health takes over.
func (rx *reactor) failedStartsAreDown(ctx workflow.Context, work []plan.RoleWork) {
	for _, rw := range work {
		for _, m := range rw.Members {
			rs, live := rx.w.state.FindMember(m.Name)
			if live == nil || live.State != plan.MemberConfigError || live.Event != spec.EventStart {
				continue
			}
			why := live.Detail
			live.State = plan.MemberReady
			rx.stepHealth(ctx, rs, live, workflows.MemberEvent{Member: m.Name, Event: plan.HealthDown, Reason: why, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
}
