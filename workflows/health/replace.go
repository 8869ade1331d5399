package health

import (
	"fmt"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// Replacing a member is a membership change like a resize, and goes through the same
// convergence, so the two never race: the member is marked leaving, which makes its role
// one member short, and a new generation starts. Its pass adds a member with the next
// ordinal and sets it up in dependency order, only then tears the replaced member down and
// removes it, and finally tells the survivors with addnodes and delnodes.

// replace starts replacing member m, which has just entered MemberReplacing.
func (hm *Machine) replace(c Cluster, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) {
	m.Leaving = true
	if ev.Event == plan.HealthConfigError {
		m.Replacements++ // its successor inherits the count
	}
	reason := fmt.Sprintf("replace %s (%s)", m.Name, ev.Event)
	if ev.Reason != "" {
		reason = fmt.Sprintf("replace %s (%s: %s)", m.Name, ev.Event, ev.Reason)
	}
	c.NewGeneration(reason)
	c.Logger().Info("Replacing member", "Role", rs.Name, "Member", m.Name, "Event", ev.Event, "Reason", ev.Reason, "Generation", c.State().Generation)
}

// ReplaceFailed replaces the named members, whose setup or notification failed (the
// planner names them: plan.FailedSetups), if their slots have replacements left. It
// reports whether any replacement started.
func (hm *Machine) ReplaceFailed(ctx workflow.Context, c Cluster, names []string) bool {
	started := false
	for _, name := range names {
		rs, m := c.State().FindMember(name)
		res := hm.Step(ctx, c, rs, m, workflows.MemberEvent{
			Member: m.Name, Event: plan.HealthConfigError, Reason: m.Detail, Source: "clusterflow",
		})
		started = started || res.To == plan.MemberReplacing
	}
	return started
}

// rehome sets up elsewhere a member being set up whose host was lost (or that is gone): it
// is placed afresh, with the same name, on a host that fits its role's placement (or
// waits, saying why); its run on the old host is stopped and what its operation reports of
// it ignored (Moved); and a new generation sets it up where it lives now. Its sandbox on
// the old host, if the run had begun there, is removed once the host is back: never
// adopted, never torn down by script, since the member lives elsewhere now.
func (hm *Machine) rehome(ctx workflow.Context, c Cluster, rs *plan.RoleState, m *plan.Member, from plan.MemberState, ev workflows.MemberEvent) {
	old := m.Host
	if old != "" && (from != plan.MemberPending || hm.runner.ActsOn(rs.Name, m.Name)) {
		c.State().Stale = append(c.State().Stale, workflows.StaleMember{Role: rs.Name, Member: m.Name, Host: old})
	}
	m.Host, m.Unplaced, m.Event, m.Moved = "", "", "", true
	m.Ports = nil // its new host gives it ports of its own; the old host's go with its sandbox
	m.Detail = fmt.Sprintf("to be set up elsewhere: %s", ev.Reason)
	name := m.Name
	if c.State().OnHosts {
		r, _ := c.RoleSpec(rs.Name)
		rs.Members = plan.PlaceMembers(r, rs.Members, hm.HostCheck.HostsFor(c.State().Hosts, c.State().Name, r))
	}
	hostLost := old != "" && !hosts.Reachable(c.State(), old)
	if workflow.GetVersion(ctx, change.StopsOutsideHandlers, workflow.DefaultVersion, 1) >= 1 {
		c.StopMovedRun(rs.Name, name, hostLost)
	} else {
		hm.runner.StopInOperation(ctx, rs.Name, map[string]bool{name: true}, hostLost) // runs from before
	}
	c.MembersChanged()
	c.NewGeneration(fmt.Sprintf("set %s up elsewhere (%s)", name, ev.Event))
	c.Logger().Info("Setting a member up elsewhere", "Member", name, "Was", from, "Host", old, "Now", rs.Member(name).Host, "Reason", ev.Reason)
}
