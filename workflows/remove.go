package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// removeUnwanted tears down and removes the members the desired spec no longer wants, in
// reverse dependency order, the members of one role in parallel. Members never created are
// simply forgotten. Removed members that others knew of wait to be announced by delnodes.
func (w *clusterWorkflow) removeUnwanted(ctx workflow.Context) {
	for i := len(w.state.Levels) - 1; i >= 0 && ctx.Err() == nil; i-- {
		var names []string
		var leaving [][]Member
		var futures []workflow.ChildWorkflowFuture
		for _, name := range w.state.Levels[i] {
			rs := w.state.Role(name)
			if rs == nil {
				continue
			}
			_, unwanted := w.splitWanted(rs)
			var present []Member
			for _, m := range unwanted {
				if m.State == MemberPending {
					rs.Member(m.Name).State = MemberDeleted
					continue
				}
				present = append(present, m)
			}
			if len(present) > 0 {
				names = append(names, name)
				leaving = append(leaving, present)
				futures = append(futures, w.startRole(ctx, OpTeardown, name, present, nil))
			}
		}
		w.touch(ctx)
		for j, f := range futures {
			w.finishRole(ctx, names[j], f)
			w.noteRemoved(names[j], leaving[j])
		}
	}
	w.dropRemoved()
	w.touch(ctx)
}

// noteRemoved queues a delnodes announcement for the torn-down members that are now gone.
// A member whose arrival was never announced leaves unannounced too.
func (w *clusterWorkflow) noteRemoved(role string, tornDown []Member) {
	var removed []string
	rs := w.state.Role(role)
	for _, m := range tornDown {
		if now := rs.Member(m.Name); now == nil || now.State != MemberDeleted {
			continue
		}
		if w.unannounced.forget(role, m.Name) {
			continue
		}
		removed = append(removed, m.Name)
	}
	w.unannounced.Removed = addToGroup(w.unannounced.Removed, role, removed)
}

// addToGroup adds nodes to the role's group, creating it at the end when it is new.
func addToGroup(groups []NodeGroup, role string, nodes []string) []NodeGroup {
	if len(nodes) == 0 {
		return groups
	}
	for i := range groups {
		if groups[i].Role == role {
			for _, n := range nodes {
				if !slices.Contains(groups[i].Nodes, n) {
					groups[i].Nodes = append(groups[i].Nodes, n)
				}
			}
			return groups
		}
	}
	return append(groups, NodeGroup{Role: role, Nodes: slices.Clone(nodes)})
}

// forget takes a member out of the pending addnodes announcements, reporting whether it
// was there.
func (a *Announcements) forget(role, member string) bool {
	for i := range a.Added {
		if a.Added[i].Role != role {
			continue
		}
		if j := slices.Index(a.Added[i].Nodes, member); j >= 0 {
			a.Added[i].Nodes = slices.Delete(a.Added[i].Nodes, j, j+1)
			if len(a.Added[i].Nodes) == 0 {
				a.Added = slices.Delete(a.Added, i, i+1)
			}
			return true
		}
	}
	return false
}

// isAdded reports whether a member's arrival is still to be announced.
func (a *Announcements) isAdded(member string) bool {
	for _, g := range a.Added {
		if slices.Contains(g.Nodes, member) {
			return true
		}
	}
	return false
}
