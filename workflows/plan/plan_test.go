package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/spec"
)

// The planner's tables. A row gives the desired member counts and the members as observed,
// in a short notation, and the plan of one convergence pass that meets no surprise:
//
//	forget     pending members no longer wanted, dropped without a script
//	teardown   members torn down and removed first, deepest level first
//	create     new members, "new<old" when new replaces old
//	configure  members set up, level by level
//	failed     why the pass stops at a level (no later level is set up)
//	replaced   members being replaced, torn down once their successors are set up
//
// Members are written "worker-2=ready"; "!" marks a member leaving (stopped by a change), as
// in "worker-3=configuring!". The cluster has a controller (level 0), workers that depend on
// it (level 1) and edges that depend on the workers (level 2).

type passPlan struct {
	forget, teardown, create, configure, failed, replaced string
}

func TestPlanPass(t *testing.T) {
	rows := []struct {
		name     string
		desired  string
		observed []string
		want     passPlan
	}{
		{
			name:    "deploy: every member is new, set up level by level",
			desired: "controller=1 worker=2 edge=1",
			want: passPlan{
				create:    "controller-0 worker-0 worker-1 edge-0",
				configure: "L0 controller: controller-0 | L1 worker: worker-0,worker-1 | L2 edge: edge-0",
			},
		},
		{
			name:     "deploy again after a failed level: only what is pending is set up",
			desired:  "controller=1 worker=2 edge=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=pending", "edge-0=pending"},
			want:     passPlan{configure: "L1 worker: worker-1 | L2 edge: edge-0"},
		},
		{
			name:     "nothing to do",
			desired:  "controller=1 worker=2",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready"},
		},
		{
			name:     "grow: the next ordinals",
			desired:  "controller=1 worker=4",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready"},
			want:     passPlan{create: "worker-2 worker-3", configure: "L1 worker: worker-2,worker-3"},
		},
		{
			name:     "shrink: the highest ordinals go",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready", "worker-2=ready", "worker-3=ready"},
			want:     passPlan{teardown: "L1 worker: worker-1,worker-2,worker-3"},
		},
		{
			name:     "shrink: a member down goes before healthy ones",
			desired:  "controller=1 worker=2",
			observed: []string{"controller-0=ready", "worker-0=down", "worker-1=ready", "worker-2=ready"},
			want:     passPlan{teardown: "L1 worker: worker-0"},
		},
		{
			name:     "shrink: a flapping member goes before healthy ones, then the highest ordinal",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=flapping", "worker-2=ready"},
			want:     passPlan{teardown: "L1 worker: worker-1,worker-2"},
		},
		{
			name:     "shrink while members set up: the pending are forgotten, the stopped torn down",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=config_error!", "worker-2=pending", "worker-3=pending"},
			want:     passPlan{forget: "worker-2 worker-3", teardown: "L1 worker: worker-1"},
		},
		{
			// (A grow that arrives while their role still configures adds members with new
			// ordinals at once, beside the leaving ones; see growActive.)
			name:     "grow after a shrink stopped members: they leave first, and their ordinals are free again",
			desired:  "controller=1 worker=3",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=config_error!", "worker-2=config_error!"},
			want: passPlan{
				teardown:  "L1 worker: worker-1,worker-2",
				create:    "worker-1 worker-2",
				configure: "L1 worker: worker-1,worker-2",
			},
		},
		{
			name:     "replace: the successor is set up first, the replaced member goes after",
			desired:  "controller=1 worker=2",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!"},
			want:     passPlan{create: "worker-2<worker-1", configure: "L1 worker: worker-2", replaced: "L1 worker: worker-1"},
		},
		{
			name:     "a replacement whose successor exists is not replaced twice",
			desired:  "controller=1 worker=2",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!>worker-2", "worker-2=pending<worker-1"},
			want:     passPlan{configure: "L1 worker: worker-2", replaced: "L1 worker: worker-1"},
		},
		{
			name:     "growth during a replacement whose successor exists: the newcomer replaces no one",
			desired:  "controller=1 worker=3",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!>worker-2", "worker-2=ready<worker-1"},
			want:     passPlan{create: "worker-3", configure: "L1 worker: worker-3", replaced: "L1 worker: worker-1"},
		},
		{
			name:     "resize during a replacement: the successor and the growth are both new members",
			desired:  "controller=1 worker=3",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!"},
			want: passPlan{
				create:    "worker-2<worker-1 worker-3",
				configure: "L1 worker: worker-2,worker-3",
				replaced:  "L1 worker: worker-1",
			},
		},
		{
			name:     "shrink of the member being replaced: it goes, and has no successor",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!"},
			want:     passPlan{replaced: "L1 worker: worker-1"},
		},
		{
			name:     "shrink of another member during a replacement: the replacement is no longer needed",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready", "worker-2=replacing!"},
			want:     passPlan{teardown: "L1 worker: worker-1", replaced: "L1 worker: worker-2"},
		},
		{
			name:     "shrink during a replacement whose successor is set up: the successor stays",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=replacing!>worker-1", "worker-1=ready<worker-0"},
			want:     passPlan{replaced: "L1 worker: worker-0"},
		},
		{
			name:     "apply removes a role whose members are down: all of them go, dependents first",
			desired:  "controller=1",
			observed: []string{"controller-0=ready", "worker-0=down", "worker-1=ready", "edge-0=ready"},
			want:     passPlan{teardown: "L2 edge: edge-0 | L1 worker: worker-0,worker-1"},
		},
		{
			name:     "apply adds a role: set up at its level",
			desired:  "controller=1 worker=1 edge=2",
			observed: []string{"controller-0=ready", "worker-0=ready"},
			want:     passPlan{create: "edge-0 edge-1", configure: "L2 edge: edge-0,edge-1"},
		},
		{
			name:     "cancel mid-level: a canceled member stops the pass at its level, and later levels wait",
			desired:  "controller=1 worker=2 edge=1",
			observed: []string{"controller-0=ready", "worker-0=config_error", "worker-1=ready", "edge-0=pending"},
			want:     passPlan{failed: "role worker failed: 1 of 2 members in config_error"},
		},
		{
			name:     "a failed setup stops later levels; its own level's other members are set up",
			desired:  "controller=1 worker=2 edge=1",
			observed: []string{"controller-0=config_error", "worker-0=pending", "worker-1=pending", "edge-0=pending"},
			want:     passPlan{failed: "role controller failed: 1 of 1 members in config_error"},
		},
		{
			name:     "a failed setup replaced: its successor inherits the replacement count",
			desired:  "controller=1 worker=2",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=replacing!#2"},
			want:     passPlan{create: "worker-2<worker-1#2", configure: "L1 worker: worker-2", replaced: "L1 worker: worker-1"},
		},
		{
			name:     "a rogue adopted by reconcile is removed like any unwanted member",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-9=rogue!"},
			want:     passPlan{teardown: "L1 worker: worker-9"},
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			desired := testCluster(t, row.desired)
			roles := observedRoles(t, desired, row.observed)
			if got := planPass(desired, roles); got != row.want {
				t.Errorf("plan:\n got %+v\nwant %+v", got, row.want)
			}
		})
	}
}

