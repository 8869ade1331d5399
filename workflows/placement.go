package workflows

import (
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Placement decides which host gets each new member. It is pure and deterministic: hosts
// are taken in name order, fewest of the role's members first, and with spreadBy the label
// value holding the fewest of the role's members comes first.

// CheckPlacement says why the hosts cannot hold a new cluster's members, or returns nil;
// the starter refuses such a deploy before anything starts. Hosts' allow-lists count,
// but for the namespace, which the workflow checks.
func CheckPlacement(desired spec.Cluster, hosts []Host) error {
	return plan.PlacementProblem(desired, nil, hosts, plan.HostCheck{On: true})
}
