package plan

import (
	"fmt"
	"slices"

	"github.com/clusterflow/clusterflow/spec"
)

// start is one level's start step: the members on restarted hosts whose setup stands
// (ready, or down or flapping: the host may have been taken for lost while it rebooted)
// and whose role subscribes to start, a child per role.
func start(desired spec.Cluster, roles []RoleState, level []string, restarted []string) []RoleWork {
	var work []RoleWork
	for _, name := range level {
		r, ok := desired.Role(name)
		rs := RoleOf(roles, name)
		if !ok || rs == nil || !r.Wants(spec.EventStart) {
			continue
		}
		var members []Member
		for _, m := range rs.Members {
			if m.State.SetUp() && !m.Leaving && slices.Contains(restarted, m.Host) {
				members = append(members, m)
			}
		}
		if len(members) > 0 {
			work = append(work, RoleWork{Role: name, Members: members})
		}
	}
	return work
}

// Drain picks the members of draining hosts to replace now: those of the first level
// that still has any on a draining host, as many per role as its maxUnavailable leaves
// room for. limit gives a role's maxUnavailable as a count.
func Drain(roles []RoleState, levels [][]string, draining func(host string) bool, limit func(rs RoleState) int) []string {
	for _, level := range levels {
		var picked []string
		levelHas := false
		for _, name := range level {
			rs := RoleOf(roles, name)
			if rs == nil {
				continue
			}
			room := limit(*rs) - CountState(rs.Members, UnavailableStates...)
			for _, m := range rs.Members {
				if m.Host == "" || !draining(m.Host) || m.State == MemberDeleted || m.State == MemberRogue {
					continue
				}
				levelHas = true
				if m.State != MemberReady || m.Leaving || room <= 0 {
					continue // on its way out, unwell (health's concern), or no room yet
				}
				picked = append(picked, m.Name)
				room--
			}
		}
		if levelHas {
			return picked
		}
	}
	return nil
}

// PlacementProblem says why the hosts cannot hold the desired members of every role, or
// returns nil. Members already on a host that is not lost stay there, even if it takes no
// new members (cordoned, draining); the rest need room on ready hosts that fit.
func PlacementProblem(desired spec.Cluster, roles []RoleState, allHosts []Host, check HostCheck) error {
	for i, r := range desired.Roles {
		hosts := check.HostsFor(allHosts, desired.Name, r)
		if r.Members == 0 {
			continue
		}
		var members []Member
		if rs := RoleOf(roles, r.Name); rs != nil {
			members = rs.Members
		}
		if err := PlacementShortfall(r, members, hosts, r.Members); err != nil {
			return fmt.Errorf("roles[%d].%w", i, err)
		}
	}
	return nil
}