// planPass plays the real passes of one convergence in which every step goes as planned:
// the removal (of the observed roles' levels), new members, the setup (each member set up
// becomes ready; a level with problems ends the pass), then the replaced members'
// removal. Each step's work is what the planner gives when the step is taken.
func planPass(desired spec.Cluster, roles []RoleState) passPlan {
	var p passPlan
	var forget, teardown []string
	for _, step := range Removal(testLevels(roles), false).Steps {
		f, work := step.Work(desired, roles, nil)
		forget = append(forget, f...)
		teardown = append(teardown, describeWork(step.Level, work)...)
	}
	p.forget, p.teardown = strings.Join(short(forget), " "), strings.Join(teardown, " | ")
	// The removed are gone, roles the spec no longer has with them; every role it has is there.
	for i := range roles {
		_, unwanted := SplitMembers(roles[i], DesiredMembers(desired, roles[i].Name))
		roles[i].Members = slices.DeleteFunc(roles[i].Members, func(m Member) bool {
			return m.State != MemberReplacing && slices.ContainsFunc(unwanted, func(u Member) bool { return u.Name == m.Name })
		})
	}
	roles = slices.DeleteFunc(roles, func(rs RoleState) bool { return len(rs.Members) == 0 })
	for _, r := range desired.Roles {
		if RoleOf(roles, r.Name) == nil {
			roles = append(roles, RoleState{Name: r.Name})
		}
	}
	levels := testLevels(roles)
	var created []string
	for _, level := range levels {
		for _, name := range level {
			rs := RoleOf(roles, name)
			added := NewMembers(desired.Name, *rs, DesiredMembers(desired, name), time.Time{})
			for _, m := range added {
				created = append(created, describeMember(m))
				if m.Replaces != "" {
					rs.Member(m.Replaces).ReplacedBy = m.Name
				}
			}
			rs.Members = append(rs.Members, added...)
		}
	}
	p.create = strings.Join(created, " ")
	var configure, replaced []string
	for _, step := range Setup(levels).Steps {
		_, work := step.Work(desired, roles, nil)
		configure = append(configure, describeWork(step.Level, work)...)
		for _, rw := range work {
			for _, m := range rw.Members {
				RoleOf(roles, rw.Role).Member(m.Name).State = MemberReady
			}
		}
		if problems := LevelProblems(desired, roles, step.Roles); len(problems) > 0 {
			p.failed = strings.Join(problems, "; ")
			break
		}
	}
	for _, step := range Removal(levels, true).Steps {
		_, work := step.Work(desired, roles, nil)
		replaced = append(replaced, describeWork(step.Level, work)...)
	}
	p.configure, p.replaced = strings.Join(configure, " | "), strings.Join(replaced, " | ")
	return p
}

