package cluster

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Replacing a member is a membership change like a resize, and goes through the same
// convergence, so the two never race: the member is marked leaving, which makes its role
// one member short, and a new generation starts. Its pass adds a member with the next
// ordinal and sets it up in dependency order, only then tears the replaced member down and
// removes it, and finally tells the survivors with addnodes and delnodes.

// replace starts replacing member m, which has just entered MemberReplacing.
func (rx *reactor) replace(rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) {
	m.Leaving = true
	if ev.Event == plan.HealthConfigError {
		m.Replacements++ // its successor inherits the count
	}
	reason := fmt.Sprintf("replace %s (%s)", m.Name, ev.Event)
	if ev.Reason != "" {
		reason = fmt.Sprintf("replace %s (%s: %s)", m.Name, ev.Event, ev.Reason)
	}
	rx.w.NewGeneration(reason)
	rx.w.logger.Info("Replacing member", "Role", rs.Name, "Member", m.Name, "Event", ev.Event, "Reason", ev.Reason, "Generation", rx.w.state.Generation)
}

// replaceFailed replaces the members of the given roles whose setup or notification
// failed, when their role asks for it and their slot has replacements left. It reports
// whether any replacement started.
func (rx *reactor) replaceFailed(ctx workflow.Context, roles []string) bool {
	started := false
	for _, name := range roles {
		r, ok := rx.w.spec.Role(name)
		rs := rx.w.state.Role(name)
		if !ok || rs == nil || !r.Health.ReplaceOnConfigError {
			continue
		}
		wanted, _ := plan.SplitMembers(*rs, plan.DesiredMembers(rx.w.spec, name))
		for _, m := range wanted {
			if m.State != plan.MemberConfigError {
				continue
			}
			res := rx.stepHealth(ctx, rs, rs.Member(m.Name), workflows.MemberEvent{
				Member: m.Name, Event: plan.HealthConfigError, Reason: m.Detail, Source: "clusterflow",
			})
			started = started || res.To == plan.MemberReplacing
		}
	}
	return started
}

// replacing reports whether any member is waiting for its successor before it goes.
func (e *executor) replacing() bool {
	n, _ := plan.CountAll(e.w.state.Roles, plan.MemberReplacing)
	return n > 0
}

// rehome sets up elsewhere a member being set up whose host was lost (or that is gone): it
// is placed afresh, with the same name, on a host that fits its role's placement (or
// waits, saying why); its run on the old host is stopped and what its operation reports of
// it ignored (Moved); and a new generation sets it up where it lives now. Its sandbox on
// the old host, if the run had begun there, is removed once the host is back: never
// adopted, never torn down by script, since the member lives elsewhere now.
func (rx *reactor) rehome(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, from plan.MemberState, ev workflows.MemberEvent) {
	old := m.Host
	if old != "" && (from != plan.MemberPending || rx.w.runner.ActsOn(rs.Name, m.Name)) {
		rx.w.state.Stale = append(rx.w.state.Stale, workflows.StaleMember{Role: rs.Name, Member: m.Name, Host: old})
	}
	m.Host, m.Unplaced, m.Event, m.Moved = "", "", "", true
	m.Ports = nil // its new host gives it ports of its own; the old host's go with its sandbox
	m.Detail = fmt.Sprintf("to be set up elsewhere: %s", ev.Reason)
	name := m.Name
	if rx.w.state.OnHosts {
		r, _ := rx.w.RoleSpec(rs.Name)
		rs.Members = plan.PlaceMembers(r, rs.Members, rx.w.hostCheck.HostsFor(rx.w.state.Hosts, rx.w.state.Name, r))
	}
	rx.w.runner.StopInOperation(ctx, rs.Name, map[string]bool{name: true}, old != "" && !hosts.Reachable(&rx.w.state, old))
	rx.w.membershipEpoch++
	rx.w.NewGeneration(fmt.Sprintf("set %s up elsewhere (%s)", name, ev.Event))
	rx.w.logger.Info("Setting a member up elsewhere", "Member", name, "Was", from, "Host", old, "Now", rs.Member(name).Host, "Reason", ev.Reason)
}
