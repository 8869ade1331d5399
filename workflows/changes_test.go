package workflows_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/clusterflow/clusterflow/internal/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// withoutRole drops a role from a spec, as a user editing the file would, keeping the
// other roles as they are (so a dependency on it dangles unless they change too).
func withoutRole(c spec.Cluster, name string) spec.Cluster {
	c.Roles = slices.DeleteFunc(slices.Clone(c.Roles), func(r spec.Role) bool { return r.Name == name })
	return c
}

func TestApplyRefusesWhatWouldHarmRunningMembers(t *testing.T) {
	base := testSpec(t, threeLevels)
	otherName := base
	otherName.Name = "d"
	envChanged := testSpec(t, strings.Replace(threeLevels, "{name: worker, members: 3,", "{name: worker, members: 3, env: {HEAP: 4g},", 1))
	noController := withoutRole(base, "controller")
	for _, tc := range []struct {
		name string
		spec spec.Cluster
		want []string
	}{
		{"another cluster's spec", otherName, []string{`apply refused: the spec is for cluster "d", not "c"`}},
		{"env of a role with members", envChanged, []string{"role worker refused: it has members, so its env cannot change"}},
		{"a role others need, of cardinality 1", noController, []string{
			`removing role controller refused: its cardinality "1" does not allow 0 members`,
			"removing role controller refused: worker still depend on it",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, newFakeBackend())
			var rejection error
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(workflows.ApplyUpdate, "apply", &testsuite.TestUpdateCallback{
					OnReject:   func(err error) { rejection = err },
					OnAccept:   func() { t.Error("apply accepted") },
					OnComplete: func(any, error) {},
				}, workflows.ApplyRequest{Spec: tc.spec})
			}, time.Hour)
			var after workflows.ClusterStatus
			env.RegisterDelayedCallback(func() { after = query(t, env) }, 2*time.Hour)
			env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: base})
			if rejection == nil {
				t.Fatal("apply was not refused")
			}
			for _, want := range tc.want {
				if !strings.Contains(rejection.Error(), want) {
					t.Errorf("refusal %q does not say %q", rejection, want)
				}
			}
			if after.Generation != 1 || after.Phase != workflows.PhaseReady {
				t.Errorf("a refused apply changed the cluster: generation %d, phase %s", after.Generation, after.Phase)
			}
		})
	}
}

func TestApplyThatChangesNothingKeepsTheGeneration(t *testing.T) {
	env := newEnv(t, newFakeBackend())
	var result workflows.ChangeResult
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.ApplyUpdate, "apply", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("apply refused: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Error(err)
				} else {
					result = v.(workflows.ChangeResult)
				}
			},
		}, workflows.ApplyRequest{Spec: testSpec(t, threeLevels)})
	}, time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})
	if result.Changed || result.Generation != 1 || result.Summary != "no change" {
		t.Errorf("result %+v, want no change at generation 1", result)
	}
}
