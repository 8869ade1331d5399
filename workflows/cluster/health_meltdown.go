package cluster

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// The meltdown guard, after BOSH's resurrector: when more of a role's members are
// unavailable at once than its maxUnavailable allows, something bigger than one member is
// wrong (a network partition, a broken health checker), and replacing them all would make
// it worse. Automatic replacement for the role pauses until enough members recover or an
// operator resumes it.

// refreshMeltdown pauses or unpauses each role's replacement (health.RefreshMeltdown),
// waking the health watcher when that changed.
func (c *cluster) refreshMeltdown() {
	if health.RefreshMeltdown(c.state.Roles, c.roleSpecs()) {
		c.healthVersion++
	}
}

// roleSpecs are the desired spec's roles and those an apply removed whose members are not
// gone yet.
func (c *cluster) roleSpecs() []spec.Role {
	return slices.Concat(c.spec.Roles, c.retiring)
}

// showHealth puts members' health into the phase while no operation runs: a ready cluster
// with unavailable members is degraded, and paused if a role's replacement is paused.
// Failed and canceled clusters keep their phase; their members show their health.
func (rx *reactor) showHealth(ctx workflow.Context) {
	switch rx.w.state.Phase {
	case workflows.PhaseReady, workflows.PhaseDegraded, workflows.PhasePaused:
	default:
		return
	}
	if rx.w.operating || rx.w.deleteRequested {
		return // the operation in progress owns the phase
	}
	phase, message := rx.w.healthPhase()
	rx.w.SetPhase(ctx, phase, message)
}

// healthPhase is the phase and message of a cluster whose last operation reached its goal.
func (c *cluster) healthPhase() (workflows.Phase, string) {
	return health.Phase(c.state.Name, c.state.Roles, c.appContract, flow.RefusalNames)
}
