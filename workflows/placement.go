package workflows

import (
	"fmt"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Placement decides which host gets each new member. It is pure and deterministic: hosts
// are taken in name order, fewest of the role's members first, and with spreadBy the label
// value holding the fewest of the role's members comes first.

// placementProblem says why the hosts cannot hold the desired members of every role, or
// returns nil. Members already on a host that is not lost stay there, even if it takes no
// new members (cordoned, draining); the rest need room on ready hosts that fit.
func placementProblem(desired spec.Cluster, roles []plan.RoleState, allHosts []Host, check plan.HostCheck) error {
	for i, r := range desired.Roles {
		hosts := check.HostsFor(allHosts, desired.Name, r)
		if r.Members == 0 {
			continue
		}
		var members []Member
		if rs := plan.RoleOf(roles, r.Name); rs != nil {
			members = rs.Members
		}
		if err := plan.PlacementShortfall(r, members, hosts, r.Members); err != nil {
			return fmt.Errorf("roles[%d].%w", i, err)
		}
	}
	return nil
}

// CheckPlacement says why the hosts cannot hold a new cluster's members, or returns nil;
// the starter refuses such a deploy before anything starts. Hosts' allow-lists count,
// but for the namespace, which the workflow checks.
func CheckPlacement(desired spec.Cluster, hosts []Host) error {
	return placementProblem(desired, nil, hosts, plan.HostCheck{On: true})
}
