package cluster

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// receiveMemberEvents applies member-event signals. A signal cannot be refused, so one
// about an unknown member or event is logged and dropped; it never fails the workflow.
func (hm *healthMachine) receiveMemberEvents(ctx workflow.Context) {
	events := workflow.GetSignalChannel(ctx, workflows.MemberEventSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var ev workflows.MemberEvent
			events.Receive(ctx, &ev)
			if err := hm.checkMemberEvent(ev); err != nil {
				hm.logger.Warn("Ignoring member-event signal", "Member", spec.Clip(ev.Member, spec.MaxMemberNameLength), "Event", spec.Clip(string(ev.Event), 32), "Error", err)
				continue
			}
			// A signal cannot be refused: text past the limit is cut rather than kept whole.
			ev.Reason, ev.Source = spec.Clip(ev.Reason, spec.MaxTextBytes), spec.Clip(ev.Source, spec.MaxTextBytes)
			hm.onMemberEvent(ctx, ev)
		}
	})
}

func (hm *healthMachine) onMemberEvent(ctx workflow.Context, ev workflows.MemberEvent) (workflows.MemberEventResult, error) {
	rs, m := hm.state.FindMember(ev.Member)
	return hm.stepHealth(ctx, rs, m, ev), nil
}

// onResume lifts the meltdown guard of every paused role, until the role recovers, and
// returns flapping members to their state machine's care.
func (hm *healthMachine) onResume(ctx workflow.Context) (workflows.ResumeResult, error) {
	var result workflows.ResumeResult
	for i := range hm.state.Roles {
		rs := &hm.state.Roles[i]
		if rs.Paused != "" {
			rs.Paused, rs.Resumed = "", true
			result.Roles = append(result.Roles, rs.Name)
		}
		for j := range rs.Members {
			if m := &rs.Members[j]; m.State == plan.MemberFlapping {
				hm.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: m.Name, Event: plan.HealthResume, Reason: "resumed by an operator", Source: "cli"})
				result.Members = append(result.Members, m.Name)
			}
		}
	}
	hm.healthChanged(ctx)
	hm.logger.Info("Resumed", "Roles", result.Roles, "Members", spec.Some(result.Members, workflows.ReportNames))
	result.Members, result.MoreMembers = workflows.CapNames(result.Members)
	return result, nil
}

func (hm *healthMachine) onReconcile(ctx workflow.Context) (workflows.ReconcileReport, error) {
	return hm.reconcile(ctx), nil
}

// hasResumable reports whether a resume would change anything.
func (c *cluster) hasResumable() bool {
	return slices.ContainsFunc(c.state.Roles, func(rs plan.RoleState) bool {
		return rs.Paused != "" || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberFlapping })
	})
}