// testLevels are the dependency levels of the test cluster's roles that are there.
func testLevels(roles []RoleState) [][]string {
	var levels [][]string
	for _, name := range []string{"controller", "worker", "edge"} {
		if RoleOf(roles, name) != nil {
			levels = append(levels, []string{name})
		}
	}
	return levels
}

// Who is told what. A member knows the members listed in the configmeta it configured with
// (ListedIn ≤ its KnowsUpTo) and those announced to it; it hears only of the others. Members
// are written "worker-2=ready@L/K" with L its ListedIn and K its KnowsUpTo; "+" marks an
// announced member, and "~U" the configmeta version that stopped listing a replaced member.
func TestPlanNotification(t *testing.T) {
	rows := []struct {
		name     string
		op       RoleOperation
		observed []string
		nodes    []string
		want     string
	}{
		{
			name:     "members set up together hear nothing of each other",
			op:       OpAddNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-1=ready@1/1"},
			nodes:    []string{"worker-0@1/1", "worker-1@1/1"},
		},
		{
			name:     "grow: the members that were there hear of the newcomers, the newcomers of none",
			op:       OpAddNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-1=ready@2/2", "worker-2=ready@2/2"},
			nodes:    []string{"worker-1@2/2", "worker-2@2/2"},
			want:     "controller: controller-0[worker-1,worker-2] | worker: worker-0[worker-1,worker-2]",
		},
		{
			name:     "a controller set up before a resize arrived midway hears of what it added",
			op:       OpAddNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/2", "worker-1=ready@1/2", "worker-2=ready@2/2"},
			nodes:    []string{"worker-0@1/2", "worker-1@1/2", "worker-2@2/2"},
			want:     "controller: controller-0[worker-2]",
		},
		{
			name:     "members not ready are not told",
			op:       OpAddNodes,
			observed: []string{"controller-0=down@1/1", "worker-0=config_error@1/1", "worker-1=ready@2/2"},
			nodes:    []string{"worker-1@2/2"},
		},
		{
			name:     "shrink: those that knew the leavers hear they left",
			op:       OpDelNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-1=ready@2/2"},
			nodes:    []string{"worker-2@1/1", "worker-3@2/2"},
			want:     "controller: controller-0[worker-2] | worker: worker-0[worker-2],worker-1[worker-2,worker-3]",
		},
		{
			name:     "an announced leaver was known to all",
			op:       OpDelNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-1=ready@2/2"},
			nodes:    []string{"worker-3@2/2+"},
			want:     "controller: controller-0[worker-3] | worker: worker-0[worker-3],worker-1[worker-3]",
		},
		{
			name:     "replacement: the successor never knew the member it replaced",
			op:       OpDelNodes,
			observed: []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-2=ready@2/2"},
			nodes:    []string{"worker-1@1/1+~2"},
			want:     "controller: controller-0[worker-1] | worker: worker-0[worker-1]",
		},
	}
	desired := testCluster(t, "controller=1 worker=3")
	for i := range desired.Roles {
		desired.Roles[i].Events = []spec.Event{spec.EventAddNodes, spec.EventDelNodes}
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			roles := observedRoles(t, desired, row.observed)
			var nodes []Member
			for _, n := range row.nodes {
				name, marks, _ := strings.Cut(n, "@")
				nodes = append(nodes, parseMember(t, desired.Name, name+"=ready@"+marks))
			}
			var got []string
			for _, rw := range Notification(desired, roles, row.op, "worker", nodes) {
				var told []string
				for i, m := range rw.Members {
					told = append(told, fmt.Sprintf("%s[%s]", shortName(m.Name), strings.Join(short(rw.MemberNodes[i]), ",")))
				}
				got = append(got, rw.Role+": "+strings.Join(told, ","))
			}
			if s := strings.Join(got, " | "); s != row.want {
				t.Errorf("told:\n got %q\nwant %q", s, row.want)
			}
		})
	}
	// A role that does not subscribe to the event is not told.
	unsubscribed := testCluster(t, "controller=1 worker=2")
	roles := observedRoles(t, unsubscribed, []string{"controller-0=ready@1/1", "worker-0=ready@1/1", "worker-1=ready@2/2"})
	if work := Notification(unsubscribed, roles, OpAddNodes, "worker", []Member{parseMember(t, "c", "worker-1=ready@2/2")}); len(work) != 0 {
		t.Errorf("roles without the addnodes event were told: %+v", work)
	}
}

