package cluster

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// announce tells ready members about members that left (delnodes) and members that
// joined (addnodes), a role's members at a time. Each member hears only about what it
// does not know: a member knows the members listed in the configmeta it configured with,
// and those an earlier addnodes announced. So members set up together hear nothing about
// each other, and a member set up before a change arrived midway hears of what the change
// added. What a cancel or delete interrupts stays to be announced.
//
// Members that joined are announced first, then those that left: a replacement's survivors
// learn of the successor before they forget its predecessor, so an app that keeps a
// membership list never drops below its size (runs from before change.Lifecycle did it the
// other way round).
func (w *clusterWorkflow) announce(ctx workflow.Context) {
	if w.appContract {
		w.retell(ctx) // what retried members were not told comes first
	}
	if w.lifecycle {
		w.announceJoined(ctx)
		w.announceLeft(ctx)
		return
	}
	w.announceLeft(ctx)
	w.announceJoined(ctx)
}

// announceLeft runs delnodes about the members that left, a role's at a time.
func (w *clusterWorkflow) announceLeft(ctx workflow.Context) {
	for len(w.removed) > 0 && ctx.Err() == nil {
		role := w.removed[0].Role
		var left, rest []workflows.RemovedNode
		for _, n := range w.removed {
			if n.Role == role {
				left = append(left, n)
			} else {
				rest = append(rest, n)
			}
		}
		nodes := make([]plan.Member, len(left))
		for i, n := range left {
			_, ordinal, _ := spec.ParseMemberName(w.state.Name, n.Name)
			nodes[i] = plan.Member{Name: n.Name, Ordinal: ordinal, ListedIn: n.ListedIn, Announced: n.Announced, UnlistedFrom: n.UnlistedFrom}
		}
		w.notify(ctx, plan.OpDelNodes, role, nodes)
		if ctx.Err() == nil {
			w.removed = rest
		}
	}
}

// announceJoined runs addnodes about the members that joined, a role's at a time.
func (w *clusterWorkflow) announceJoined(ctx workflow.Context) {
	for i := range w.state.Roles {
		if ctx.Err() != nil {
			return
		}
		rs := &w.state.Roles[i]
		joined := plan.Joined(*rs)
		if len(joined) == 0 {
			continue
		}
		w.notify(ctx, plan.OpAddNodes, rs.Name, joined)
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
//
// The nodes travel once per host, as a notice written with the cluster's files, and each
// host works out a member's nodes from it: a member's run names the notice and what the
// member knows. A member on a host the notice could not be written to is not told, and is
// put in config_error saying why.
//
// It returns the work it ran: who was told.
func (w *clusterWorkflow) notify(ctx workflow.Context, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	if !w.bounded {
		return w.notifyByName(ctx, op, nodesRole, nodes)
	}
	n := plan.NewNotice(w.state.Notices+1, w.state.Name, op, nodesRole, nodes)
	missed := w.missedBy(n)
	var told []plan.RoleWork
	w.runPass(ctx, &w.spec, plan.Announcement(op, n), passHooks{
		// The notice travels once per host, before anyone is told.
		prepare: func(_ plan.Step, work []plan.RoleWork) ([]plan.RoleWork, bool) {
			if len(work) == 0 {
				return nil, false
			}
			w.state.Notices = n.ID
			failed := w.writeFiles(ctx, fmt.Sprintf("notice %d of %s", n.ID, w.state.Name), hostsOf(work), backend.ClusterFiles{Cluster: w.state.Name, Home: w.state.Home, Notice: &n})
			if len(failed) > 0 {
				work = w.untold(ctx, op, work, failed)
			}
			told = work
			return work, true
		},
		after: func(plan.Step) bool {
			w.logger.Info("Announced membership change", "Event", op, "Role", nodesRole, "Notice", n.ID, "Nodes", n.Size(), "Roles", fmt.Sprint(workRoles(told)))
			return true
		},
	})
	if ctx.Err() == nil {
		w.keepUntold(n, told, missed)
	}
	return told
}

// untold takes out of the work the members on hosts where the notice could not be written,
// and puts them in config_error with the reason: they cannot be told.
func (w *clusterWorkflow) untold(ctx workflow.Context, op plan.RoleOperation, work []plan.RoleWork, failed map[string]error) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		rs := w.state.Role(rw.Role)
		var told []plan.Member
		for _, m := range rw.Members {
			err, lost := failed[m.Host]
			if !lost {
				told = append(told, m)
				continue
			}
			if live := rs.Member(m.Name); live != nil {
				live.State, live.Event, live.Since = plan.MemberConfigError, spec.Event(op), workflow.Now(ctx)
				live.Detail = spec.Clip(fmt.Sprintf("%s: the notice could not be written on its host: %s", op, flow.ErrorMessage(err)), workflows.MaxDetail)
			}
		}
		if len(told) > 0 {
			rw.Members = told
			kept = append(kept, rw)
		}
	}
	w.Touch(ctx)
	return kept
}

// hostsOf lists, sorted, the hosts of the members the work acts on.
func hostsOf(work []plan.RoleWork) []string {
	var hosts []string
	for _, rw := range work {
		for _, m := range rw.Members {
			hosts = append(hosts, m.Host)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func workRoles(work []plan.RoleWork) []string {
	roles := make([]string, len(work))
	for i, rw := range work {
		roles[i] = rw.Role
	}
	return roles
}

// notifyByName is notify as runs from before bounded payloads do it: the work names, for
// every member, the nodes it is told about.
func (w *clusterWorkflow) notifyByName(ctx workflow.Context, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	var told []plan.RoleWork
	w.runPass(ctx, &w.spec, plan.AnnouncementByName(op, nodesRole, nodes), passHooks{
		prepare: func(_ plan.Step, work []plan.RoleWork) ([]plan.RoleWork, bool) {
			told = work
			return work, len(work) > 0
		},
		after: func(plan.Step) bool {
			w.logger.Info("Announced membership change", "Event", op, "Role", nodesRole, "Nodes", fmt.Sprint(told[0].Nodes.Nodes), "Roles", fmt.Sprint(workRoles(told)))
			return true
		},
	})
	return told
}
