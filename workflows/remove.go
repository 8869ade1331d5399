package workflows

import (
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// removeUnwanted tears down and removes the members the desired spec no longer wants, in
// reverse dependency order, the members of one role in parallel. Members never created are
// simply forgotten. Removed members that others knew of wait to be announced by delnodes.
// Members being replaced stay until replacedToo: they go once their successors are set up.
func (w *clusterWorkflow) removeUnwanted(ctx workflow.Context, replacedToo bool) {
	w.runPass(ctx, w.spec, plan.Removal(w.state.Levels, replacedToo), passHooks{})
	w.dropRemoved()
	w.touch(ctx)
}

// noteRemoved queues a delnodes announcement for the torn-down members that are now gone.
func (c *cluster) noteRemoved(role string, tornDown []Member) {
	rs := c.state.Role(role)
	for _, m := range tornDown {
		if now := rs.Member(m.Name); now != nil && now.State == MemberDeleted {
			c.removed = append(c.removed, RemovedNode{Role: role, Name: m.Name, ListedIn: now.ListedIn, Announced: now.Announced, UnlistedFrom: now.UnlistedFrom})
		}
	}
}
