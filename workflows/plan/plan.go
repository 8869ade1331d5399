// Package plan is clusterflow's planner: the member model and pure functions that decide
// what a cluster's next step does. It has no SDK, no clock and no side effects, so table
// tests run it as it is.
package plan

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/spec"
)

// The planner decides; the executor (the workflows package) does. Each function here takes
// the desired spec and the members as observed now, and returns what the next step must
// do: which members to forget, tear down, create or configure, and who must be told what.
// The executor asks for the next step right when it takes it, so a change that arrived
// while the previous step ran is planned for.

// RoleWork is one role's share of a step: the members its child workflow acts on and, for a
// notification, the notice they are told (or, in runs from before notices, the nodes
// joining or leaving and those each member is told about).
type RoleWork struct {
	Role string
	// Batch, when set, tells this work's children apart from others of the same operation
	// and role (a rollout's batches). MaxInFlight, when set, is how many of its members
	// run at once, in place of the role's own maxInFlight (a rollout's batch all at once,
	// an action's --parallel).
	Batch       string
	MaxInFlight int
	// Action is the action an OpAction runs.
	Action      *ActionCall
	Members     []Member
	Notice      *NoticeRef
	Nodes       *NodeGroup
	MemberNodes [][]string
}

// ActionCall is a named action with its parameters, as a role's script is run for it:
// --action NAME --param k=v ....
type ActionCall struct {
	Name   string   `json:"name"`
	Params []string `json:"params,omitempty"`
}

// DesiredMembers is how many members the desired spec wants in a role; none for a role it
// no longer has.
func DesiredMembers(desired spec.Cluster, role string) int {
	r, ok := desired.Role(role)
	if !ok {
		return 0
	}
	return r.Members
}

// SplitMembers divides a role's existing (not deleted) members into the keep it wants and
// the others. Members leaving go; members down or flapping are the first to go when a role
// shrinks; otherwise the lowest ordinals stay.
func SplitMembers(rs RoleState, keep int) (wanted, unwanted []Member) {
	healthy := 0
	for _, m := range rs.Members {
		if m.State != MemberDeleted && !m.Leaving && !m.State.Unavailable() {
			healthy++
		}
	}
	keepUnavailable := max(keep-healthy, 0)
	keptHealthy, keptUnavailable := 0, 0
	for _, m := range rs.Members {
		switch {
		case m.State == MemberDeleted:
		case m.Leaving:
			unwanted = append(unwanted, m)
		case !m.State.Unavailable() && keptHealthy < keep:
			keptHealthy++
			wanted = append(wanted, m)
		case m.State.Unavailable() && keptUnavailable < keepUnavailable:
			keptUnavailable++
			wanted = append(wanted, m)
		default:
			unwanted = append(unwanted, m)
		}
	}
	return wanted, unwanted
}

// removal is one level's removal: the unwanted members never created are forgotten,
// and the others are torn down and removed, a child per role. Members being replaced stay
// unless replacedToo: they go once their successors are set up.
func removal(desired spec.Cluster, roles []RoleState, level []string, replacedToo, graceful bool) (forget []string, work []RoleWork) {
	for _, name := range level {
		rs := RoleOf(roles, name)
		if rs == nil {
			continue
		}
		_, unwanted := SplitMembers(*rs, DesiredMembers(desired, name))
		var present []Member
		for _, m := range unwanted {
			switch {
			case m.State == MemberReplacing && !replacedToo:
			case graceful && m.Decommission == DecommissionFailed: // it stays until a retry
			case m.State == MemberPending:
				forget = append(forget, m.Name)
			default:
				present = append(present, m)
			}
		}
		if len(present) > 0 {
			work = append(work, RoleWork{Role: name, Members: present})
		}
	}
	return forget, work
}

// decommission is one level's decommission: the members its removal would tear down next,
// in roles that subscribe to decommission, whose configure ran and that have not been
// decommissioned yet, a child per role.
func decommission(desired spec.Cluster, roles []RoleState, level []string, replacedToo bool) []RoleWork {
	_, leaving := removal(desired, roles, level, replacedToo, true)
	var work []RoleWork
	for _, rw := range leaving {
		// A role an apply removed has no spec here: its members leave as they did before.
		r, ok := desired.Role(rw.Role)
		if !ok || !r.Wants(spec.EventDecommission) {
			continue
		}
		var members []Member
		for _, m := range rw.Members {
			if m.ConfigureRan() && m.Decommission == "" && m.State != MemberRogue {
				members = append(members, m)
			}
		}
		if len(members) > 0 {
			work = append(work, RoleWork{Role: rw.Role, Members: members})
		}
	}
	return work
}

// Removing is, by role, the members a level's graceful removal is about to take whose
// survivors have not yet been told so (Member.RemovingTold): those whose configure ran,
// still there to hand their data over. A notice of them goes, a role's at a time, to the
// survivors subscribed to removing that know them, before their decommission.
func Removing(desired spec.Cluster, roles []RoleState, level []string, replacedToo bool) []RoleWork {
	_, leaving := removal(desired, roles, level, replacedToo, true)
	var work []RoleWork
	for _, rw := range leaving {
		var members []Member
		for _, m := range rw.Members {
			if m.ConfigureRan() && !m.RemovingTold && m.Decommission == "" && m.State != MemberRogue {
				members = append(members, m)
			}
		}
		if len(members) > 0 {
			work = append(work, RoleWork{Role: rw.Role, Members: members})
		}
	}
	return work
}

