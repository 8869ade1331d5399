package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// wideSpec is one controller and a role of workers members, set up at most 500 at once.
func wideSpec(workers int) string {
	return fmt.Sprintf(`
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: worker, members: %d, maxInFlight: 500, dependsOn: [controller], startscript: s.sh}
`, workers)
}

// roleChildren records the role children a test starts: their IDs and inputs.
type roleChildren struct {
	mu     sync.Mutex
	inputs map[string]workflows.RoleInput
}

func watchRoleChildren(t *testing.T, env *testsuite.TestWorkflowEnvironment) *roleChildren {
	c := &roleChildren{inputs: map[string]workflows.RoleInput{}}
	env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, args converter.EncodedValues) {
		var in workflows.RoleInput
		if err := args.Get(&in); err != nil {
			t.Errorf("child %s: %v", info.WorkflowExecution.ID, err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inputs[info.WorkflowExecution.ID] = in
	})
	return c
}

// of lists the children of one operation step on one role, e.g. "configure-1/worker".
func (c *roleChildren) of(step string) map[string]workflows.RoleInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]workflows.RoleInput{}
	for id, in := range c.inputs {
		if strings.Contains(id, "/"+step) {
			out[id] = in
		}
	}
	return out
}

func TestAWideRoleRunsInBatchesAndConfiguresEveryMemberOnce(t *testing.T) {
	withoutRace(t)
	fake := newFakeBackend()
	env := newEnv(t, fake)
	env.SetTestTimeout(3 * time.Minute)
	children := watchRoleChildren(t, env)
	final := deployThenDeleteSpec(t, env, wideSpec(4999), time.Hour)

	batches := children.of("configure-1/worker/batch-")
	if len(batches) != 20 {
		t.Fatalf("%d batches configured 4999 workers, want 20 of at most 250", len(batches))
	}
	inFlight := 0
	for id, in := range batches {
		if len(in.Members) > 250 {
			t.Errorf("%s acts on %d members, more than 250", id, len(in.Members))
		}
		inFlight += in.MaxInFlight
	}
	if inFlight != 500 {
		t.Errorf("the batches' shares of maxInFlight add up to %d, want 500", inFlight)
	}
	if fake.peak["worker"] > 500 {
		t.Errorf("%d workers configured at once, maxInFlight is 500", fake.peak["worker"])
	}
	calls := fake.Calls()
	if lastIndexOf(calls, "configure c-controller") > indexOf(calls, "configure c-worker") {
		t.Errorf("a worker configured before the controller")
	}
	counts := map[string]int{}
	for _, c := range calls {
		counts[c]++
	}
	names := []string{"c-controller-0"}
	for i := range 4999 {
		names = append(names, fmt.Sprintf("c-worker-%d", i))
	}
	for _, name := range names {
		for _, call := range []string{"configure " + name, "teardown " + name, "remove " + name} {
			if counts[call] != 1 {
				t.Fatalf("%s: %d calls, want exactly 1", call, counts[call])
			}
		}
	}
	// Configmeta travels gzipped at this size, and arrives whole.
	listed := 0
	for _, f := range fake.files {
		listed = max(listed, len(f.ConfigMeta.Members))
	}
	if listed != 5000 {
		t.Errorf("configmeta listed at most %d members, want 5000", listed)
	}
	// The workflow's result is bounded; it still counts every member.
	if n := final.Role("worker").MemberCount; n != 4999 {
		t.Errorf("%d workers at the end, want 4999", n)
	}
	if n := len(final.Role("controller").Members) + len(final.Role("worker").Members); n > 1000 {
		t.Errorf("the result lists %d members, more than its bound of 1000", n)
	}
}

// failingBackend fails the configure of one member at once, "disk full"; the members in
// hold take that long, the others a millisecond.
func failingBackend(failing string, hold map[string]time.Duration) *fakeBackend {
	fake := newFakeBackend()
	fake.delay = time.Millisecond
	fake.outcome = func(ctx context.Context, run backend.ScriptRun) runner.Result {
		if run.Member.Name == failing {
			return runner.Result{Outcome: runner.Exited, ExitCode: 1, StderrTail: "disk full\n"}
		}
		select {
		case <-time.After(hold[run.Member.Name]):
		case <-ctx.Done():
		}
		return runner.Result{Outcome: runner.Exited}
	}
	return fake
}

// configured counts the configure runs the fake backend saw.
func configured(fake *fakeBackend) int {
	n := 0
	for _, c := range fake.Calls() {
		if strings.HasPrefix(c, "configure ") {
			n++
		}
	}
	return n
}

