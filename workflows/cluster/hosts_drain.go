package cluster

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Draining a host replaces each of its members by one on another host, like a member
// reported gone, but paced: in dependency order (a level's members only once the levels
// before it are off the host) and within each role's maxUnavailable. Each step is a
// replacement generation; the next step starts when a view of the hosts arrives or an
// operation ends.

// drain takes the next step of draining any draining host.
func (rx *reactor) drain(ctx workflow.Context) {
	if !rx.w.state.OnHosts || rx.w.deleteRequested {
		return
	}
	draining := func(host string) bool { return hosts.Draining(&rx.w.state, host) }
	names := plan.Drain(rx.w.state.Roles, rx.w.state.Levels, draining, func(rs plan.RoleState) int {
		def, _ := rx.w.RoleSpec(rs.Name)
		return health.UnavailableLimit(&rs, def)
	})
	for _, name := range names {
		rs, m := rx.w.state.FindMember(name)
		rx.w.health.Step(ctx, rx.w, rs, m, workflows.MemberEvent{Member: name, Event: plan.HealthDrain, Reason: fmt.Sprintf("host %s is draining", m.Host), Source: "hosts", At: workflow.Now(ctx)})
	}
}