// A change while members are being set up stops those it no longer wants at once.
func TestPlanStops(t *testing.T) {
	for _, row := range []struct {
		name, desired string
		observed      []string
		configuring   map[string][]string
		want          string
	}{
		{"shrink during setup stops the members going away", "controller=1 worker=1",
			[]string{"controller-0=ready", "worker-0=configuring", "worker-1=configuring", "worker-2=creating"},
			map[string][]string{"worker": {"c-worker-0", "c-worker-1", "c-worker-2"}}, "L1 worker: worker-1,worker-2"},
		{"a member already stopped is not stopped twice", "controller=1 worker=1",
			[]string{"controller-0=ready", "worker-0=configuring", "worker-1=configuring!", "worker-2=configuring"},
			map[string][]string{"worker": {"c-worker-0", "c-worker-1", "c-worker-2"}}, "L1 worker: worker-2"},
		{"only the members the child sets up: a pending one is forgotten later", "controller=1 worker=1",
			[]string{"controller-0=ready", "worker-0=configuring", "worker-1=pending"},
			map[string][]string{"worker": {"c-worker-0"}}, ""},
		{"grow during setup stops nothing", "controller=1 worker=4",
			[]string{"controller-0=ready", "worker-0=configuring", "worker-1=configuring"},
			map[string][]string{"worker": {"c-worker-0", "c-worker-1"}}, ""},
		{"apply removing a role being set up stops all of it", "controller=1",
			[]string{"controller-0=ready", "worker-0=configuring", "edge-0=configuring"},
			map[string][]string{"worker": {"c-worker-0"}, "edge": {"c-edge-0"}}, "L1 edge: edge-0 | L1 worker: worker-0"},
	} {
		t.Run(row.name, func(t *testing.T) {
			desired := testCluster(t, row.desired)
			got := strings.Join(describeWork(1, Stops(desired, observedRoles(t, desired, row.observed), row.configuring)), " | ")
			if got != row.want {
				t.Errorf("stops:\n got %q\nwant %q", got, row.want)
			}
		})
	}
}

