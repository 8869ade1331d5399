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
func (e *executor) announce(ctx workflow.Context) {
	if e.w.appContract {
		e.retell(ctx) // what retried members were not told comes first
	}
	if e.w.lifecycle {
		e.announceJoined(ctx)
		e.announceLeft(ctx)
		return
	}
	e.announceLeft(ctx)
	e.announceJoined(ctx)
}

// announceLeft runs delnodes about the members that left, a role's at a time.
func (e *executor) announceLeft(ctx workflow.Context) {
	for len(e.w.removed) > 0 && ctx.Err() == nil {
		role := e.w.removed[0].Role
		var left, rest []workflows.RemovedNode
		for _, n := range e.w.removed {
			if n.Role == role {
				left = append(left, n)
			} else {
				rest = append(rest, n)
			}
		}
		nodes := make([]plan.Member, len(left))
		for i, n := range left {
			_, ordinal, _ := spec.ParseMemberName(e.w.state.Name, n.Name)
			nodes[i] = plan.Member{Name: n.Name, Ordinal: ordinal, ListedIn: n.ListedIn, Announced: n.Announced, UnlistedFrom: n.UnlistedFrom}
		}
		e.notify(ctx, plan.OpDelNodes, role, nodes)
		if ctx.Err() == nil {
			e.w.removed = rest
		}
	}
}

// announceJoined runs addnodes about the members that joined, a role's at a time.
func (e *executor) announceJoined(ctx workflow.Context) {
	for i := range e.w.state.Roles {
		if ctx.Err() != nil {
			return
		}
		rs := &e.w.state.Roles[i]
		joined := plan.Joined(*rs)
		if len(joined) == 0 {
			continue
		}
		e.notify(ctx, plan.OpAddNodes, rs.Name, joined)
		if ctx.Err() == nil {
			rs = e.w.state.Role(rs.Name) // the roles may have moved while notify waited
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
func (e *executor) notify(ctx workflow.Context, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	if !e.w.bounded {
		return e.notifyByName(ctx, op, nodesRole, nodes)
	}
	n := plan.NewNotice(e.w.state.Notices+1, e.w.state.Name, op, nodesRole, nodes)
	missed := e.missedBy(n)
	var told []plan.RoleWork
	if step := plan.Announcement(op, n).Steps[0]; ctx.Err() == nil {
		if work := e.stepWork(ctx, e.w.spec, step, nil); len(work) > 0 {
			// The notice travels once per host, before anyone is told.
			e.w.state.Notices = n.ID
			failed := e.writeFiles(ctx, fmt.Sprintf("notice %d of %s", n.ID, e.w.state.Name), hostsOf(work), backend.ClusterFiles{Cluster: e.w.state.Name, Home: e.w.state.Home, Notice: &n})
			if len(failed) > 0 {
				work = e.untold(ctx, op, work, failed)
			}
			told = work
			e.runStep(ctx, step, work)
			e.w.logger.Info("Announced membership change", "Event", op, "Role", nodesRole, "Notice", n.ID, "Nodes", n.Size(), "Roles", fmt.Sprint(workRoles(told)))
		}
	}
	if ctx.Err() == nil {
		e.keepUntold(n, told, missed)
	}
	return told
}

// untold takes out of the work the members on hosts where the notice could not be written,
// and puts them in config_error with the reason: they cannot be told.
func (e *executor) untold(ctx workflow.Context, op plan.RoleOperation, work []plan.RoleWork, failed map[string]error) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		rs := e.w.state.Role(rw.Role)
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
	e.w.Touch(ctx)
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
func (e *executor) notifyByName(ctx workflow.Context, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	step := plan.AnnouncementByName(op, nodesRole, nodes).Steps[0]
	if ctx.Err() != nil {
		return nil
	}
	told := e.stepWork(ctx, e.w.spec, step, nil)
	if len(told) > 0 {
		e.runStep(ctx, step, told)
		e.w.logger.Info("Announced membership change", "Event", op, "Role", nodesRole, "Nodes", fmt.Sprint(told[0].Nodes.Nodes), "Roles", fmt.Sprint(workRoles(told)))
	}
	return told
}
