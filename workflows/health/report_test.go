package health

import (
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A member's check reported from a folder of an earlier cluster of the same name (another
// home) is not this cluster's, and is refused; one of its own folder, or from an agent of
// before homes were reported, is weighed as any.
func TestACheckOfAnotherHomeIsRefused(t *testing.T) {
	s := &workflows.ClusterState{Name: "c", Home: "aaaaaaaaaaaa", Roles: []plan.RoleState{
		{Name: "r", Members: []plan.Member{{Name: "c-r-0", State: plan.MemberReady}}},
	}}
	report := func(home string) error {
		return CheckEvent(s, workflows.MemberEvent{Member: "c-r-0", Event: plan.HealthDown, Source: workflows.ProbeSource,
			Check: &spec.ProbeCheck{Home: home, Result: "exited with status 1", InARow: 3}})
	}
	if err := report("bbbbbbbbbbbb"); err == nil || !strings.Contains(err.Error(), "an earlier cluster of its name") {
		t.Errorf("a check of another home: %v", err)
	}
	for _, home := range []string{"aaaaaaaaaaaa", ""} {
		if err := report(home); err != nil {
			t.Errorf("a check of home %q: %v", home, err)
		}
	}
}
