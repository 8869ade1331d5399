package workflows

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
)

// The planner decides; the executor does. Each function here takes the desired spec and the
// members as observed now, and returns what the next step must do: which members to forget,
// tear down, create or configure, and who must be told what. They have no SDK and no side
// effects, and plan_test.go tests them as tables. The executor (converge.go, remove.go,
// announce.go) asks for the next step right when it takes it, so a change that arrived
// while the previous step ran is planned for, and carries the step out through runLevel.

// roleWork is one role's share of a step: the members its child workflow acts on and, for a
// notification, the notice they are told (or, in runs from before notices, the nodes
// joining or leaving and those each member is told about).
type roleWork struct {
	role        string
	members     []Member
	notice      *NoticeRef
	nodes       *NodeGroup
	memberNodes [][]string
}

// desiredMembers is how many members the desired spec wants in a role; none for a role it
// no longer has.
func desiredMembers(desired spec.Cluster, role string) int {
	r, ok := desired.Role(role)
	if !ok {
		return 0
	}
	return r.Members
}

// splitMembers divides a role's existing (not deleted) members into the keep it wants and
// the others. Members leaving go; members down or flapping are the first to go when a role
// shrinks; otherwise the lowest ordinals stay.
func splitMembers(rs roleState, keep int) (wanted, unwanted []Member) {
	healthy := 0
	for _, m := range rs.Members {
		if m.State != MemberDeleted && !m.Leaving && !m.State.unavailable() {
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
		case !m.State.unavailable() && keptHealthy < keep:
			keptHealthy++
			wanted = append(wanted, m)
		case m.State.unavailable() && keptUnavailable < keepUnavailable:
			keptUnavailable++
			wanted = append(wanted, m)
		default:
			unwanted = append(unwanted, m)
		}
	}
	return wanted, unwanted
}

// planRemoval is one level's removal: the unwanted members never created are forgotten,
// and the others are torn down and removed, a child per role. Members being replaced stay
// unless replacedToo: they go once their successors are set up.
func planRemoval(desired spec.Cluster, roles []roleState, level []string, replacedToo bool) (forget []string, work []roleWork) {
	for _, name := range level {
		rs := roleOf(roles, name)
		if rs == nil {
			continue
		}
		_, unwanted := splitMembers(*rs, desiredMembers(desired, name))
		var present []Member
		for _, m := range unwanted {
			switch {
			case m.State == MemberReplacing && !replacedToo:
			case m.State == MemberPending:
				forget = append(forget, m.Name)
			default:
				present = append(present, m)
			}
		}
		if len(present) > 0 {
			work = append(work, roleWork{role: name, members: present})
		}
	}
	return forget, work
}

// planStops lists, for each role being configured now (configuring maps it to the members
// its child sets up), the members the desired spec no longer wants and not yet stopped:
// their scripts are killed rather than finished for a teardown.
func planStops(desired spec.Cluster, roles []roleState, configuring map[string][]string) []roleWork {
	var work []roleWork
	for _, role := range slices.Sorted(maps.Keys(configuring)) {
		rs := roleOf(roles, role)
		if rs == nil {
			continue
		}
		_, unwanted := splitMembers(*rs, desiredMembers(desired, role))
		var stop []Member
		for _, m := range unwanted {
			if slices.Contains(configuring[role], m.Name) && !m.Leaving {
				stop = append(stop, m)
			}
		}
		if len(stop) > 0 {
			work = append(work, roleWork{role: role, members: stop})
		}
	}
	return work
}

// planDeletion is one level of a delete: a removal that wants no member at all, so members
// never created are forgotten and every other one, whatever its state, is torn down.
func planDeletion(roles []roleState, level []string) (forget []string, work []roleWork) {
	return planRemoval(spec.Cluster{}, roles, level, true)
}

