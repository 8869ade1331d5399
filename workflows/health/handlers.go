package health

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// ReceiveEvents applies member-event signals. A signal cannot be refused, so one
// about an unknown member or event is logged and dropped; it never fails the workflow.
func (hm *Machine) ReceiveEvents(ctx workflow.Context, c Cluster) {
	events := workflow.GetSignalChannel(ctx, workflows.MemberEventSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var ev workflows.MemberEvent
			events.Receive(ctx, &ev)
			if err := CheckEvent(c.State(), ev); err != nil {
				c.Logger().Warn("Ignoring member-event signal", "Member", spec.Clip(ev.Member, spec.MaxMemberNameLength), "Event", spec.Clip(string(ev.Event), 32), "Error", err)
				continue
			}
			// A signal cannot be refused: text past the limit is cut rather than kept whole.
			ev.Reason, ev.Source = spec.Clip(ev.Reason, spec.MaxTextBytes), spec.Clip(ev.Source, spec.MaxTextBytes)
			// A member's host reports its checks by update, which can refuse a stale one.
			ev.Check = nil
			hm.Report(ctx, c, ev)
		}
	})
}

// Report feeds an event reported of a member to its state machine.
func (hm *Machine) Report(ctx workflow.Context, c Cluster, ev workflows.MemberEvent) workflows.MemberEventResult {
	rs, m := c.State().FindMember(ev.Member)
	return hm.Step(ctx, c, rs, m, ev)
}

// Resume lifts the meltdown guard of every paused role, until the role recovers, and
// returns flapping members to their state machine's care.
func (hm *Machine) Resume(ctx workflow.Context, c Cluster) workflows.ResumeResult {
	var result workflows.ResumeResult
	for i := range c.State().Roles {
		rs := &c.State().Roles[i]
		if rs.Paused != "" {
			rs.Paused, rs.Resumed = "", true
			result.Roles = append(result.Roles, rs.Name)
		}
		for j := range rs.Members {
			if m := &rs.Members[j]; m.State == plan.MemberFlapping {
				hm.Step(ctx, c, rs, m, workflows.MemberEvent{Member: m.Name, Event: plan.HealthResume, Reason: "resumed by an operator", Source: "cli"})
				result.Members = append(result.Members, m.Name)
			}
		}
	}
	hm.changed(ctx, c)
	c.Logger().Info("Resumed", "Roles", result.Roles, "Members", spec.Some(result.Members, workflows.ReportNames))
	result.Members, result.MoreMembers = workflows.CapNames(result.Members)
	return result
}

// Resumable reports whether a resume would change anything.
func Resumable(roles []plan.RoleState) bool {
	return slices.ContainsFunc(roles, func(rs plan.RoleState) bool {
		return rs.Paused != "" || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberFlapping })
	})
}

// CheckEvent names an unknown member or event; the update refuses it, and the signal
// drops it. The refusal names a few of the members and counts the rest.
func CheckEvent(s *workflows.ClusterState, ev workflows.MemberEvent) error {
	if _, m := s.FindMember(ev.Member); m == nil || m.State == plan.MemberDeleted {
		var names []string
		total := 0
		for _, rs := range s.Roles {
			for _, m := range rs.Members {
				if m.State != plan.MemberDeleted {
					total++
					if len(names) < flow.RefusalNames {
						names = append(names, m.Name)
					}
				}
			}
		}
		listed := strings.Join(names, ", ")
		if total > len(names) {
			listed += fmt.Sprintf(" and %d more", total-len(names))
		}
		return flow.Refused(apperr.NotFound, "member-event refused: cluster %s has no member %q (its members: %s)", s.Name, spec.Clip(ev.Member, spec.MaxMemberNameLength), listed)
	}
	if err := workflows.CheckReportedEvent(ev.Event); err != nil {
		return flow.Refused(apperr.Invalid, "member-event refused: event %s", err)
	}
	if ev.Check != nil {
		return checkProbeReport(s, ev)
	}
	return nil
}

// checkProbeReport refuses a member's own check that is stale (its host no longer holds the
// member) or would change nothing, so that the probe's host takes it as said and nothing
// reaches the history: a host sends only changes, and only those the cluster takes count.
func checkProbeReport(s *workflows.ClusterState, ev workflows.MemberEvent) error {
	_, m := s.FindMember(ev.Member)
	if ev.Check.Home != "" && s.Home != "" && ev.Check.Home != s.Home {
		return flow.Refused(apperr.Conflict, "member-event refused: the check is of member %s of the cluster folder of home %s, not this cluster's (%s): an earlier cluster of its name", m.Name, spec.Clip(ev.Check.Home, spec.MaxTextBytes), s.Home)
	}
	if m.Host != ev.Check.Host {
		return flow.Refused(apperr.Conflict, "member-event refused: member %s is on host %q, not %q, which checked it", m.Name, m.Host, spec.Clip(ev.Check.Host, spec.MaxTextBytes))
	}
	if !Takes(m.State, ev.Event) {
		return flow.Refused(apperr.Conflict, "member-event refused: member %s is %s, which a check's %s does not change", m.Name, m.State, ev.Event)
	}
	return nil
}
