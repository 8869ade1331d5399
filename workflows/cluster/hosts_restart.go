package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A host that restarts (its worker checks in with a new boot ID) has lost its members'
// processes but kept their sandboxes. Its members that subscribe to the start event get
// it, in the cluster's dependency order, so their services come back without a re-setup;
// a failed start makes the member down, and health takes over.

// noteRestarts records the hosts whose boot ID changed between two views, and starts a
// generation to bring their members back.
func (c *cluster) noteRestarts(before []plan.Host) {
	restarted := hosts.Restarted(&c.state, before)
	if len(restarted) == 0 {
		return
	}
	for _, h := range restarted {
		c.forgetInstalled(h)
		if !slices.Contains(c.state.Restarted, h) {
			c.state.Restarted = append(c.state.Restarted, h)
		}
	}
	slices.Sort(c.state.Restarted)
	c.NewGeneration(fmt.Sprintf("host %s restarted: start its members", strings.Join(restarted, ", ")))
}