// A delete is the removal toward the empty spec: deepest level first, every member
// whatever its state torn down, those never created forgotten.
func TestPlanDeletion(t *testing.T) {
	desired := testCluster(t, "controller=1 worker=3")
	roles := observedRoles(t, desired, []string{"controller-0=ready", "worker-0=down", "worker-1=config_error", "worker-2=pending", "worker-3=deleted"})
	var got []string
	for _, step := range Removal(testLevels(roles), true).Steps {
		forget, work := step.Work(spec.Cluster{}, roles, nil)
		got = append(got, strings.Join(short(forget), " ")+" / "+strings.Join(describeWork(step.Level, work), " | "))
	}
	if s := strings.Join(got, " ; "); s != "worker-2 / L1 worker: worker-0,worker-1 ;  / L0 controller: controller-0" {
		t.Errorf("delete: %s", s)
	}
}

func TestLevelProblems(t *testing.T) {
	desired := testCluster(t, "controller=1 worker=3")
	for _, row := range []struct {
		observed []string
		want     string
	}{
		{[]string{"worker-0=ready", "worker-1=down", "worker-2=flapping"}, ""},
		{[]string{"worker-0=ready", "worker-1=config_error", "worker-2=pending"}, "role worker failed: 1 of 3 members in config_error"},
		{[]string{"worker-0=ready", "worker-1=pending", "worker-2=configuring"}, "role worker: 1 of 3 members ready"},
	} {
		roles := observedRoles(t, desired, row.observed)
		if got := strings.Join(LevelProblems(desired, roles, []string{"worker"}), "; "); got != row.want {
			t.Errorf("%v: got %q, want %q", row.observed, got, row.want)
		}
	}
}

// testCluster makes the three-level test cluster with the given counts, e.g. "worker=2";
// roles not named are left out.
func testCluster(t *testing.T, counts string) spec.Cluster {
	t.Helper()
	deps := map[string][]string{"controller": nil, "worker": {"controller"}, "edge": {"worker"}}
	c := spec.Cluster{Name: "c"}
	for _, kv := range strings.Fields(counts) {
		name, n, _ := strings.Cut(kv, "=")
		members, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("bad count %q", kv)
		}
		c.Roles = append(c.Roles, spec.Role{Name: name, Members: members, DependsOn: deps[name]})
	}
	return c
}

// observedRoles builds the roles' observed state from members in the short notation, in
// the order given.
func observedRoles(t *testing.T, desired spec.Cluster, members []string) []RoleState {
	t.Helper()
	var roles []RoleState
	for _, text := range members {
		m := parseMember(t, desired.Name, text)
		rs := RoleOf(roles, m.Role)
		if rs == nil {
			roles = append(roles, RoleState{Name: m.Role})
			rs = &roles[len(roles)-1]
		}
		rs.Members = append(rs.Members, m)
	}
	return roles
}

