package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"go.temporal.io/sdk/workflow"
)

// A role's members are kept in ordinal order. The desired spec says how many a role wants;
// the lowest ordinals stay and the highest leave first.

// reshape makes the observed state match the desired spec's shape: roles an apply added,
// the dependency plan, and a pending member for every member a role is short of.
func (c *cluster) reshape(now time.Time) {
	for _, r := range c.spec.Roles {
		if c.state.Role(r.Name) == nil {
			c.state.Roles = append(c.state.Roles, plan.RoleState{Name: r.Name, DependsOn: r.DependsOn})
		}
	}
	c.state.Levels = c.plan()
	for i := range c.state.Roles {
		rs := &c.state.Roles[i]
		rs.Level = plan.LevelOf(c.state.Levels, rs.Name)
		rs.Desired = plan.DesiredMembers(c.spec, rs.Name)
	}
	c.addPendingMembers(now)
}

// plan is the desired spec's dependency levels (plan.Levels), or, should the spec have
// none, the current ones.
func (c *cluster) plan() [][]string {
	levels, err := plan.Levels(c.spec, c.state.Roles)
	if err != nil {
		// Validators refuse specs with cycles or unknown roles; keep the last good plan.
		c.logger.Error("Cannot plan the desired spec; keeping the current plan", "Error", err)
		return c.state.Levels
	}
	return levels
}

// addPendingMembers adds members, with the next ordinals, to every role that has fewer than
// it wants.
func (c *cluster) addPendingMembers(now time.Time) {
	for i := range c.state.Roles {
		c.addPendingTo(&c.state.Roles[i], now)
	}
}

// addPendingTo adds the members a role is short of, placed on the hosts that fit it
// (plan.Grow), and returns them.
func (c *cluster) addPendingTo(rs *plan.RoleState, now time.Time) []plan.Member {
	r, _ := c.RoleSpec(rs.Name)
	var hosts []plan.Host
	if c.state.OnHosts {
		hosts = c.hostCheck.HostsFor(c.state.Hosts, c.state.Name, r)
	}
	joining := slices.ContainsFunc(rs.Members, plan.Member.HasSetup)
	added := plan.Grow(c.state.Name, r, rs, plan.DesiredMembers(c.spec, rs.Name), c.state.OnHosts, hosts, now)
	if len(added) > 0 {
		c.MembersChanged()
		if c.lifecycle {
			rs.NextOrdinal = added[len(added)-1].Ordinal + 1
			for i := range added {
				added[i].Joining = joining
				rs.Member(added[i].Name).Joining = joining
			}
		}
	}
	return added
}

// dropRemoved forgets members that are gone, and roles that are gone with them.
func (c *cluster) dropRemoved() {
	roles := c.state.Roles[:0]
	for _, rs := range c.state.Roles {
		before := len(rs.Members)
		rs.Members = slices.DeleteFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberDeleted })
		if len(rs.Members) != before {
			c.MembersChanged()
		}
		if _, wanted := c.spec.Role(rs.Name); wanted || len(rs.Members) > 0 {
			roles = append(roles, rs)
		}
	}
	c.state.Roles = roles
	for i, level := range c.state.Levels {
		c.state.Levels[i] = slices.DeleteFunc(level, func(name string) bool { return c.state.Role(name) == nil })
	}
	c.retiring = slices.DeleteFunc(c.retiring, func(r spec.Role) bool { return c.state.Role(r.Name) == nil })
}

// syncDesired shows a change's desired counts in status at once, before any operation.
func (c *cluster) syncDesired() {
	for i := range c.state.Roles {
		c.state.Roles[i].Desired = plan.DesiredMembers(c.spec, c.state.Roles[i].Name)
	}
}

// markSetUpNow records that the members about to be set up configure with the configmeta
// just written, and so know the members it lists; a member placed afresh is this
// operation's to set up now.
func (e *executor) markSetUpNow(work []plan.RoleWork) {
	for _, rw := range work {
		rs := e.w.state.Role(rw.Role)
		for i := range rw.Members {
			live := rs.Member(rw.Members[i].Name)
			live.KnowsUpTo, live.Moved = e.w.state.ConfigMetaVersion, false
			rw.Members[i].KnowsUpTo, rw.Members[i].Moved = e.w.state.ConfigMetaVersion, false
		}
	}
}

