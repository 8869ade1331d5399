package workflows_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

// A resize may name the members to take away (resize --remove): those go, through the
// same removal as any shrink, and the lowest ordinals stay. Names that are no member,
// named twice, a count that does not match, or a shrink past the role's cardinality are
// refused by name, before anything is recorded.
func TestAResizeRemovesTheMembersItNames(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	remove := func(at time.Duration, names []string, counts ...workflows.RoleCount) *outcome {
		return updateAt(env, at, workflows.ResizeUpdate, workflows.ResizeRequest{Counts: counts, Remove: names})
	}
	refused := map[string]*outcome{
		`--remove c-worker-9 refused: cluster c has no member "c-worker-9"`:                  remove(50*time.Minute, []string{"c-worker-9"}, workflows.RoleCount{Role: "worker", Members: 2}),
		`--remove c-worker-1 refused: it is named more than once`:                            remove(50*time.Minute, []string{"c-worker-1", "c-worker-1"}, workflows.RoleCount{Role: "worker", Members: 2}),
		`--remove refused: role worker has 3 members, and 1 named to go: give worker=2`:      remove(50*time.Minute, []string{"c-worker-1"}, workflows.RoleCount{Role: "worker", Members: 1}),
		`--remove refused: role controller would keep 0 members, and its cardinality is "1"`: remove(50*time.Minute, []string{"c-controller-0"}, workflows.RoleCount{Role: "controller", Members: 0}),
	}
	taken := remove(time.Hour, []string{"c-worker-0"}, workflows.RoleCount{Role: "worker", Members: 2})
	var before []string
	env.RegisterDelayedCallback(func() { before = fake.Calls() }, time.Hour)
	var after workflows.ClusterStatus
	queryAt(t, env, 2*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})

	for want, o := range refused {
		if o.refused == nil || !strings.Contains(o.refused.Error(), want) {
			t.Errorf("want refused with %q; got %v", want, o.refused)
		}
	}
	if taken.refused != nil {
		t.Fatalf("the removal of c-worker-0 was refused: %v", taken.refused)
	}
	want := []string{"c-edge-0=ready", "c-edge-1=ready", "c-worker-1=ready", "c-worker-2=ready", "c-controller-0=ready"}
	if got := memberNames(after); !slices.Equal(got, want) {
		t.Errorf("members %v, want %v: c-worker-0 gone, the higher ordinals kept", got, want)
	}
	calls := fake.Calls()[len(before):]
	if countCalls(calls, "teardown c-worker-0") != 1 || countCalls(calls, "remove c-worker-0") != 1 {
		t.Errorf("c-worker-0: want one teardown and one removal: %v", calls)
	}
	for _, stays := range []string{"c-worker-1", "c-worker-2"} {
		if countCalls(calls, "teardown "+stays) != 0 {
			t.Errorf("%s, not named, was torn down: %v", stays, calls)
		}
	}
	if len(before) == 0 || countCalls(before, "teardown") != 0 {
		t.Errorf("a refused removal tore something down: %v", before)
	}
}
