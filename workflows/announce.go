package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// announce tells ready members about members that left (delnodes) and members that
// joined (addnodes), a role's members at a time. Each member hears only about what it
// does not know: a member knows the members listed in the configmeta it configured with,
// and those an earlier addnodes announced. So members set up together hear nothing about
// each other, and a member set up before a change arrived midway hears of what the change
// added. What a cancel or delete interrupts stays to be announced.
func (w *clusterWorkflow) announce(ctx workflow.Context) {
	for len(w.removed) > 0 && ctx.Err() == nil {
		role := w.removed[0].Role
		var left, rest []RemovedNode
		for _, n := range w.removed {
			if n.Role == role {
				left = append(left, n)
			} else {
				rest = append(rest, n)
			}
		}
		nodes := make([]Member, len(left))
		for i, n := range left {
			nodes[i] = Member{Name: n.Name, ListedIn: n.ListedIn, Announced: n.Announced, UnlistedFrom: n.UnlistedFrom}
		}
		w.notify(ctx, OpDelNodes, role, nodes)
		if ctx.Err() == nil {
			w.removed = rest
		}
	}
	for i := range w.state.Roles {
		if ctx.Err() != nil {
			return
		}
		rs := &w.state.Roles[i]
		var joined []Member
		for _, m := range rs.Members {
			if m.State == MemberReady && !m.Announced {
				joined = append(joined, m)
			}
		}
		if len(joined) == 0 {
			continue
		}
		w.notify(ctx, OpAddNodes, rs.Name, joined)
		if ctx.Err() == nil {
			rs = w.state.Role(rs.Name) // the roles may have moved while notify waited
			for _, m := range joined {
				if m := rs.Member(m.Name); m != nil {
					m.Announced = true
				}
			}
		}
	}
}

// notify runs the event on every ready member subscribed to it that does not know (for
// addnodes) or knew (for delnodes) some of the nodes, telling each about those nodes: a
// child workflow per role, all roles at once. A failing notification puts its member in
// config_error; it is not retried.
func (w *clusterWorkflow) notify(ctx workflow.Context, op RoleOperation, nodesRole string, nodes []Member) {
	work := planNotification(w.spec, w.state.Roles, op, nodesRole, nodes)
	if len(work) == 0 {
		return
	}
	w.runLevel(ctx, op, work)
	roles := make([]string, len(work))
	for i, rw := range work {
		roles[i] = rw.role
	}
	w.logger.Info("Announced membership change", "Event", op, "Role", nodesRole, "Nodes", fmt.Sprint(work[0].nodes.Nodes), "Roles", fmt.Sprint(roles))
}
