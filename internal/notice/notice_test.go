package notice

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

// The notice tells each member exactly what telling it node by node would: every node of
// the notice it does not know (addnodes) or knew (delnodes), never itself, in ordinal
// order. Checked against that node-by-node reading on random notices and members.
func TestAboutTellsWhatANodeByNodeReadingTells(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		event := spec.EventAddNodes
		if trial%2 == 1 {
			event = spec.EventDelNodes
		}
		var nodes []Node
		for o := range 1 + r.IntN(60) {
			if r.IntN(3) == 0 {
				continue // gaps make several ranges
			}
			nodes = append(nodes, Node{Ordinal: o, Class: Class{ListedIn: r.IntN(4), UnlistedFrom: r.IntN(3) * r.IntN(4), Announced: r.IntN(4) == 0}})
		}
		r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		n := New(trial+1, "c", event, "w", nodes)
		if err := n.Check(); err != nil {
			t.Fatal(err)
		}
		if n.Size() != len(nodes) {
			t.Fatalf("notice names %d nodes, want %d", n.Size(), len(nodes))
		}
		for _, member := range []string{"c-w-3", "c-w-7", "c-x-3", "c-w-100"} {
			k := Knowledge{ListedIn: r.IntN(4), KnowsUpTo: r.IntN(4)}
			var want []string
			for _, node := range slices.SortedFunc(slices.Values(nodes), func(a, b Node) int { return a.Ordinal - b.Ordinal }) {
				name := spec.MemberName("c", "w", node.Ordinal)
				if name != member && Knows(k, node.Class) == (event == spec.EventDelNodes) {
					want = append(want, name)
				}
			}
			if got := n.About(member, k); !slices.Equal(got, want) {
				t.Fatalf("trial %d, %s %+v: told %v, want %v", trial, member, k, got, want)
			}
			if got := n.Count(member, k); got != len(want) {
				t.Fatalf("trial %d, %s %+v: count %d, want %d", trial, member, k, got, len(want))
			}
		}
	}
}

// A notice of N contiguous nodes of one class is one range, whatever N: what travels does
// not grow with the nodes named.
func TestNoticeNamesContiguousNodesByOneRange(t *testing.T) {
	var nodes []Node
	for o := 400; o < 1400; o++ {
		nodes = append(nodes, Node{Ordinal: o, Class: Class{ListedIn: 5}})
	}
	n := New(1, "c", spec.EventAddNodes, "w", nodes)
	if len(n.Groups) != 1 || !slices.Equal(n.Groups[0].Ordinals, []Range{{400, 1399}}) {
		t.Errorf("groups %+v, want one range 400-1399", n.Groups)
	}
	if got := n.Count("c-w-0", Knowledge{ListedIn: 1, KnowsUpTo: 4}); got != 1000 {
		t.Errorf("a member knowing configmeta 4 is told of %d nodes, want 1000", got)
	}
	if got := n.Count("c-w-0", Knowledge{ListedIn: 1, KnowsUpTo: 5}); got != 0 {
		t.Errorf("a member knowing configmeta 5 is told of %d nodes, want none", got)
	}
}

func TestCheckRefusesWhatAHostCannotActOn(t *testing.T) {
	good := New(1, "c", spec.EventAddNodes, "w", []Node{{Ordinal: 1}})
	for name, n := range map[string]Notice{
		"no ID":        {Cluster: "c", Event: spec.EventAddNodes, Role: "w"},
		"other event":  {ID: 1, Cluster: "c", Event: spec.EventConfigure, Role: "w"},
		"bad cluster":  {ID: 1, Cluster: "../x", Event: spec.EventAddNodes, Role: "w"},
		"bad role":     {ID: 1, Cluster: "c", Event: spec.EventAddNodes, Role: "W/"},
		"bad range":    {ID: 1, Cluster: "c", Event: spec.EventAddNodes, Role: "w", Groups: []Group{{Ordinals: []Range{{5, 2}}}}},
		"too many":     {ID: 1, Cluster: "c", Event: spec.EventAddNodes, Role: "w", Groups: []Group{{Ordinals: []Range{{0, spec.MaxClusterMembers}}}}},
		"negative one": {ID: 1, Cluster: "c", Event: spec.EventAddNodes, Role: "w", Groups: []Group{{Ordinals: []Range{{-1, 0}}}}},
	} {
		if err := n.Check(); err == nil {
			t.Errorf("%s: %s passed the check", name, fmt.Sprint(n))
		}
	}
	if err := good.Check(); err != nil {
		t.Error(err)
	}
}
