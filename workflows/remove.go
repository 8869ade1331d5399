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
	for i := len(w.state.Levels) - 1; i >= 0 && ctx.Err() == nil; i-- {
		forget, work := plan.Removal(w.spec, w.state.Roles, w.state.Levels[i], replacedToo)
		for _, name := range forget {
			_, m := w.findMember(name)
			m.State = MemberDeleted // never created: nothing to tear down
		}
		work = w.dropUnreachable(ctx, work)
		w.runLevel(ctx, OpTeardown, work)
		for _, rw := range work {
			w.noteRemoved(rw.Role, rw.Members)
		}
	}
	w.dropRemoved()
	w.touch(ctx)
}

// noteRemoved queues a delnodes announcement for the torn-down members that are now gone.
func (w *clusterWorkflow) noteRemoved(role string, tornDown []Member) {
	rs := w.state.Role(role)
	for _, m := range tornDown {
		if now := rs.Member(m.Name); now != nil && now.State == MemberDeleted {
			w.removed = append(w.removed, RemovedNode{Role: role, Name: m.Name, ListedIn: now.ListedIn, Announced: now.Announced, UnlistedFrom: now.UnlistedFrom})
		}
	}
}