// parseMember reads "worker-2=state", with optional marks after the state: "!" leaving,
// ">worker-3" replaced by, "<worker-1" replaces, "#N" replacements, "@L/K" ListedIn and
// KnowsUpTo, "+" announced, "~U" UnlistedFrom.
func parseMember(t *testing.T, cluster, text string) Member {
	t.Helper()
	name, rest, _ := strings.Cut(text, "=")
	role, ordinal, ok := strings.Cut(name, "-")
	n, err := strconv.Atoi(ordinal)
	if !ok || err != nil {
		t.Fatalf("bad member %q", text)
	}
	m := Member{Name: spec.MemberName(cluster, role, n), Role: role, Ordinal: n}
	end := strings.IndexAny(rest, "!<>#@+~")
	if end < 0 {
		end = len(rest)
	}
	m.State, rest = MemberState(rest[:end]), rest[end:]
	for rest != "" {
		mark := rest[0]
		rest = rest[1:]
		value := rest
		if next := strings.IndexAny(rest, "!<>#@+~"); next >= 0 {
			value, rest = rest[:next], rest[next:]
		} else {
			rest = ""
		}
		switch mark {
		case '!':
			m.Leaving = true
		case '+':
			m.Announced = true
		case '>':
			m.ReplacedBy = fullName(t, cluster, value)
		case '<':
			m.Replaces = fullName(t, cluster, value)
		case '#':
			m.Replacements, _ = strconv.Atoi(value)
		case '~':
			m.UnlistedFrom, _ = strconv.Atoi(value)
		case '@':
			listed, knows, _ := strings.Cut(value, "/")
			m.ListedIn, _ = strconv.Atoi(listed)
			m.KnowsUpTo, _ = strconv.Atoi(knows)
		}
	}
	return m
}

func fullName(t *testing.T, cluster, short string) string {
	t.Helper()
	role, ordinal, _ := strings.Cut(short, "-")
	n, err := strconv.Atoi(ordinal)
	if err != nil {
		t.Fatalf("bad member name %q", short)
	}
	return spec.MemberName(cluster, role, n)
}

func describeWork(level int, work []RoleWork) []string {
	var out []string
	for _, rw := range work {
		names := make([]string, len(rw.Members))
		for i, m := range rw.Members {
			names[i] = shortName(m.Name)
		}
		out = append(out, fmt.Sprintf("L%d %s: %s", level, rw.Role, strings.Join(names, ",")))
	}
	return out
}

func describeMember(m Member) string {
	s := shortName(m.Name)
	if m.Replaces != "" {
		s += "<" + shortName(m.Replaces)
	}
	if m.Replacements > 0 {
		s += "#" + strconv.Itoa(m.Replacements)
	}
	return s
}

func shortName(name string) string { return strings.TrimPrefix(name, "c-") }

func short(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = shortName(n)
	}
	return out
}

// Grow adds the members a role is short of, each in the place of a member being replaced
// that has no successor yet, and places them on hosts when the cluster has hosts.
func TestGrow(t *testing.T) {
	role := spec.Role{Name: "worker", Members: 3}
	rs := RoleState{Name: "worker", Members: []Member{
		{Name: "c-worker-0", Ordinal: 0, State: MemberReady, Host: "h1"},
		{Name: "c-worker-1", Ordinal: 1, State: MemberReplacing, Host: "h1", Replacements: 1},
	}}
	hosts := []Host{{HostRegistration: HostRegistration{Name: "h1"}}, {HostRegistration: HostRegistration{Name: "h2"}}}
	added := Grow("c", role, &rs, 3, true, hosts, time.Time{})
	var got []string
	for _, m := range added {
		got = append(got, fmt.Sprintf("%s@%s<%s#%d", m.Name, m.Host, m.Replaces, m.Replacements))
	}
	// worker-1, being replaced, still counts among the three, so one is added in its place,
	// on the host with fewer of the role (a member being replaced occupies none).
	if s := strings.Join(got, " "); s != "c-worker-2@h2<c-worker-1#1" {
		t.Errorf("grew %s", s)
	}
	if rs.Member("c-worker-1").ReplacedBy != "c-worker-2" {
		t.Errorf("the replaced member does not name its successor: %+v", rs.Member("c-worker-1"))
	}
	// With no host at all, the new members wait, saying why.
	rs = RoleState{Name: "worker"}
	added = Grow("c", role, &rs, 1, true, nil, time.Time{})
	if len(added) != 1 || added[0].Host != "" || added[0].Unplaced == "" {
		t.Errorf("grew with no hosts: %+v", added)
	}
	// Single-host mode places nothing.
	rs = RoleState{Name: "worker"}
	if added = Grow("c", role, &rs, 1, false, nil, time.Time{}); len(added) != 1 || added[0].Host != "" || added[0].Unplaced != "" {
		t.Errorf("grew in single-host mode: %+v", added)
	}
}