// skipLaterLevels says why members of roles after a failed level never started.
func (e *executor) skipLaterLevels(failedLevel int, failedRoles string) {
	for _, level := range e.w.state.Levels[failedLevel+1:] {
		for _, name := range level {
			rs := e.w.state.Role(name)
			for i := range rs.Members {
				if rs.Members[i].State == plan.MemberPending {
					rs.Members[i].Detail = "not started: level with " + failedRoles + " failed"
				}
			}
		}
	}
}

// noteRemoved queues a delnodes announcement for the torn-down members that are now gone.
// keptFailedTeardowns bounds the failed teardowns the state keeps (each with up to 8 KiB
// of output tails).
const keptFailedTeardowns = 10

// noteFailedTeardowns keeps the members of a teardown whose script failed: they are
// removed all the same, and these are what status and --wait show of them.
func (e *executor) noteFailedTeardowns(rw plan.RoleWork, now time.Time) {
	rs := e.w.state.Role(rw.Role)
	for _, m := range rw.Members {
		live := rs.Member(m.Name)
		if live == nil || live.State != plan.MemberDeleted || !strings.HasPrefix(live.Detail, workflows.TeardownFailed) {
			continue
		}
		e.w.state.FailedTeardowns = append(e.w.state.FailedTeardowns, workflows.FailedTeardown{
			Member: m.Name, Role: rw.Role, Host: m.Host, Reason: m.RemovedFor, Generation: e.w.state.Generation, At: now,
			Detail: live.Detail, StdoutTail: live.StdoutTail, StderrTail: live.StderrTail,
		})
	}
	if extra := len(e.w.state.FailedTeardowns) - keptFailedTeardowns; extra > 0 {
		e.w.state.FailedTeardowns = slices.Delete(e.w.state.FailedTeardowns, 0, extra)
	}
}

func (c *cluster) noteRemoved(role string, tornDown []plan.Member) {
	rs := c.state.Role(role)
	for _, m := range tornDown {
		if now := rs.Member(m.Name); now != nil && now.State == plan.MemberDeleted {
			c.removed = append(c.removed, workflows.RemovedNode{Role: role, Name: m.Name, ListedIn: now.ListedIn, Announced: now.Announced, UnlistedFrom: now.UnlistedFrom})
		}
	}
}

// dropUnreachable takes members on hosts that cannot be reached out of the work: nothing
// can run there. They are forgotten as if removed; should the host come back, reconcile
// finds their sandboxes and removes them as rogues.
func (e *executor) dropUnreachable(work []plan.RoleWork, now time.Time) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		var reachable []plan.Member
		var dropped []plan.Member
		for _, m := range rw.Members {
			if m.Host == "" || hosts.Reachable(&e.w.state, m.Host) {
				reachable = append(reachable, m)
				continue
			}
			_, live := e.w.state.FindMember(m.Name)
			live.State, live.Since = plan.MemberDeleted, now
			live.Detail = fmt.Sprintf("left on host %s, which is lost; its sandbox is removed if the host comes back", m.Host)
			dropped = append(dropped, m)
		}
		e.w.noteRemoved(rw.Role, dropped)
		if len(reachable) > 0 {
			rw.Members = reachable
			kept = append(kept, rw)
		}
	}
	return kept
}

// grow hands the members a change adds to a role that is configuring now to its
// child, so they start at once rather than when the level ends. They are listed in
// configmeta first, as every member is before it configures.
func (e *executor) grow(ctx workflow.Context) {
	type growth struct {
		op    *role.Operation
		role  string
		added []plan.Member
	}
	var grown []growth
	for _, name := range e.w.runner.ConfiguringRoles() {
		op := e.w.runner.Configuring(name)
		if rs := e.w.state.Role(name); rs != nil {
			added := e.w.addPendingTo(rs, workflow.Now(ctx))
			if e.w.bounded {
				added = added[:min(len(added), e.w.runner.Room(op))]
			}
			if len(added) > 0 {
				grown = append(grown, growth{op, name, added})
			}
		}
	}
	if len(grown) == 0 {
		return
	}
	e.w.Touch(ctx)
	if err := e.WriteClusterFiles(ctx, false); err != nil {
		e.w.logger.Warn("Could not list new members in configmeta; they start once the running level ends", "Error", err)
		return
	}
	for _, g := range grown {
		if !e.w.runner.InProgress(g.role, g.op) {
			continue // the child ended meanwhile; the operation sets them up itself
		}
		rs := e.w.state.Role(g.role)
		for i := range g.added {
			rs.Member(g.added[i].Name).KnowsUpTo = e.w.state.ConfigMetaVersion
			g.added[i].KnowsUpTo = e.w.state.ConfigMetaVersion
		}
		e.w.runner.Grow(ctx, g.op, g.added)
	}
}
