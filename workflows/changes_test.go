package workflows_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
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
	cardinalityChanged := testSpec(t, strings.Replace(threeLevels, "{name: worker, members: 3,", "{name: worker, members: 3, cardinality: \"3\",", 1))
	noController := withoutRole(base, "controller")
	for _, tc := range []struct {
		name string
		spec spec.Cluster
		want []string
	}{
		{"another cluster's spec", otherName, []string{`apply refused: the spec is for cluster "d", not "c"`}},
		{"cardinality of a role with members", cardinalityChanged, []string{"role worker refused: it has members, so its cardinality cannot change"}},
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

// resizeAt sends a resize at the given workflow time, failing the test if it is refused.
func resizeAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration, counts ...workflows.RoleCount) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.ResizeUpdate, at.String(), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("resize %v refused: %v", counts, err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, workflows.ResizeRequest{Counts: counts})
	}, at)
}

func TestGrowThenShrinkNotifiesTheMembersThatStay(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	resizeAt(t, env, time.Hour, workflows.RoleCount{Role: "worker", Members: 5})
	var grown []string
	env.RegisterDelayedCallback(func() { grown = fake.Calls() }, 2*time.Hour)
	resizeAt(t, env, 3*time.Hour, workflows.RoleCount{Role: "worker", Members: 1})
	var final workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { final = query(t, env) }, 4*time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})

	added := " worker=[c-worker-3 c-worker-4]"
	for _, m := range []string{"c-controller-0", "c-worker-0", "c-worker-1", "c-worker-2", "c-edge-0", "c-edge-1"} {
		if countCalls(grown, "addnodes "+m+added) != 1 {
			t.Errorf("%s was not told once of the new workers: %v", m, grown)
		}
	}
	for _, m := range []string{"c-worker-3", "c-worker-4"} {
		if countCalls(grown, "configure "+m) != 1 || indexOf(grown, "addnodes "+m) >= 0 {
			t.Errorf("%s: want one configure and no addnodes: %v", m, grown)
		}
		if indexOf(grown, "addnodes") < lastIndexOf(grown, "configure "+m) {
			t.Errorf("addnodes ran before %s was ready: %v", m, grown)
		}
	}
	calls := fake.Calls()[len(grown):]
	removed := " worker=[c-worker-1 c-worker-2 c-worker-3 c-worker-4]"
	for _, m := range []string{"c-worker-1", "c-worker-2", "c-worker-3", "c-worker-4"} {
		if countCalls(calls, "teardown "+m) != 1 || countCalls(calls, "remove "+m) != 1 {
			t.Errorf("%s: want one teardown and one removal: %v", m, calls)
		}
		if lastIndexOf(calls, "remove "+m) > indexOf(calls, "delnodes") {
			t.Errorf("delnodes ran before %s was removed: %v", m, calls)
		}
	}
	for _, m := range []string{"c-controller-0", "c-worker-0", "c-edge-0", "c-edge-1"} {
		if countCalls(calls, "delnodes "+m+removed) != 1 {
			t.Errorf("%s was not told once of the removed workers: %v", m, calls)
		}
	}
	if final.Phase != workflows.PhaseReady || final.Generation != 3 || final.ReachedGeneration != 3 || len(final.Role("worker").Members) != 1 {
		t.Errorf("final: phase %s, generation %d reached %d, workers %+v", final.Phase, final.Generation, final.ReachedGeneration, final.Role("worker").Members)
	}
}

// TestContinueAsNewKeepsTheState runs a cluster that continues as new after its deploy,
// starts the next run from what it handed over, and compares what status says.
func TestContinueAsNewKeepsTheState(t *testing.T) {
	env := newEnv(t, newFakeBackend())
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels), ContinueAsNewEvery: 1})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after one operation, got %v", err)
	}
	var next workflows.ClusterInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Carried == nil || next.ContinueAsNewEvery != 1 {
		t.Fatalf("handed over %+v", next)
	}
	before := next.Carried.State

	fake := newFakeBackend()
	for _, r := range before.Roles {
		for _, m := range r.Members {
			fake.setSandbox(backend.MemberRef{Cluster: "c", Role: r.Name, Name: m.Name}, true) // or reconcile finds them gone
		}
	}
	env = newEnv(t, fake)
	resizeAt(t, env, time.Hour, workflows.RoleCount{Role: "edge", Members: 3})
	var after workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { after = query(t, env) }, 30*time.Minute)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, next)
	var handedOver []string
	for _, r := range before.Roles {
		for _, m := range r.Members {
			handedOver = append(handedOver, m.Name+"="+string(m.State))
		}
	}
	if after.Phase != workflows.PhaseReady || after.Generation != before.Generation || !slices.Equal(memberNames(after), handedOver) {
		t.Errorf("the next run's status differs:\nbefore %+v\nafter  %+v", before, after)
	}
	// The next run carries on: the resize gets ordinal 2 and no one is set up twice.
	if calls := fake.Calls(); countCalls(calls, "configure c-edge-2") != 1 || indexOf(calls, "configure c-edge-0") >= 0 || indexOf(calls, "configure c-worker") >= 0 {
		t.Errorf("calls after continue-as-new: %v", calls)
	}
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want the next run to continue as new after its operation, got %v", err)
	}
	// It counted on from the operations the first run handed over: one more, the resize.
	var third workflows.ClusterInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &third); err != nil {
		t.Fatal(err)
	}
	if third.Carried.State.Operations != before.Operations+1 {
		t.Errorf("operations: handed over %d, then %d after one more", before.Operations, third.Carried.State.Operations)
	}
}