// New members count on from NextOrdinal when it is past the last member: a removed
// member's name is never given again.
func TestNewMembersNeverReuseARemovedOrdinal(t *testing.T) {
	rs := RoleState{Name: "worker", NextOrdinal: 5, Members: []Member{
		{Name: "c-worker-0", Ordinal: 0, State: MemberReady},
		{Name: "c-worker-2", Ordinal: 2, State: MemberReady},
	}}
	var got []string
	for _, m := range NewMembers("c", rs, 4, time.Time{}) {
		got = append(got, m.Name)
	}
	if !slices.Equal(got, []string{"c-worker-5", "c-worker-6"}) {
		t.Errorf("new members %v, want c-worker-5 and c-worker-6", got)
	}
	// Runs from before NextOrdinal was kept (0) count on from the last member.
	rs.NextOrdinal = 0
	if added := NewMembers("c", rs, 3, time.Time{}); len(added) != 1 || added[0].Name != "c-worker-3" {
		t.Errorf("without NextOrdinal: %+v", added)
	}
}

// ConfigureRan is what a delete or a removal tears down: every member whose configure ran,
// whatever failed since; not one whose sandbox was never made, nor one gone.
func TestConfigureRanCountsEveryMemberAConfigureRanIn(t *testing.T) {
	gone := &MemberHealth{LastReport: HealthGone}
	for _, tc := range []struct {
		m    Member
		want bool
	}{
		{Member{State: MemberPending}, false},
		{Member{State: MemberCreating}, false},
		{Member{State: MemberConfigError, Detail: "create sandbox: disk full"}, false},
		{Member{State: MemberConfiguring, Event: spec.EventConfigure}, false},
		{Member{State: MemberConfigError, Event: spec.EventConfigure, Detail: "canceled"}, true},
		{Member{State: MemberConfigError, Event: spec.EventConfigure}, true},
		{Member{State: MemberConfigError, Event: spec.EventAddNodes}, true},
		{Member{State: MemberConfigError, Event: spec.EventDelNodes}, true},
		{Member{State: MemberConfigError, Event: spec.EventStart}, true},
		{Member{State: MemberConfigError, Event: "backup"}, true},
		{Member{State: MemberConfigError, Event: spec.EventUpgrade}, true},
		{Member{State: MemberReady}, true},
		{Member{State: MemberDown}, true},
		{Member{State: MemberFlapping}, true},
		{Member{State: MemberRogue}, true},
		{Member{State: MemberReplacing}, true},
		{Member{State: MemberReplacing, Health: gone}, false},
		{Member{State: MemberDeleted}, false},
	} {
		if got := tc.m.ConfigureRan(); got != tc.want {
			t.Errorf("%s after %q (%s): ConfigureRan %v, want %v", tc.m.State, tc.m.Event, tc.m.Detail, got, tc.want)
		}
	}
}

