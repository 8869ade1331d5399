package plan

import (
	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
)

// Who is told of a membership change: a notice names the nodes once, and each member
// works out from it what it does not know yet.

// Notice says who is told a notice of nodes joining (addnodes), leaving (removing) or left
// (delnodes): every ready member not on its way out (see Member.Decommission) whose role subscribes
// to the event and that does not know (addnodes) or knew (delnodes) some of them; a child
// per role. Each member's host works out which
// nodes from the notice and what the member knows, so the work names no nodes.
func Notice(desired spec.Cluster, roles []RoleState, n notice.Notice) []RoleWork {
	ref := &NoticeRef{ID: n.ID, Role: n.Role}
	var work []RoleWork
	for _, rs := range roles {
		r, ok := desired.Role(rs.Name)
		if !ok || !r.Wants(n.Event) {
			continue
		}
		var leaving map[string]bool // a removing goes to survivors only
		if n.Event == spec.EventRemoving {
			_, unwanted := SplitMembers(rs, DesiredMembers(desired, rs.Name))
			leaving = map[string]bool{}
			for _, m := range unwanted {
				leaving[m.Name] = true
			}
		}
		var recipients []Member
		for _, m := range rs.Members {
			// A member decommissioned, or waiting on a failed decommission, is on its way
			// out: it keeps the output of its decommission, and is told of nothing more.
			if m.State == MemberReady && m.Decommission == "" && !leaving[m.Name] && n.Count(m.Name, m.Knowledge()) > 0 {
				recipients = append(recipients, m)
			}
		}
		if len(recipients) > 0 {
			work = append(work, RoleWork{Role: rs.Name, Members: recipients, Notice: ref})
		}
	}
	return work
}

// NewNotice is the notice of nodes (of one role) joining or leaving.
func NewNotice(id int, cluster string, op RoleOperation, role string, nodes []Member) notice.Notice {
	of := make([]notice.Node, len(nodes))
	for i, n := range nodes {
		of[i] = notice.Node{Ordinal: n.Ordinal, Class: n.class()}
	}
	return notice.New(id, cluster, spec.Event(op), role, of)
}

// Notification is Notice as runs from before notices had it: the work names, for
// every member, the nodes it is told about.
func Notification(desired spec.Cluster, roles []RoleState, op RoleOperation, nodesRole string, nodes []Member) []RoleWork {
	event := spec.Event(op)
	group := &NodeGroup{Role: nodesRole}
	for _, n := range nodes {
		group.Nodes = append(group.Nodes, n.Name)
	}
	classes := classifyNodes(nodes)
	var work []RoleWork
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
			work = append(work, RoleWork{Role: rs.Name, Members: recipients, Nodes: group, MemberNodes: told})
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
