// Package announce tells a cluster's members of membership changes: addnodes about the
// members that joined, delnodes about those that left, removing about those about to leave
// (before their decommission), and again what a member a failed notification left in
// config_error was not told, once a retry makes it ready (retelling). Each notification is
// a step the cluster's executor runs: its role children start there.
package announce

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/log"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Cluster is what announcing needs of a cluster: its state and desired spec, showing
// changes, writing files to its hosts (a notice travels once per host), and running a
// notification's step through the executor.
type Cluster interface {
	State() *workflows.ClusterState
	Desired() spec.Cluster
	Logger() log.Logger
	Touch(ctx workflow.Context)
	// Removed are the members that left whom the others are still to be told of.
	Removed() *[]workflows.RemovedNode
	WriteClusterFiles(ctx workflow.Context, withScripts bool) error
	// WriteFiles writes files to the hosts named, and says on which it failed, why.
	WriteFiles(ctx workflow.Context, summary string, to []string, files backend.ClusterFiles) map[string]error
	StepWork(ctx workflow.Context, desired spec.Cluster, step plan.Step, restarted []string) []plan.RoleWork
	RunStep(ctx workflow.Context, step plan.Step, work []plan.RoleWork)
}

// Options are what a cluster's run decided when it started (see workflows/internal/change).
type Options struct {
	// Bounded: notices travel once per host, rather than names to each member.
	Bounded bool
	// Lifecycle: members that joined are announced before those that left.
	Lifecycle bool
	// AppContract: a failed addnodes or delnodes is kept for a retry (retelling), and
	// survivors hear removing.
	AppContract bool
}

// Announce tells ready members about members that left (delnodes) and members that
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
func Announce(ctx workflow.Context, c Cluster, o Options) {
	if o.AppContract {
		retell(ctx, c, o) // what retried members were not told comes first
	}
	if o.Lifecycle {
		announceJoined(ctx, c, o)
		announceLeft(ctx, c, o)
		return
	}
	announceLeft(ctx, c, o)
	announceJoined(ctx, c, o)
}

// announceLeft runs delnodes about the members that left, a role's at a time.
func announceLeft(ctx workflow.Context, c Cluster, o Options) {
	removed := c.Removed()
	for len(*removed) > 0 && ctx.Err() == nil {
		role := (*removed)[0].Role
		var left, rest []workflows.RemovedNode
		for _, n := range *removed {
			if n.Role == role {
				left = append(left, n)
			} else {
				rest = append(rest, n)
			}
		}
		nodes := make([]plan.Member, len(left))
		for i, n := range left {
			_, ordinal, _ := spec.ParseMemberName(c.State().Name, n.Name)
			nodes[i] = plan.Member{Name: n.Name, Ordinal: ordinal, ListedIn: n.ListedIn, Announced: n.Announced, UnlistedFrom: n.UnlistedFrom}
		}
		notify(ctx, c, o, plan.OpDelNodes, role, nodes)
		if ctx.Err() == nil {
			*removed = rest
		}
	}
}

// announceJoined runs addnodes about the members that joined, a role's at a time.
func announceJoined(ctx workflow.Context, c Cluster, o Options) {
	for i := range c.State().Roles {
		if ctx.Err() != nil {
			return
		}
		rs := &c.State().Roles[i]
		joined := plan.Joined(*rs)
		if len(joined) == 0 {
			continue
		}
		notify(ctx, c, o, plan.OpAddNodes, rs.Name, joined)
		if ctx.Err() == nil {
			rs = c.State().Role(rs.Name) // the roles may have moved while notify waited
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
func notify(ctx workflow.Context, c Cluster, o Options, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	if !o.Bounded {
		return notifyByName(ctx, c, o, op, nodesRole, nodes)
	}
	n := plan.NewNotice(c.State().Notices+1, c.State().Name, op, nodesRole, nodes)
	missed := missedBy(c, o, n)
	var told []plan.RoleWork
	if step := plan.Announcement(op, n).Steps[0]; ctx.Err() == nil {
		if work := c.StepWork(ctx, c.Desired(), step, nil); len(work) > 0 {
			// The notice travels once per host, before anyone is told.
			c.State().Notices = n.ID
			failed := c.WriteFiles(ctx, fmt.Sprintf("notice %d of %s", n.ID, c.State().Name), hostsOf(work), backend.ClusterFiles{Cluster: c.State().Name, Home: c.State().Home, Notice: &n})
			if len(failed) > 0 {
				work = untold(ctx, c, o, op, work, failed)
			}
			told = work
			c.RunStep(ctx, step, work)
			c.Logger().Info("Announced membership change", "Event", op, "Role", nodesRole, "Notice", n.ID, "Nodes", n.Size(), "Roles", fmt.Sprint(workRoles(told)))
		}
	}
	if ctx.Err() == nil {
		keepUntold(c, o, n, told, missed)
	}
	return told
}

// untold takes out of the work the members on hosts where the notice could not be written,
// and puts them in config_error with the reason: they cannot be told.
func untold(ctx workflow.Context, c Cluster, o Options, op plan.RoleOperation, work []plan.RoleWork, failed map[string]error) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		rs := c.State().Role(rw.Role)
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
	c.Touch(ctx)
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
func notifyByName(ctx workflow.Context, c Cluster, o Options, op plan.RoleOperation, nodesRole string, nodes []plan.Member) []plan.RoleWork {
	step := plan.AnnouncementByName(op, nodesRole, nodes).Steps[0]
	if ctx.Err() != nil {
		return nil
	}
	told := c.StepWork(ctx, c.Desired(), step, nil)
	if len(told) > 0 {
		c.RunStep(ctx, step, told)
		c.Logger().Info("Announced membership change", "Event", op, "Role", nodesRole, "Nodes", fmt.Sprint(told[0].Nodes.Nodes), "Roles", fmt.Sprint(workRoles(told)))
	}
	return told
}
