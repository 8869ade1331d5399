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
func (rx *reactor) receiveMemberEvents(ctx workflow.Context) {
	events := workflow.GetSignalChannel(ctx, workflows.MemberEventSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var ev workflows.MemberEvent
			events.Receive(ctx, &ev)
			if err := rx.checkMemberEvent(ev); err != nil {
				rx.w.logger.Warn("Ignoring member-event signal", "Member", spec.Clip(ev.Member, spec.MaxMemberNameLength), "Event", spec.Clip(string(ev.Event), 32), "Error", err)
				continue
			}
			// A signal cannot be refused: text past the limit is cut rather than kept whole.
			ev.Reason, ev.Source = spec.Clip(ev.Reason, spec.MaxTextBytes), spec.Clip(ev.Source, spec.MaxTextBytes)
			rx.onMemberEvent(ctx, ev)
		}
	})
}

func (rx *reactor) onMemberEvent(ctx workflow.Context, ev workflows.MemberEvent) (workflows.MemberEventResult, error) {
	rs, m := rx.w.state.FindMember(ev.Member)
	return rx.stepHealth(ctx, rs, m, ev), nil
}

// onResume lifts the meltdown guard of every paused role, until the role recovers, and
// returns flapping members to their state machine's care.
func (rx *reactor) onResume(ctx workflow.Context) (workflows.ResumeResult, error) {
	var result workflows.ResumeResult
	for i := range rx.w.state.Roles {
		rs := &rx.w.state.Roles[i]
		if rs.Paused != "" {
			rs.Paused, rs.Resumed = "", true
			result.Roles = append(result.Roles, rs.Name)
		}
		for j := range rs.Members {
			if m := &rs.Members[j]; m.State == plan.MemberFlapping {
				rx.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: m.Name, Event: plan.HealthResume, Reason: "resumed by an operator", Source: "cli"})
				result.Members = append(result.Members, m.Name)
			}
		}
	}
	rx.healthChanged(ctx)
	rx.w.logger.Info("Resumed", "Roles", result.Roles, "Members", spec.Some(result.Members, workflows.ReportNames))
	result.Members, result.MoreMembers = workflows.CapNames(result.Members)
	return result, nil
}

func (rx *reactor) onReconcile(ctx workflow.Context) (workflows.ReconcileReport, error) {
	return rx.reconcile(ctx), nil
}

// hasResumable reports whether a resume would change anything.
func (rx *reactor) hasResumable() bool {
	return slices.ContainsFunc(rx.w.state.Roles, func(rs plan.RoleState) bool {
		return rs.Paused != "" || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberFlapping })
	})
}