func memberNames(s workflows.ClusterStatus) []string {
	var names []string
	for _, r := range s.Roles {
		for _, m := range r.Members {
			names = append(names, m.Name+"="+string(m.State))
		}
	}
	return names
}

// TestAnApplyMadeFromAnOlderSpecIsRefused: an apply that names the spec it was made from
// (IfSpec, as `clusterflow set` sends) is refused once another change came between, and
// changes nothing; made from the current spec, it runs.
func TestAnApplyMadeFromAnOlderSpecIsRefused(t *testing.T) {
	env := newEnv(t, newFakeBackend())
	var read, reread workflows.DesiredSpec
	readSpec := func(into *workflows.DesiredSpec) {
		v, err := env.QueryWorkflow(workflows.SpecQuery)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(into); err != nil {
			t.Fatal(err)
		}
	}
	withEnv := func(d workflows.DesiredSpec, value string) spec.Cluster {
		c := d.Spec
		c.Roles = slices.Clone(c.Roles)
		for i := range c.Roles {
			if c.Roles[i].Name == "worker" {
				c.Roles[i].Env = map[string]string{"VERSION": value}
			}
		}
		return c
	}
	env.RegisterDelayedCallback(func() { readSpec(&read) }, time.Hour)
	resize := updateAt(env, time.Hour+time.Minute, workflows.ResizeUpdate, workflows.ResizeRequest{Counts: []workflows.RoleCount{{Role: "worker", Members: 4}}})
	var stale, current *outcome
	env.RegisterDelayedCallback(func() {
		stale = updateNow(env, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withEnv(read, "2"), IfSpec: read.Hash})
	}, time.Hour+2*time.Minute)
	env.RegisterDelayedCallback(func() { readSpec(&reread) }, time.Hour+3*time.Minute)
	env.RegisterDelayedCallback(func() {
		current = updateNow(env, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: withEnv(reread, "2"), IfSpec: reread.Hash})
	}, time.Hour+4*time.Minute)
	var after workflows.ClusterStatus
	queryAt(t, env, 2*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})

	if resize.refused != nil {
		t.Fatalf("resize refused: %v", resize.refused)
	}
	if read.Hash == "" || read.Hash == reread.Hash {
		t.Fatalf("the spec's hash did not change with the resize: %q, then %q", read.Hash, reread.Hash)
	}
	if stale.refused == nil || !strings.Contains(stale.refused.Error(), "the cluster's spec changed after it was read") {
		t.Errorf("an apply from the spec before the resize: refused %v (result %+v)", stale.refused, stale.result)
	}
	if r, ok := current.result.(workflows.ChangeResult); current.refused != nil || !ok || !r.Changed || r.Revision != 2 {
		t.Errorf("an apply from the current spec: refused %v, result %+v", current.refused, current.result)
	}
	if w := after.Role("worker"); w.Desired != 4 || after.Revision != 2 {
		t.Errorf("after: worker desired %d (want the resize's 4 kept), revision %d", w.Desired, after.Revision)
	}
}

// updateNow sends an update at once, from a delayed callback.
func updateNow(env *testsuite.TestWorkflowEnvironment, update string, arg any) *outcome {
	o := &outcome{}
	env.UpdateWorkflow(update, fmt.Sprintf("%s-%p", update, o), &testsuite.TestUpdateCallback{
		OnReject: func(err error) { o.refused = err }, OnAccept: func() {}, OnComplete: func(v any, _ error) { o.result = v },
	}, arg)
	return o
}
