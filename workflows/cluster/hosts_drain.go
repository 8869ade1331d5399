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
func (w *clusterWorkflow) drain(ctx workflow.Context) {
	if !w.state.OnHosts || w.deleteRequested {
		return
	}
	draining := func(host string) bool { return hosts.Draining(&w.state, host) }
	names := plan.Drain(w.state.Roles, w.state.Levels, draining, func(rs plan.RoleState) int {
		def, _ := w.RoleSpec(rs.Name)
		return health.UnavailableLimit(&rs, def)
	})
	for _, name := range names {
		rs, m := w.state.FindMember(name)
		w.health.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: name, Event: plan.HealthDrain, Reason: fmt.Sprintf("host %s is draining", m.Host), Source: "hosts", At: workflow.Now(ctx)})
	}
}