// A graceful removal decommissions the members its teardown takes next, in roles that
// subscribe, once; it leaves a member whose decommission failed, which a delete (a plain
// removal) takes all the same. A member gone has nothing to decommission.
func TestGracefulRemovalDecommissionsFirst(t *testing.T) {
	desired := spec.Cluster{Roles: []spec.Role{{Name: "worker", Members: 1, Events: []spec.Event{spec.EventConfigure, spec.EventDecommission, spec.EventTeardown}}}}
	gone := &MemberHealth{LastReport: HealthGone}
	roles := []RoleState{{Name: "worker", Members: []Member{
		{Name: "c-worker-0", Ordinal: 0, State: MemberReady},
		{Name: "c-worker-1", Ordinal: 1, State: MemberReady},
		{Name: "c-worker-2", Ordinal: 2, State: MemberReady, Decommission: DecommissionDone},
		{Name: "c-worker-3", Ordinal: 3, State: MemberReady, Decommission: DecommissionFailed},
		{Name: "c-worker-4", Ordinal: 4, State: MemberReplacing, Health: gone},
	}}}
	names := func(work []RoleWork) string {
		var out []string
		for _, rw := range work {
			for _, m := range rw.Members {
				out = append(out, m.Name)
			}
		}
		return strings.Join(out, " ")
	}
	pass := GracefulRemoval([][]string{{"worker"}}, true)
	if len(pass.Steps) != 2 || pass.Steps[0].Op != OpDecommission || pass.Steps[1].Op != OpTeardown {
		t.Fatalf("steps %+v", pass.Steps)
	}
	if _, work := pass.Steps[0].Work(desired, roles, nil); names(work) != "c-worker-1" {
		t.Errorf("decommissioned %q, want only c-worker-1 (the others done, failed, or gone)", names(work))
	}
	if _, work := pass.Steps[1].Work(desired, roles, nil); names(work) != "c-worker-1 c-worker-2 c-worker-4" {
		t.Errorf("the graceful teardown takes %q, want all but the failed decommission", names(work))
	}
	if _, work := Removal([][]string{{"worker"}}, true).Steps[0].Work(spec.Cluster{}, roles, nil); names(work) != "c-worker-0 c-worker-1 c-worker-2 c-worker-3 c-worker-4" {
		t.Errorf("a delete takes %q, want every member", names(work))
	}
	// A role that does not subscribe decommissions nobody.
	desired.Roles[0].Events = []spec.Event{spec.EventConfigure, spec.EventTeardown}
	if _, work := pass.Steps[0].Work(desired, roles, nil); len(work) != 0 {
		t.Errorf("decommissioned %q in a role that does not subscribe", names(work))
	}
}

// TestMarkBootstrap walks a role's first setup: one member forms it, a replacement of that
// member before anything was set up takes it over, and nobody else ever does.
func TestMarkBootstrap(t *testing.T) {
	role := spec.Role{Name: "r"}
	formers := func(rs RoleState) []string {
		var names []string
		for _, m := range rs.Members {
			if m.Bootstrap {
				names = append(names, m.Name)
			}
		}
		return names
	}
	var rs RoleState
	rs.Name = "r"
	MarkBootstrap(&rs, Grow("c", role, &rs, 3, false, nil, time.Time{}))
	if got := formers(rs); !slices.Equal(got, []string{"c-r-0"}) {
		t.Fatalf("a role's first three members: %v form it, want c-r-0", got)
	}

	// The member to form it fails and is replaced: its replacement forms it.
	rs.Member("c-r-0").State, rs.Member("c-r-0").Leaving = MemberReplacing, true
	added := Grow("c", role, &rs, 3, false, nil, time.Time{})
	MarkBootstrap(&rs, added)
	if len(added) != 1 || !added[0].Bootstrap || added[0].Replaces != "c-r-0" {
		t.Fatalf("the replacement %+v does not form it", added)
	}
	if got := formers(rs); !slices.Equal(got, []string{"c-r-3"}) {
		t.Fatalf("after the replacement: %v form it, want c-r-3", got)
	}

	// Another member fails and is replaced: the one forming it still does.
	rs.Member("c-r-1").State, rs.Member("c-r-1").Leaving = MemberReplacing, true
	MarkBootstrap(&rs, Grow("c", role, &rs, 3, false, nil, time.Time{}))
	if got := formers(rs); !slices.Equal(got, []string{"c-r-3"}) {
		t.Fatalf("after another replacement: %v form it, want c-r-3", got)
	}

	// A role whose member to form it was removed gives the next added member the part.
	rs.Member("c-r-3").State = MemberDeleted
	rs.Members = slices.DeleteFunc(rs.Members, func(m Member) bool { return m.State == MemberDeleted })
	MarkBootstrap(&rs, Grow("c", role, &rs, 4, false, nil, time.Time{}))
	if got := formers(rs); len(got) != 1 {
		t.Fatalf("after its removal: %v form it, want one", got)
	}
}
