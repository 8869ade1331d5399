package cluster

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The meltdown guard, after BOSH's resurrector: when more of a role's members are
// unavailable at once than its maxUnavailable allows, something bigger than one member is
// wrong (a network partition, a broken health checker), and replacing them all would make
// it worse. Automatic replacement for the role pauses until enough members recover or an
// operator resumes it.

// unavailableIn counts a role's members that are down, flapping or being replaced.
func unavailableIn(rs *plan.RoleState) int {
	return plan.CountState(rs.Members, plan.UnavailableStates...)
}

// unavailableLimit is how many of the role's members may be unavailable at once.
func (c *cluster) unavailableLimit(rs *plan.RoleState) int {
	r, _ := c.roleSpec(rs.Name)
	return r.Health.UnavailableLimit(rs.Desired)
}

// replacementPaused reports whether the role's automatic replacement is paused, or would
// be once member m counts as unavailable too.
func (c *cluster) replacementPaused(rs *plan.RoleState, m *plan.Member) bool {
	if rs.Resumed {
		return false
	}
	unavailable := unavailableIn(rs)
	if !m.State.Unavailable() {
		unavailable++
	}
	return rs.Paused != "" || unavailable > c.unavailableLimit(rs)
}

// refreshMeltdown pauses or unpauses each role's replacement. A resume lasts until the
// role is back within its limit, which re-arms the guard. A change wakes the health
// watcher, whose timers a pause holds back.
func (c *cluster) refreshMeltdown() {
	for i := range c.state.Roles {
		rs := &c.state.Roles[i]
		was := rs.Paused
		unavailable, limit := unavailableIn(rs), c.unavailableLimit(rs)
		switch {
		case unavailable <= limit:
			rs.Paused, rs.Resumed = "", false
		case rs.Resumed:
			rs.Paused = ""
		default:
			r, _ := c.roleSpec(rs.Name)
			rs.Paused = fmt.Sprintf("automatic replacement paused: %d of %d members unavailable, more than maxUnavailable %s allows (%d)",
				unavailable, rs.Desired, r.Health.WithDefaults().MaxUnavailable, limit)
		}
		if rs.Paused != was {
			c.healthVersion++
		}
	}
}

// showHealth puts members' health into the phase while no operation runs: a ready cluster
// with unavailable members is degraded, and paused if a role's replacement is paused.
// Failed and canceled clusters keep their phase; their members show their health.
func (hm *healthMachine) showHealth(ctx workflow.Context) {
	switch hm.state.Phase {
	case workflows.PhaseReady, workflows.PhaseDegraded, workflows.PhasePaused:
	default:
		return
	}
	if hm.operating || hm.deleteRequested {
		return // the operation in progress owns the phase
	}
	phase, message := hm.healthPhase()
	hm.setPhase(ctx, phase, message)
}

// healthPhase is the phase and message of a cluster whose last operation reached its goal.
// undecommissioned names the members whose decommission failed: their removal waits.
func (c *cluster) undecommissioned() []string {
	var names []string
	for _, rs := range c.state.Roles {
		for _, m := range rs.Members {
			if m.Decommission == plan.DecommissionFailed && (m.RemovingTold || !c.appContract) {
				names = append(names, m.Name)
			}
		}
	}
	return names
}

// heldByRemoving names the members held because the removing notice of them failed.
func (c *cluster) heldByRemoving() []string {
	var names []string
	for _, rs := range c.state.Roles {
		for _, m := range rs.Members {
			if c.appContract && m.Decommission == plan.DecommissionFailed && !m.RemovingTold {
				names = append(names, m.Name)
			}
		}
	}
	return names
}

func (c *cluster) healthPhase() (workflows.Phase, string) {
	var pausedRoles, unavailable []string
	for _, rs := range c.state.Roles {
		if rs.Paused != "" {
			pausedRoles = append(pausedRoles, fmt.Sprintf("role %s: %s", rs.Name, rs.Paused))
		}
		for _, m := range rs.Members {
			if m.State.Unavailable() {
				unavailable = append(unavailable, fmt.Sprintf("%s %s", m.Name, m.State))
			}
		}
	}
	if stuck := c.undecommissioned(); len(stuck) > 0 {
		return workflows.PhasePaused, fmt.Sprintf("removal paused: the decommission of %s failed; once its cause is fixed, `clusterflow retry %s` runs it again", spec.Some(stuck, refusalNames), c.state.Name)
	}
	if held := c.heldByRemoving(); len(held) > 0 {
		return workflows.PhasePaused, fmt.Sprintf("removal paused: the removing notice of %s failed; once its cause is fixed, `clusterflow retry %s` runs it again", spec.Some(held, refusalNames), c.state.Name)
	}
	switch {
	case len(pausedRoles) > 0:
		return workflows.PhasePaused, strings.Join(pausedRoles, "; ") + fmt.Sprintf("; run `clusterflow resume %s` to replace them anyway", c.state.Name)
	case len(unavailable) > 0:
		return workflows.PhaseDegraded, spec.Some(unavailable, refusalNames)
	}
	ready, total := countMembers(c.state.Roles, plan.MemberReady)
	return workflows.PhaseReady, fmt.Sprintf("%d/%d members ready", ready, total)
}
