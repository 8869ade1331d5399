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
func (rx *reactor) noteRestarts(before []plan.Host) {
	restarted := hosts.Restarted(&rx.w.state, before)
	if len(restarted) == 0 {
		return
	}
	for _, h := range restarted {
		rx.w.forgetInstalled(h)
		if !slices.Contains(rx.w.state.Restarted, h) {
			rx.w.state.Restarted = append(rx.w.state.Restarted, h)
		}
	}
	slices.Sort(rx.w.state.Restarted)
	rx.w.NewGeneration(fmt.Sprintf("host %s restarted: start its members", strings.Join(restarted, ", ")))
}
