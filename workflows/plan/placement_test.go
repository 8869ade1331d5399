package plan

import (
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

func host(name string, labels ...string) Host {
	h := Host{HostRegistration: HostRegistration{Name: name, Labels: map[string]string{}}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		h.Labels[k] = v
	}
	return h
}

func lost(h Host) Host     { h.Lost = true; return h }
func cordoned(h Host) Host { h.Cordoned = true; return h }

func pendingMembers(n int) []Member {
	var ms []Member
	for i := range n {
		ms = append(ms, Member{Name: spec.MemberName("c", "w", i), Ordinal: i, State: MemberPending})
	}
	return ms
}

func TestPlaceMembers(t *testing.T) {
	a1, a2, b1 := host("a1", "zone=a"), host("a2", "zone=a"), host("b1", "zone=b")
	tests := []struct {
		name      string
		placement spec.Placement
		hosts     []Host
		members   []Member
		want      string // each member's host, or "-" for unplaced
	}{
		{"fewest members first, then by name", spec.Placement{}, []Host{b1, a2, a1}, pendingMembers(4), "a1 a2 b1 a1"},
		{"selector", spec.Placement{Hosts: map[string]string{"zone": "a"}}, []Host{a1, a2, b1}, pendingMembers(3), "a1 a2 a1"},
		{"maxPerHost leaves the rest unplaced", spec.Placement{MaxPerHost: 1}, []Host{a1, b1}, pendingMembers(3), "a1 b1 -"},
		{"spreadBy evens out zones before hosts", spec.Placement{SpreadBy: "zone"}, []Host{a1, a2, b1}, pendingMembers(4), "a1 b1 a2 b1"},
		{"spreadBy skips hosts without the label", spec.Placement{SpreadBy: "zone"}, []Host{host("x"), a1}, pendingMembers(2), "a1 a1"},
		{"lost and cordoned hosts get nothing", spec.Placement{}, []Host{lost(a1), cordoned(a2), b1}, pendingMembers(2), "b1 b1"},
		{"placed members count and stay", spec.Placement{MaxPerHost: 2}, []Host{a1, b1},
			append([]Member{{Name: "c-w-0", State: MemberReady, Host: "a1"}, {Name: "c-w-1", State: MemberReady, Host: "a1"}}, pendingMembers(2)[1:]...), "a1 a1 b1"},
		{"a replaced member frees its host", spec.Placement{MaxPerHost: 1}, []Host{a1},
			[]Member{{Name: "c-w-0", State: MemberReplacing, Host: "a1"}, {Name: "c-w-1", State: MemberPending}}, "a1 a1"},
		{"no hosts ready", spec.Placement{}, []Host{lost(a1)}, pendingMembers(1), "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			placed := PlaceMembers(spec.Role{Name: "w", Placement: tt.placement}, tt.members, tt.hosts)
			var got []string
			for _, m := range placed {
				switch {
				case m.Host != "":
					got = append(got, m.Host)
				case m.Unplaced != "":
					got = append(got, "-")
				default:
					got = append(got, "?")
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("placed on %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

func TestPlacementProblemNamesTheConstraint(t *testing.T) {
	var hosts []Host
	for _, n := range []string{"db-1", "db-2", "db-3", "db-4"} {
		hosts = append(hosts, host(n, "zone=a"))
	}
	hosts = append(hosts, host("db-5", "zone=b"), lost(host("db-6", "zone=a")))
	role := func(members int, p spec.Placement) spec.Cluster {
		return spec.Cluster{Roles: []spec.Role{{Name: "controller", Members: 1}, {Name: "worker", Members: members, Placement: p}}}
	}
	tests := []struct {
		name    string
		desired spec.Cluster
		want    string
	}{
		{"fits", role(4, spec.Placement{Hosts: map[string]string{"zone": "a"}, MaxPerHost: 1}), ""},
		{"too few hosts", role(6, spec.Placement{Hosts: map[string]string{"zone": "a"}, MaxPerHost: 1}),
			"roles[1].placement: 6 members with maxPerHost 1 need 6 hosts matching zone=a; 4 are ready (db-1, db-2, db-3, db-4)"},
		{"none matches", role(1, spec.Placement{Hosts: map[string]string{"zone": "c"}}),
			"roles[1].placement: 1 member needs hosts matching zone=c; none is ready (db-1 ready … db-6 lost)"},
		{"no limit fits anywhere", role(60, spec.Placement{}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := PlacementProblem(tt.desired, nil, hosts, HostCheck{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestPlacementProblemKeepsMembersWhereTheyAre(t *testing.T) {
	hosts := []Host{host("a"), cordoned(host("b")), lost(host("c"))}
	role := spec.Role{Name: "w", Members: 3, Placement: spec.Placement{MaxPerHost: 1}}
	members := []Member{{Name: "x-w-0", State: MemberReady, Host: "a"}, {Name: "x-w-1", State: MemberReady, Host: "b"}}
	desired := spec.Cluster{Roles: []spec.Role{role}}
	roles := []RoleState{{Name: "w", Members: members}}
	// a and b keep their members; c is lost, and a has no room for a third.
	if err := PlacementProblem(desired, roles, hosts, HostCheck{}); err == nil || err.Error() != "roles[0].placement: 3 members with maxPerHost 1 need 3 hosts; 1 is ready (a)" {
		t.Errorf("got %v", err)
	}
	desired.Roles[0].Members = 2
	if err := PlacementProblem(desired, roles, hosts, HostCheck{}); err != nil {
		t.Errorf("members staying on a cordoned host were refused: %v", err)
	}
}

func TestPlanDrain(t *testing.T) {
	m := func(name, host string, state MemberState) Member { return Member{Name: name, Host: host, State: state} }
	levels := [][]string{{"controller"}, {"worker"}}
	draining := func(host string) bool { return host == "d" }
	limitOf := func(n int) func(RoleState) int { return func(RoleState) int { return n } }
	tests := []struct {
		name  string
		roles []RoleState
		limit int
		want  string
	}{
		{"a level at a time", []RoleState{
			{Name: "controller", Members: []Member{m("c0", "d", MemberReady)}},
			{Name: "worker", Members: []Member{m("w0", "d", MemberReady), m("w1", "a", MemberReady)}},
		}, 1, "c0"},
		{"the next level once the first is off the host", []RoleState{
			{Name: "controller", Members: []Member{m("c1", "a", MemberReady)}},
			{Name: "worker", Members: []Member{m("w0", "d", MemberReady), m("w1", "d", MemberReady), m("w2", "d", MemberReady)}},
		}, 2, "w0 w1"},
		{"wait while a replacement is under way", []RoleState{
			{Name: "controller", Members: []Member{m("c0", "d", MemberReplacing), m("c1", "a", MemberPending)}},
			{Name: "worker", Members: []Member{m("w0", "d", MemberReady)}},
		}, 1, ""},
		{"room left by maxUnavailable", []RoleState{
			{Name: "worker", Members: []Member{m("w0", "d", MemberReplacing), m("w1", "d", MemberReady), m("w2", "d", MemberReady), m("w3", "a", MemberPending)}},
		}, 2, "w1"},
		{"nothing on a draining host", []RoleState{
			{Name: "worker", Members: []Member{m("w0", "a", MemberReady)}},
		}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(Drain(tt.roles, levels, draining, limitOf(tt.limit)), " ")
			if got != tt.want {
				t.Errorf("drains %q, want %q", got, tt.want)
			}
		})
	}
}

// A host's allow-lists (worker --allow-clusters, --allow-namespaces, --allow-env-override)
// keep new members off it; members already there stay. Runs from before the allow-lists
// (hostCheck off) place as they did.
func TestPlacementRespectsHostAllowLists(t *testing.T) {
	allow := func(h Host, a Admission) Host { h.Admission = a; return h }
	teamA := allow(host("a1"), Admission{Clusters: []string{"team-a-*"}})
	prod := allow(host("p1"), Admission{Namespaces: []string{"prod"}})
	loose := allow(host("l1"), Admission{EnvOverride: true})
	plain, pathEnv := spec.Role{Name: "w"}, spec.Role{Name: "w", Env: map[string]string{"PATH": "/opt/x/bin", "A": "b"}}
	on := func(ns string) HostCheck { return HostCheck{On: true, Namespace: ns} }
	tests := []struct {
		name    string
		cluster string
		role    spec.Role
		check   HostCheck
		hosts   []Host
		members []Member
		want    string
	}{
		{"a cluster the glob takes", "team-a-db", plain, on("dev"), []Host{teamA}, pendingMembers(2), "a1 a1"},
		{"a cluster it does not", "team-b-db", plain, on("dev"), []Host{teamA, host("z1")}, pendingMembers(2), "z1 z1"},
		{"only refusing hosts", "team-b-db", plain, on("dev"), []Host{teamA}, pendingMembers(1), "-"},
		{"another namespace", "c", plain, on("dev"), []Host{prod, host("z1")}, pendingMembers(2), "z1 z1"},
		{"its namespace", "c", plain, on("prod"), []Host{prod}, pendingMembers(1), "p1"},
		{"a loader variable needs a host that allows it", "c", pathEnv, on("dev"), []Host{host("a0"), loose}, pendingMembers(2), "l1 l1"},
		{"members already there stay", "team-b-db", plain, on("dev"), []Host{teamA, host("z1")},
			append([]Member{{Name: "c-w-0", State: MemberReady, Host: "a1"}}, pendingMembers(2)[1:]...), "a1 z1"},
		{"runs from before the allow-lists", "team-b-db", pathEnv, HostCheck{}, []Host{teamA}, pendingMembers(1), "a1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			placed := PlaceMembers(tt.role, tt.members, tt.check.HostsFor(tt.hosts, tt.cluster, tt.role))
			var got []string
			for _, m := range placed {
				if m.Host != "" {
					got = append(got, m.Host)
				} else {
					got = append(got, "-")
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q (unplaced: %q)", strings.Join(got, " "), tt.want, placed[len(placed)-1].Unplaced)
			}
		})
	}
	// The refusal names the host and why.
	err := PlacementProblem(spec.Cluster{Name: "c", Roles: []spec.Role{{Name: "w", Members: 1, Env: map[string]string{"LD_PRELOAD": "/x.so"}}}},
		nil, []Host{host("a0")}, on("dev"))
	want := "roles[0].placement: 1 member needs hosts; none is ready (a0 lets no spec set the loader variable LD_PRELOAD (worker --allow-env-override))"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
