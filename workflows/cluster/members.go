package cluster

import (
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"go.temporal.io/sdk/workflow"
)

// A role's members are kept in ordinal order. The desired spec says how many a role wants;
// the lowest ordinals stay and the highest leave first.

// reshape makes the observed state match the desired spec's shape: roles an apply added,
// the dependency plan, and a pending member for every member a role is short of.
func (e *executor) reshape(now time.Time) {
	for _, r := range e.w.spec.Roles {
		if e.w.state.Role(r.Name) == nil {
			e.w.state.Roles = append(e.w.state.Roles, plan.RoleState{Name: r.Name, DependsOn: r.DependsOn})
		}
	}
	e.w.state.Levels = e.plan()
	for i := range e.w.state.Roles {
		rs := &e.w.state.Roles[i]
		rs.Level = plan.LevelOf(e.w.state.Levels, rs.Name)
		rs.Desired = plan.DesiredMembers(e.w.spec, rs.Name)
	}
	e.addPendingMembers(now)
}

// plan is the desired spec's dependency levels (plan.Levels), or, should the spec have
// none, the current ones.
func (e *executor) plan() [][]string {
	levels, err := plan.Levels(e.w.spec, e.w.state.Roles)
	if err != nil {
		// Validators refuse specs with cycles or unknown roles; keep the last good plan.
		e.w.logger.Error("Cannot plan the desired spec; keeping the current plan", "Error", err)
		return e.w.state.Levels
	}
	return levels
}

// addPendingMembers adds members, with the next ordinals, to every role that has fewer than
// it wants.
func (e *executor) addPendingMembers(now time.Time) {
	for i := range e.w.state.Roles {
		e.addPendingTo(&e.w.state.Roles[i], now)
	}
}

// addPendingTo adds the members a role is short of, placed on the hosts that fit it
// (plan.Grow), and returns them.
func (e *executor) addPendingTo(rs *plan.RoleState, now time.Time) []plan.Member {
	r, _ := e.w.RoleSpec(rs.Name)
	var hosts []plan.Host
	if e.w.state.OnHosts {
		hosts = e.w.hostCheck.HostsFor(e.w.state.Hosts, e.w.state.Name, r)
	}
	joining := slices.ContainsFunc(rs.Members, plan.Member.HasSetup)
	added := plan.Grow(e.w.state.Name, r, rs, plan.DesiredMembers(e.w.spec, rs.Name), e.w.state.OnHosts, hosts, now)
	if len(added) > 0 {
		e.w.MembersChanged()
		if e.w.lifecycle {
			rs.NextOrdinal = added[len(added)-1].Ordinal + 1
			for i := range added {
				added[i].Joining = joining
				rs.Member(added[i].Name).Joining = joining
			}
		}
		if e.w.bootstrap && !joining {
			plan.MarkBootstrap(rs, added)
		}
	}
	return added
}

// dropRemoved forgets members that are gone, and roles that are gone with them.
func (e *executor) dropRemoved() {
	roles := e.w.state.Roles[:0]
	for _, rs := range e.w.state.Roles {
		before := len(rs.Members)
		rs.Members = slices.DeleteFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberDeleted })
		if len(rs.Members) != before {
			e.w.MembersChanged()
		}
		if _, wanted := e.w.spec.Role(rs.Name); wanted || len(rs.Members) > 0 {
			roles = append(roles, rs)
		}
	}
	e.w.state.Roles = roles
	for i, level := range e.w.state.Levels {
		e.w.state.Levels[i] = slices.DeleteFunc(level, func(name string) bool { return e.w.state.Role(name) == nil })
	}
	e.w.retiring = slices.DeleteFunc(e.w.retiring, func(r spec.Role) bool { return e.w.state.Role(r.Name) == nil })
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
			added := e.addPendingTo(rs, workflow.Now(ctx))
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
