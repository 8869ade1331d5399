// Package notice decides who is told what of a membership change, in one place for the
// workflow (which picks the members to tell) and the host (which turns a notice into each
// member's --nodes). A notice travels once per host, not once per member, and names its
// nodes by ordinal ranges, so that telling N members of M nodes costs O(N + M) in
// payloads, never O(N × M).
//
// A member knows the nodes listed in the configmeta version it configured with, and those
// an earlier addnodes announced; a node replaced before a member was listed was never
// known to it. That is all the workflow needs to keep to tell each member exactly what it
// does not know (addnodes) or knew (delnodes).
package notice

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/clusterflow/clusterflow/spec"
)

// Knowledge is what decides what a member knows: the configmeta version that first listed
// it, and the one it configured with (it knows every member listed up to that one).
type Knowledge struct {
	ListedIn  int `json:"listedIn,omitempty"`
	KnowsUpTo int `json:"knowsUpTo,omitempty"`
}

// Class is what decides who knows a node: the configmeta version that first listed it,
// the one that first left it out (a replaced node), and whether every member was told of it
// by an addnodes.
type Class struct {
	ListedIn     int  `json:"listedIn,omitempty"`
	UnlistedFrom int  `json:"unlistedFrom,omitempty"`
	Announced    bool `json:"announced,omitempty"`
}

// Knows reports whether a member with knowledge k knows a node of class c.
func Knows(k Knowledge, c Class) bool {
	if c.UnlistedFrom > 0 && k.ListedIn >= c.UnlistedFrom {
		return false // the member joined after the node left configmeta, and no one announces a leaver
	}
	return c.Announced || (c.ListedIn > 0 && k.KnowsUpTo >= c.ListedIn)
}

// Range is the ordinals from Range[0] to Range[1], both included.
type Range [2]int

// Ranges writes ordinals as ranges, sorting them and dropping repeats.
func Ranges(ordinals []int) []Range {
	sorted := slices.Clone(ordinals)
	slices.Sort(sorted)
	var out []Range
	for _, o := range slices.Compact(sorted) {
		if n := len(out); n > 0 && out[n-1][1]+1 == o {
			out[n-1][1] = o
		} else {
			out = append(out, Range{o, o})
		}
	}
	return out
}

// Group is the nodes of one class, by ordinal ranges.
type Group struct {
	Class
	Ordinals []Range `json:"ordinals"`
}

// Notice is one membership change to tell: nodes of one role that joined (addnodes), left
// (delnodes), or are about to leave (removing).
type Notice struct {
	// ID numbers the cluster's notices; a script run names the notice it tells.
	ID      int        `json:"id"`
	Cluster string     `json:"cluster"`
	Event   spec.Event `json:"event"`
	Role    string     `json:"role"`
	Groups  []Group    `json:"groups"`
}

// Node is one node of a notice as the workflow sees it.
type Node struct {
	Ordinal int
	Class   Class
}

// New builds the notice of nodes (of one role), grouping them by class and their ordinals
// into ranges.
func New(id int, cluster string, event spec.Event, role string, nodes []Node) Notice {
	n := Notice{ID: id, Cluster: cluster, Event: event, Role: role}
	sorted := slices.Clone(nodes)
	slices.SortStableFunc(sorted, func(a, b Node) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
	for _, node := range sorted {
		i := slices.IndexFunc(n.Groups, func(g Group) bool { return g.Class == node.Class })
		if i < 0 {
			n.Groups = append(n.Groups, Group{Class: node.Class})
			i = len(n.Groups) - 1
		}
		g := &n.Groups[i]
		if last := len(g.Ordinals) - 1; last >= 0 && g.Ordinals[last][1]+1 == node.Ordinal {
			g.Ordinals[last][1] = node.Ordinal
		} else if last < 0 || g.Ordinals[last][1] < node.Ordinal {
			g.Ordinals = append(g.Ordinals, Range{node.Ordinal, node.Ordinal})
		}
	}
	return n
}

// tells reports whether a member with knowledge k is told of nodes of class c.
func (n Notice) tells(k Knowledge, c Class) bool {
	return Knows(k, c) == n.Event.AboutLeavers()
}

// Count is how many nodes the member is told of: those it does not know (addnodes) or knew
// (delnodes, removing), never itself. It costs a few steps per class, not one per node.
func (n Notice) Count(member string, k Knowledge) int {
	self, selfOK := n.ordinalOf(member)
	count := 0
	for _, g := range n.Groups {
		if !n.tells(k, g.Class) {
			continue
		}
		for _, r := range g.Ordinals {
			count += r[1] - r[0] + 1
			if selfOK && self >= r[0] && self <= r[1] {
				count--
			}
		}
	}
	return count
}

// About names the nodes the member is told of, in ordinal order.
func (n Notice) About(member string, k Knowledge) []string {
	self, selfOK := n.ordinalOf(member)
	var ordinals []int
	for _, g := range n.Groups {
		if !n.tells(k, g.Class) {
			continue
		}
		for _, r := range g.Ordinals {
			for o := r[0]; o <= r[1]; o++ {
				if !selfOK || o != self {
					ordinals = append(ordinals, o)
				}
			}
		}
	}
	slices.Sort(ordinals)
	names := make([]string, len(ordinals))
	for i, o := range ordinals {
		names[i] = spec.MemberName(n.Cluster, n.Role, o)
	}
	return names
}

// ordinalOf is the member's ordinal when it is of the notice's role.
func (n Notice) ordinalOf(member string) (int, bool) {
	role, ordinal, ok := spec.ParseMemberName(n.Cluster, member)
	return ordinal, ok && role == n.Role
}

// Size is how many nodes the notice names.
func (n Notice) Size() int {
	total := 0
	for _, g := range n.Groups {
		for _, r := range g.Ordinals {
			total += r[1] - r[0] + 1
		}
	}
	return total
}

// Check refuses a notice a host cannot act on.
func (n Notice) Check() error {
	if n.ID <= 0 {
		return fmt.Errorf("notice has no ID")
	}
	if !n.Event.Notifies() {
		return fmt.Errorf("notice %d: event %q is not addnodes, delnodes or removing", n.ID, n.Event)
	}
	if err := spec.CheckName(n.Cluster); err != nil {
		return fmt.Errorf("notice %d: cluster %w", n.ID, err)
	}
	if err := spec.CheckName(n.Role); err != nil {
		return fmt.Errorf("notice %d: role %w", n.ID, err)
	}
	if total := n.Size(); total > spec.MaxClusterMembers || total < 0 {
		return fmt.Errorf("notice %d: names %d nodes; a cluster has at most %d", n.ID, total, spec.MaxClusterMembers)
	}
	for _, g := range n.Groups {
		for _, r := range g.Ordinals {
			if r[0] < 0 || r[1] < r[0] {
				return fmt.Errorf("notice %d: bad ordinal range %v", n.ID, r)
			}
		}
	}
	return nil
}