// planNewMembers lists the members a role is short of, with the next ordinals. Each new
// member takes the place of a member being replaced that has no successor yet, in order,
// and inherits its count of replacements.
func planNewMembers(cluster string, rs roleState, keep int, now time.Time) []Member {
	wanted, _ := splitMembers(rs, keep)
	next := 0
	if n := len(rs.Members); n > 0 {
		next = rs.Members[n-1].Ordinal + 1
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

// planConfigure is one level's setup: every wanted member still pending is configured, a
// child per role.
func planConfigure(desired spec.Cluster, roles []roleState, level []string) []roleWork {
	var work []roleWork
	for _, name := range level {
		rs := roleOf(roles, name)
		wanted, _ := splitMembers(*rs, desiredMembers(desired, name))
		var pending []Member
		for _, m := range wanted {
			if m.State == MemberPending && m.Unplaced == "" {
				pending = append(pending, m)
			}
		}
		if len(pending) > 0 {
			work = append(work, roleWork{role: name, members: pending})
		}
	}
	return work
}

// levelProblems explains why a level's roles are not all set up, if they are not. Members
// down or flapping were set up: their health is the state machine's concern.
func levelProblems(desired spec.Cluster, roles []roleState, level []string) []string {
	var failed []string
	for _, name := range level {
		wanted, _ := splitMembers(*roleOf(roles, name), desiredMembers(desired, name))
		setUp := countState(wanted, setUpStates...)
		if n := countState(wanted, MemberConfigError); n > 0 {
			failed = append(failed, fmt.Sprintf("role %s failed: %d of %d members in config_error", name, n, len(wanted)))
		} else if ready := CountReady(wanted); setUp < len(wanted) {
			failed = append(failed, fmt.Sprintf("role %s: %d of %d members ready", name, ready, len(wanted)))
		}
	}
	return failed
}

// planNotice says who is told a notice of nodes joining (addnodes) or leaving (delnodes):
// every ready member whose role subscribes to the event and that does not know (addnodes)
// or knew (delnodes) some of them; a child per role. Each member's host works out which
// nodes from the notice and what the member knows, so the work names no nodes.
func planNotice(desired spec.Cluster, roles []roleState, n notice.Notice) []roleWork {
	ref := &NoticeRef{ID: n.ID, Role: n.Role}
	var work []roleWork
	for _, rs := range roles {
		r, ok := desired.Role(rs.Name)
		if !ok || !r.Wants(n.Event) {
			continue
		}
		var recipients []Member
		for _, m := range rs.Members {
			if m.State == MemberReady && n.Count(m.Name, m.knowledge()) > 0 {
				recipients = append(recipients, m)
			}
		}
		if len(recipients) > 0 {
			work = append(work, roleWork{role: rs.Name, members: recipients, notice: ref})
		}
	}
	return work
}

// newNotice is the notice of nodes (of one role) joining or leaving.
func newNotice(id int, cluster string, op RoleOperation, role string, nodes []Member) notice.Notice {
	of := make([]notice.Node, len(nodes))
	for i, n := range nodes {
		of[i] = notice.Node{Ordinal: n.Ordinal, Class: n.class()}
	}
	return notice.New(id, cluster, spec.Event(op), role, of)
}

// planNotification is planNotice as runs from before notices had it: the work names, for
// every member, the nodes it is told about.
func planNotification(desired spec.Cluster, roles []roleState, op RoleOperation, nodesRole string, nodes []Member) []roleWork {
	event := spec.Event(op)
	group := &NodeGroup{Role: nodesRole}
	for _, n := range nodes {
		group.Nodes = append(group.Nodes, n.Name)
	}
	classes := classifyNodes(nodes)
	var work []roleWork
	for _, rs := range roles {
		r, ok := desired.Role(rs.Name)
		if !ok || !r.Wants(event) {
			continue
		}
		var recipients []Member
		var told [][]string
		for _, m := range rs.Members {
			if m.State != MemberReady {
				continue
			}
			if about := classes.about(m, op); len(about) > 0 {
				recipients = append(recipients, m)
				told = append(told, about)
			}
		}
		if len(recipients) > 0 {
			work = append(work, roleWork{role: rs.Name, members: recipients, nodes: group, memberNodes: told})
		}
	}
	return work
}

// nodeClasses groups nodes by what decides who knows them, so that deciding what each of
// thousands of members is told costs a few comparisons rather than one per node.
type nodeClasses struct {
	nodes []Member
	all   []string
	named map[string]bool
	reps  []Member // one node per class
	class []int    // each node's class
}

func classifyNodes(nodes []Member) nodeClasses {
	c := nodeClasses{nodes: nodes, all: make([]string, len(nodes)), named: map[string]bool{}, class: make([]int, len(nodes))}
	type key struct {
		listedIn, unlistedFrom int
		announced              bool
	}
	index := map[key]int{}
	for i, n := range nodes {
		c.all[i], c.named[n.Name] = n.Name, true
		k := key{n.ListedIn, n.UnlistedFrom, n.Announced}
		j, ok := index[k]
		if !ok {
			j = len(c.reps)
			index[k] = j
			c.reps = append(c.reps, n)
		}
		c.class[i] = j
	}
	return c
}

// about lists the nodes m is told of: those it does not know for addnodes, those it knew
// for delnodes; never itself. Members told of every node share one list.
func (c nodeClasses) about(m Member, op RoleOperation) []string {
	tell := make([]bool, len(c.reps))
	all, none := true, true
	for j, rep := range c.reps {
		tell[j] = m.knows(rep) == (op == OpDelNodes)
		all, none = all && tell[j], none && !tell[j]
	}
	if none {
		return nil
	}
	if all && !c.named[m.Name] {
		return c.all
	}
	var about []string
	for i, n := range c.nodes {
		if n.Name != m.Name && tell[c.class[i]] {
			about = append(about, n.Name)
		}
	}
	return about
}

// roleOf finds a role among roles.
func roleOf(roles []roleState, name string) *roleState {
	return named(roles, name, func(r *roleState) string { return r.Name })
}