// Stops lists, for each role being configured now (configuring maps it to the members
// its child sets up), the members the desired spec no longer wants and not yet stopped:
// their scripts are killed rather than finished for a teardown.
func Stops(desired spec.Cluster, roles []RoleState, configuring map[string][]string) []RoleWork {
	var work []RoleWork
	for _, role := range slices.Sorted(maps.Keys(configuring)) {
		rs := RoleOf(roles, role)
		if rs == nil {
			continue
		}
		_, unwanted := SplitMembers(*rs, DesiredMembers(desired, role))
		var stop []Member
		for _, m := range unwanted {
			if slices.Contains(configuring[role], m.Name) && !m.Leaving {
				stop = append(stop, m)
			}
		}
		if len(stop) > 0 {
			work = append(work, RoleWork{Role: role, Members: stop})
		}
	}
	return work
}

// NewMembers lists the members a role is short of, with the next ordinals (past every
// ordinal the role has given, as far as NextOrdinal keeps count). Each new
// member takes the place of a member being replaced that has no successor yet, in order,
// and inherits its count of replacements.
func NewMembers(cluster string, rs RoleState, keep int, now time.Time) []Member {
	wanted, _ := SplitMembers(rs, keep)
	next := rs.NextOrdinal
	if n := len(rs.Members); n > 0 {
		next = max(next, rs.Members[n-1].Ordinal+1)
	}
	var added []Member
	for missing := keep - len(wanted); missing > 0; missing-- {
		added = append(added, Member{Name: spec.MemberName(cluster, rs.Name, next), Role: rs.Name, Ordinal: next, State: MemberPending, Since: now})
		next++
	}
	i := 0
	for _, old := range rs.Members {
		if i == len(added) {
			break
		}
		if old.State == MemberReplacing && old.ReplacedBy == "" {
			added[i].Replaces, added[i].Replacements = old.Name, old.Replacements
			i++
		}
	}
	return added
}

// Grow adds to a role the members it is short of (NewMembers), links the members they
// replace to them, and, for a cluster on hosts, places them on hosts that fit the role
// (PlaceMembers over hosts). It returns the members added, as placed.
func Grow(cluster string, role spec.Role, rs *RoleState, want int, onHosts bool, hosts []Host, now time.Time) []Member {
	added := NewMembers(cluster, *rs, want, now)
	for _, m := range added {
		if m.Replaces != "" {
			rs.Member(m.Replaces).ReplacedBy = m.Name
		}
	}
	rs.Members = append(rs.Members, added...)
	if onHosts && len(added) > 0 {
		rs.Members = PlaceMembers(role, rs.Members, hosts)
		added = rs.Members[len(rs.Members)-len(added):]
	}
	return added
}

// MarkBootstrap picks, among members just added to a role none of whose members was set
// up, the one that forms the app's cluster: the replacement of the member that was to
// form it, or the first added if no member of the role is to.
func MarkBootstrap(rs *RoleState, added []Member) {
	for i := range added {
		if replaced := rs.Member(added[i].Replaces); replaced != nil && replaced.Bootstrap {
			replaced.Bootstrap = false
			added[i].Bootstrap, rs.Member(added[i].Name).Bootstrap = true, true
			return
		}
	}
	if slices.ContainsFunc(rs.Members, func(m Member) bool { return m.Bootstrap && m.State != MemberDeleted }) {
		return
	}
	added[0].Bootstrap, rs.Member(added[0].Name).Bootstrap = true, true
}

// configure is one level's setup: every wanted member still pending is configured, a
// child per role.
func configure(desired spec.Cluster, roles []RoleState, level []string) []RoleWork {
	var work []RoleWork
	for _, name := range level {
		rs := RoleOf(roles, name)
		wanted, _ := SplitMembers(*rs, DesiredMembers(desired, name))
		var pending []Member
		for _, m := range wanted {
			if m.State == MemberPending && m.Unplaced == "" {
				pending = append(pending, m)
			}
		}
		if len(pending) > 0 {
			work = append(work, RoleWork{Role: name, Members: pending})
		}
	}
	return work
}

// LevelProblems explains why a level's roles are not all set up, if they are not. Members
// down or flapping were set up: their health is the state machine's concern.
func LevelProblems(desired spec.Cluster, roles []RoleState, level []string) []string {
	var failed []string
	for _, name := range level {
		wanted, _ := SplitMembers(*RoleOf(roles, name), DesiredMembers(desired, name))
		setUp := CountState(wanted, setUpStates...)
		if n := CountState(wanted, MemberConfigError); n > 0 {
			failed = append(failed, fmt.Sprintf("role %s failed: %d of %d members in config_error", name, n, len(wanted)))
		} else if ready := CountReady(wanted); setUp < len(wanted) {
			failed = append(failed, fmt.Sprintf("role %s: %d of %d members ready", name, ready, len(wanted)))
		}
	}
	return failed
}

// RoleOf finds a role among roles.
func RoleOf(roles []RoleState, name string) *RoleState {
	return Named(roles, name, func(r *RoleState) string { return r.Name })
}

// FailedSetups names, role by role in the order given, the wanted members whose setup or
// notification failed in the roles that replace such members (replaceOnConfigError):
// each is to be replaced, if its slot has replacements left (the health state machine
// decides that).
func FailedSetups(desired spec.Cluster, roles []RoleState, names []string) []string {
	var failed []string
	for _, name := range names {
		r, ok := desired.Role(name)
		rs := RoleOf(roles, name)
		if !ok || rs == nil || !r.Health.ReplaceOnConfigError {
			continue
		}
		wanted, _ := SplitMembers(*rs, DesiredMembers(desired, name))
		for _, m := range wanted {
			if m.State == MemberConfigError {
				failed = append(failed, m.Name)
			}
		}
	}
	return failed
}