func TestAFailureStopsEveryBatchOfTheRole(t *testing.T) {
	fake := failingBackend("c-worker-3", nil)
	env := newEnv(t, fake)
	env.SetTestTimeout(time.Minute)
	status := deployAndQuery(t, env, `
name: c
roles:
  - {name: worker, members: 2000, maxInFlight: 8, startscript: s.sh}
`)
	if status.Phase != workflows.PhaseFailed || !strings.Contains(status.Message, "role worker failed") {
		t.Fatalf("phase %s (%s), want failed naming worker", status.Phase, status.Message)
	}
	failed := status.Member("c-worker-3")
	if failed.State != workflows.MemberConfigError || failed.StderrTail != "disk full\n" {
		t.Errorf("the failed member lacks its state or tail: %+v", failed)
	}
	// 8 batches run at once, 1 member each; the others stop at the failure and the rest
	// never start.
	if n := configured(fake); n > 100 {
		t.Errorf("%d of 2000 members configured after the first failed", n)
	}
	pending, notStarted := 0, 0
	for _, m := range status.Role("worker").Members {
		if m.State == workflows.MemberPending {
			pending++
			if strings.HasPrefix(m.Detail, "not started: c-worker-3 failed") {
				notStarted++
			}
		}
	}
	if pending < 1900 || notStarted != pending {
		t.Errorf("%d members pending, %d of them saying why; want all the unstarted ones to name c-worker-3", pending, notStarted)
	}
}

// A failed member halts the other batches at once, not when its own batch ends or next
// reports: here its batch still waits on a slow member, while the others would run every
// one of theirs in that time.
func TestAFailureHaltsTheOtherBatchesWhileItsOwnStillRuns(t *testing.T) {
	fake := failingBackend("c-worker-1", map[string]time.Duration{"c-worker-0": 2 * time.Second})
	env := newEnv(t, fake)
	env.SetTestTimeout(time.Minute)
	status := deployAndQuery(t, env, `
name: c
roles:
  - {name: worker, members: 2000, maxInFlight: 16, startscript: s.sh}
`)
	if status.Phase != workflows.PhaseFailed || status.Member("c-worker-1").State != workflows.MemberConfigError {
		t.Fatalf("phase %s (%s), want failed with c-worker-1 in config_error", status.Phase, status.Message)
	}
	// 8 batches of 2 at once: the others had started a few members each when c-worker-1
	// failed, and every one of theirs within c-worker-0's 2 s if nobody told them.
	if n := configured(fake); n > 200 {
		t.Errorf("%d of 2000 members configured after the first failed, while its batch still ran", n)
	}
}

func TestADeleteInTheMiddleOfABatchedRole(t *testing.T) {
	fake := newFakeBackend()
	started := 0
	var mu sync.Mutex
	fake.outcome = func(ctx context.Context, run backend.ScriptRun) runner.Result {
		mu.Lock()
		started++
		hang := run.Event == spec.EventConfigure && started > 600
		mu.Unlock()
		if hang {
			<-ctx.Done()
			return runner.Result{Outcome: runner.Canceled, ExitCode: 143}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	env.SetTestTimeout(time.Minute)
	final := deployThenDeleteSpec(t, env, `
name: c
roles:
  - {name: worker, members: 1000, maxInFlight: 100, startscript: s.sh}
`, time.Second)
	calls := fake.Calls()
	for _, m := range final.Role("worker").Members {
		if m.State != workflows.MemberDeleted {
			t.Errorf("%s is %s after the delete", m.Name, m.State)
		}
		if n := countCalls(calls, "configure "+m.Name); n > 1 {
			t.Errorf("%s configured %d times", m.Name, n)
		}
		if n := countCalls(calls, "teardown "+m.Name); n > 1 {
			t.Errorf("%s torn down %d times", m.Name, n)
		}
	}
	if n := countCalls(calls, "configure c-worker-999"); n != 0 {
		t.Errorf("the last batch started during the delete")
	}
}

func TestAWideClusterContinuesAsNewWithinThePayloadLimit(t *testing.T) {
	withoutRace(t)
	env := newEnv(t, newFakeBackend())
	env.SetTestTimeout(2 * time.Minute)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, wideSpec(2999)), ContinueAsNewEvery: 1})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after the deploy, got %v", err)
	}
	if size := can.Input.Size(); size > 256<<10 {
		t.Errorf("the continue-as-new input of 3000 members is %d bytes; want it compressed well below 1 MiB", size)
	}
	var next workflows.ClusterInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.CarriedGzip) == 0 || next.Carried != nil {
		t.Fatalf("a large state should travel gzipped")
	}

	fake := newFakeBackend()
	for i := range 2999 {
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "worker", Name: fmt.Sprintf("c-worker-%d", i)}, true)
	}
	fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "controller", Name: "c-controller-0"}, true)
	env = newEnv(t, fake)
	env.SetTestTimeout(2 * time.Minute)
	var after workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { after = query(t, env) }, 30*time.Minute)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, next)
	if after.Phase != workflows.PhaseReady || after.Role("worker").Ready != 2999 || after.Generation != 1 {
		t.Errorf("the next run: phase %s, %d workers ready, generation %d", after.Phase, after.Role("worker").Ready, after.Generation)
	}
	if n := len(fake.Calls()); n > 10 {
		t.Errorf("the next run acted on members it took over: %d calls, e.g. %v", n, fake.Calls()[:10])
	}
}
