package plan

import (
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

func TestPlanStart(t *testing.T) {
	desired := spec.Cluster{Roles: []spec.Role{
		{Name: "db", Events: []spec.Event{spec.EventConfigure, spec.EventStart}},
		{Name: "web", Events: spec.AllEvents},
	}}
	roles := []RoleState{
		{Name: "db", Members: []Member{
			{Name: "db-0", Host: "h2", State: MemberReady},
			{Name: "db-1", Host: "h1", State: MemberReady},
			{Name: "db-2", Host: "h2", State: MemberDown},
			{Name: "db-3", Host: "h2", State: MemberReady, Leaving: true},
		}},
		{Name: "web", Members: []Member{{Name: "web-0", Host: "h2", State: MemberReady}}},
	}
	var got []string
	step := Restart([][]string{{"db", "web"}}).Steps[0]
	_, work := step.Work(desired, roles, []string{"h2"})
	for _, rw := range work {
		for _, m := range rw.Members {
			got = append(got, rw.Role+":"+m.Name)
		}
	}
	// Members set up on the restarted host, down ones too, whose role subscribes to
	// start; web does not, and a leaving member is not started.
	if strings.Join(got, " ") != "db:db-0 db:db-2" {
		t.Errorf("starts %v", got)
	}
}

func TestFailedSetupsAreThoseOfRolesThatReplaceThem(t *testing.T) {
	desired := spec.Cluster{Roles: []spec.Role{
		{Name: "db", Members: 2, Health: spec.Health{ReplaceOnConfigError: true}},
		{Name: "web", Members: 1},
	}}
	roles := []RoleState{
		{Name: "db", Members: []Member{
			{Name: "db-0", Ordinal: 0, State: MemberConfigError},
			{Name: "db-1", Ordinal: 1, State: MemberReady},
			{Name: "db-2", Ordinal: 2, State: MemberConfigError}, // not wanted: the role has 2
		}},
		{Name: "web", Members: []Member{{Name: "web-0", State: MemberConfigError}}},
	}
	got := FailedSetups(desired, roles, []string{"web", "db"})
	if strings.Join(got, ",") != "db-0" {
		t.Errorf("failed setups = %v, want [db-0]: web does not replace them, and db-2 is not wanted", got)
	}
	if got := FailedSetups(desired, roles, []string{"web"}); len(got) != 0 {
		t.Errorf("failed setups of web = %v, want none", got)
	}
}
