package announce

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Retelling (change.AppContract): a member whose addnodes or delnodes failed keeps the
// notice it was not told, and those of the membership changes that came while it was in
// config_error since (it hears none of them there). clusterflow retry makes it ready again,
// and the next announcement first tells it those notices again, oldest first, as they
// were: the same nodes, as its knowledge then and now is the same. A removing is not kept:
// a retry tells it again to every survivor (see TellRemoving).

// keptUntoldNotices bounds the notices the state keeps for members to be told again. A
// member whose notice is no longer kept cannot be retried; a replacement moves it on.
const keptUntoldNotices = 8

// KeepsUntold says whether a notification of this event is kept for a retry.
func (o Options) KeepsUntold(event spec.Event) bool {
	return o.AppContract && (event == spec.EventAddNodes || event == spec.EventDelNodes)
}

// missedBy names the members in config_error after a failed notification whom the
// notice would tell, were they ready: they are to be told it on their retry.
func missedBy(c Cluster, o Options, n notice.Notice) []string {
	if !o.KeepsUntold(n.Event) {
		return nil
	}
	var names []string
	for _, rs := range c.State().Roles {
		if r, ok := c.Desired().Role(rs.Name); !ok || !r.Wants(n.Event) {
			continue
		}
		for _, m := range rs.Members {
			if m.State == plan.MemberConfigError && len(m.Untold) > 0 && n.Count(m.Name, m.Knowledge()) > 0 {
				names = append(names, m.Name)
			}
		}
	}
	return names
}

// keepUntold keeps the notice for the members it told that failed, and those it missed.
func keepUntold(c Cluster, o Options, n notice.Notice, told []plan.RoleWork, missed []string) {
	if !o.KeepsUntold(n.Event) {
		return
	}
	untold := missed
	for _, rw := range told {
		for _, m := range rw.Members {
			if _, live := c.State().FindMember(m.Name); live != nil && live.State == plan.MemberConfigError && live.Event == n.Event {
				untold = append(untold, m.Name)
			}
		}
	}
	if len(untold) == 0 {
		return
	}
	c.State().Notices = max(c.State().Notices, n.ID) // a notice no one was told was never numbered
	for _, name := range untold {
		if _, m := c.State().FindMember(name); m != nil && !slices.Contains(m.Untold, n.ID) {
			m.Untold = append(m.Untold, n.ID)
		}
	}
	c.State().KeptNotices = append(c.State().KeptNotices, n)
	if extra := len(c.State().KeptNotices) - keptUntoldNotices; extra > 0 {
		c.State().KeptNotices = slices.Delete(c.State().KeptNotices, 0, extra)
	}
}

// keptNotice is the kept notice of that ID, if it still is.
func keptNotice(s *workflows.ClusterState, id int) (notice.Notice, bool) {
	for _, n := range s.KeptNotices {
		if n.ID == id {
			return n, true
		}
	}
	return notice.Notice{}, false
}

// UntoldProblem says why a member that failed a notification cannot be retried, or "".
func UntoldProblem(s *workflows.ClusterState, m plan.Member) string {
	if len(m.Untold) == 0 {
		return fmt.Sprintf("member %s failed %s before retry kept what it was not told; a replacement moves it on", m.Name, m.Event)
	}
	for _, id := range m.Untold {
		if _, ok := keptNotice(s, id); !ok {
			return fmt.Sprintf("member %s was not told notice %d, which is no longer kept (the latest %d are); a replacement moves it on", m.Name, id, keptUntoldNotices)
		}
	}
	return ""
}

// retell tells the ready members with notices untold those notices, oldest first, a notice
// at a time. A member that fails one again is in config_error again, keeping the rest.
func retell(ctx workflow.Context, c Cluster, o Options) {
	for ctx.Err() == nil {
		id := 0
		for _, rs := range c.State().Roles {
			for _, m := range rs.Members {
				if m.State == plan.MemberReady && len(m.Untold) > 0 && (id == 0 || m.Untold[0] < id) {
					id = m.Untold[0]
				}
			}
		}
		if id == 0 {
			break
		}
		n, kept := keptNotice(c.State(), id)
		var work []plan.RoleWork
		for _, rs := range c.State().Roles {
			var members []plan.Member
			for j := range rs.Members {
				m := &rs.Members[j]
				switch {
				case m.State != plan.MemberReady || len(m.Untold) == 0 || m.Untold[0] != id:
				case !kept: // validateRetry refuses this; a notice trimmed since is said so
					m.State, m.Since = plan.MemberConfigError, workflow.Now(ctx)
					m.Detail = fmt.Sprintf("%s: notice %d is no longer kept; a replacement moves it on", m.Event, id)
				default:
					members = append(members, *m)
				}
			}
			if len(members) > 0 {
				work = append(work, plan.RoleWork{Role: rs.Name, Members: members, Notice: &plan.NoticeRef{ID: n.ID, Role: n.Role}})
			}
		}
		if len(work) == 0 {
			continue
		}
		op := plan.RoleOperation(n.Event)
		if failed := c.WriteFiles(ctx, fmt.Sprintf("notice %d of %s, again", n.ID, c.State().Name), hostsOf(work), backend.ClusterFiles{Cluster: c.State().Name, Home: c.State().Home, Notice: &n}); len(failed) > 0 {
			work = untold(ctx, c, o, op, work, failed)
		}
		c.RunStep(ctx, plan.Step{Op: op}, work)
		if ctx.Err() != nil {
			return
		}
		for _, rw := range work {
			for _, m := range rw.Members {
				if _, live := c.State().FindMember(m.Name); live != nil && live.State == plan.MemberReady && len(live.Untold) > 0 && live.Untold[0] == id {
					live.Untold = live.Untold[1:]
					if len(live.Untold) == 0 {
						live.Untold = nil
					}
				}
			}
		}
		c.Logger().Info("Told a notice again", "Event", n.Event, "Notice", n.ID, "Roles", fmt.Sprint(workRoles(work)))
		c.Touch(ctx)
	}
}
