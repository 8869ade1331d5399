package health

import (
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The meltdown guard, after BOSH's resurrector: when more of a role's members are
// unavailable at once than its maxUnavailable allows, something bigger than one member is
// wrong (a network partition, a broken health checker), and replacing them all would make
// it worse. Automatic replacement for the role pauses until enough members recover or an
// operator resumes it.

// Unavailable counts a role's members that are down, flapping or being replaced.
func Unavailable(rs *plan.RoleState) int {
	return plan.CountState(rs.Members, plan.UnavailableStates...)
}

// ReplacementPaused reports whether the role's automatic replacement is paused, or would
// be once member m counts as unavailable too; limit is the role's (UnavailableLimit).
func ReplacementPaused(rs *plan.RoleState, m *plan.Member, limit int) bool {
	if rs.Resumed {
		return false
	}
	unavailable := Unavailable(rs)
	if !m.State.Unavailable() {
		unavailable++
	}
	return rs.Paused != "" || unavailable > limit
}

// UnavailableLimit is how many of the role's members may be unavailable at once, by the
// health policy of def, its spec.
func UnavailableLimit(rs *plan.RoleState, def spec.Role) int {
	return def.Health.UnavailableLimit(rs.Desired)
}

// refreshMeltdown pauses or unpauses each role's replacement; defs are the roles' specs
// (a role none names has the default policy). A resume lasts until the role is back
// within its limit, which re-arms the guard. It reports whether any role's pause changed,
// which must wake the health timer: a pause holds timers back.
func refreshMeltdown(roles []plan.RoleState, defs []spec.Role) (changed bool) {
	for i := range roles {
		rs := &roles[i]
		was := rs.Paused
		def, _ := roleNamed(defs, rs.Name)
		unavailable, limit := Unavailable(rs), UnavailableLimit(rs, def)
		switch {
		case unavailable <= limit:
			rs.Paused, rs.Resumed = "", false
		case rs.Resumed:
			rs.Paused = ""
		default:
			rs.Paused = fmt.Sprintf("automatic replacement paused: %d of %d members unavailable, more than maxUnavailable %s allows (%d)",
				unavailable, rs.Desired, def.Health.WithDefaults().MaxUnavailable, limit)
		}
		if rs.Paused != was {
			changed = true
		}
	}
	return changed
}

func roleNamed(defs []spec.Role, name string) (spec.Role, bool) {
	for _, r := range defs {
		if r.Name == name {
			return r, true
		}
	}
	return spec.Role{Name: name}, false
}

// Undecommissioned names the members whose decommission failed: their removal waits.
// appContract is change.AppContract: before it, no removing notice was told first.
func Undecommissioned(roles []plan.RoleState, appContract bool) []string {
	return membersWhere(roles, func(m plan.Member) bool {
		return m.Decommission == plan.DecommissionFailed && (m.RemovingTold || !appContract)
	})
}

// HeldByRemoving names the members held because the removing notice of them failed.
func HeldByRemoving(roles []plan.RoleState, appContract bool) []string {
	return membersWhere(roles, func(m plan.Member) bool {
		return appContract && m.Decommission == plan.DecommissionFailed && !m.RemovingTold
	})
}

func membersWhere(roles []plan.RoleState, keep func(plan.Member) bool) []string {
	var names []string
	for _, rs := range roles {
		for _, m := range rs.Members {
			if keep(m) {
				names = append(names, m.Name)
			}
		}
	}
	return names
}

// phase is the phase and message of a cluster whose last operation reached its goal, by
// its members' health: removals held, replacement paused, members unavailable, or ready.
// names bounds the members a message names.
func phase(cluster string, roles []plan.RoleState, appContract bool, names int) (workflows.Phase, string) {
	var pausedRoles, unavailable []string
	for _, rs := range roles {
		if rs.Paused != "" {
			pausedRoles = append(pausedRoles, fmt.Sprintf("role %s: %s", rs.Name, rs.Paused))
		}
		for _, m := range rs.Members {
			if m.State.Unavailable() {
				unavailable = append(unavailable, fmt.Sprintf("%s %s", m.Name, m.State))
			}
		}
	}
	if stuck := Undecommissioned(roles, appContract); len(stuck) > 0 {
		return workflows.PhasePaused, fmt.Sprintf("removal paused: the decommission of %s failed; once its cause is fixed, `clusterflow retry %s` runs it again", spec.Some(stuck, names), cluster)
	}
	if held := HeldByRemoving(roles, appContract); len(held) > 0 {
		return workflows.PhasePaused, fmt.Sprintf("removal paused: the removing notice of %s failed; once its cause is fixed, `clusterflow retry %s` runs it again", spec.Some(held, names), cluster)
	}
	switch {
	case len(pausedRoles) > 0:
		return workflows.PhasePaused, strings.Join(pausedRoles, "; ") + fmt.Sprintf("; run `clusterflow resume %s` to replace them anyway", cluster)
	case len(unavailable) > 0:
		return workflows.PhaseDegraded, spec.Some(unavailable, names)
	}
	ready, total := plan.CountAll(roles, plan.MemberReady)
	return workflows.PhaseReady, fmt.Sprintf("%d/%d members ready", ready, total)
}
