package cluster

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// healthMachine is member health: it feeds the events reported of members, and those it
// raises itself, to each member's state machine (health_table.go), keeps their timers and
// history, reconciles the members against what the hosts hold, and has a member that is
// gone replaced. What it needs of the workflow it is given: showing changes (touch,
// setPhase), the role runner (to stop a member being set up), and reaching every host.
type healthMachine struct {
	*cluster
	runner   *role.Runner
	touch    func(workflow.Context)
	setPhase func(ctx workflow.Context, phase workflows.Phase, message string)
}

// stepHealth feeds one event to a member's state machine (workflows/health) and carries
// out the transition: a replacement when the member enters replacing, a setup elsewhere
// when it goes back to pending.
func (hm *healthMachine) stepHealth(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult {
	rollout.NoteHealthReport(&hm.state, m.Name, ev)
	if hm.deleteRequested {
		return workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State, Ignored: fmt.Sprintf("cluster %s is being deleted", hm.state.Name)}
	}
	now := workflow.Now(ctx)
	if hm.inMaintenance() {
		result := health.Hold(m, ev, hm.state.Maintenance.Describe(), now)
		hm.logger.Info("Member health event held for maintenance", "Member", m.Name, "Event", ev.Event, "Source", ev.Source)
		hm.touch(ctx)
		return result
	}
	r, _ := hm.RoleSpec(rs.Name)
	given := health.Given{
		Paused:         health.ReplacementPaused(rs, m, health.UnavailableLimit(rs, r)),
		SetUpElsewhere: hm.setUpElsewhere,
		// Asked only of a watch-only report, which no history of before it holds.
		WatchOnly: ev.WatchOnly && workflow.GetVersion(ctx, change.WatchOnlyReports, workflow.DefaultVersion, 1) >= 1,
	}
	result := health.Step(m, ev, r.Health.WithDefaults(), given, now)
	if result.Ignored != "" {
		hm.logger.Info("Member health event ignored", "Member", m.Name, "State", m.State, "Event", ev.Event, "Source", ev.Source)
		return result
	}
	hm.logger.Info("Member health", "Member", m.Name, "From", result.From, "To", result.To, "Event", ev.Event, "Reason", ev.Reason, "Source", ev.Source)
	switch result.To {
	case plan.MemberReplacing:
		hm.replace(rs, m, ev)
	case plan.MemberPending:
		hm.rehome(ctx, rs, m, result.From, ev)
	}
	hm.healthChanged(ctx)
	return result
}

// healthChanged wakes the health watcher, which rearms its timer, and re-evaluates the
// meltdown guard and the phase.
func (hm *healthMachine) healthChanged(ctx workflow.Context) {
	hm.healthVersion++
	hm.refreshMeltdown()
	hm.showHealth(ctx)
	hm.touch(ctx)
}

// failedStartsAreDown makes each member whose start failed down, rather than failed: its
// setup stands; only its services are down, and health takes over.
func (hm *healthMachine) failedStartsAreDown(ctx workflow.Context, work []plan.RoleWork) {
	for _, rw := range work {
		for _, m := range rw.Members {
			rs, live := hm.state.FindMember(m.Name)
			if live == nil || live.State != plan.MemberConfigError || live.Event != spec.EventStart {
				continue
			}
			why := live.Detail
			live.State = plan.MemberReady
			hm.stepHealth(ctx, rs, live, workflows.MemberEvent{Member: m.Name, Event: plan.HealthDown, Reason: why, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
}
