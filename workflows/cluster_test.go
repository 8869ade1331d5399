package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
)

const script = "#!/bin/sh\n"

func testSpec(t *testing.T, yaml string) spec.Cluster {
	t.Helper()
	c, err := spec.Parse([]byte(yaml), "test.yaml", func(string) ([]byte, error) { return []byte(script), nil })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const threeLevels = `
name: c
roles:
  - {name: edge, members: 2, dependsOn: [worker], startscript: s.sh}
  - {name: worker, members: 3, dependsOn: [controller], startscript: s.sh}
  - {name: controller, cardinality: "1", startscript: s.sh}
`

// testWorkerOptions are the test environment's worker options. The SDK fails a workflow
// task that runs 1 s of wall time without yielding, as a deadlock; under the race detector
// on a busy 2-core machine a wide role's task took longer than that with no deadlock at
// all, and CI runs the 10,000-member tests at nice 15 beside the end-to-end tests, where
// a minute was not enough either (the rollout's workflow ended early in one CI run). Ten
// minutes still turns a real deadlock into a failure well inside `go test`'s timeout.
var testWorkerOptions = sdkworker.Options{DeadlockDetectionTimeout: 10 * time.Minute}

// activityWallClockGrace is added to every activity's start-to-close timeout in the test
// environment, which counts it in wall time while its workflow's clock skips ahead: the
// fake's activities answer at once, and a starved test process is no reason to fail them.
const activityWallClockGrace = time.Hour

func newEnv(t *testing.T, fake *fakeBackend) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetActivityTimeoutGracePeriod(activityWallClockGrace)
	worker.RegisterWorkflows(env)
	env.RegisterActivity(&activities.Activities{Backend: fake})
	env.RegisterActivityWithOptions(fake.RunStartscript, activity.RegisterOptions{Name: "RunStartscript", DisableAlreadyRegisteredCheck: true})
	env.SetTestTimeout(2 * time.Minute)
	// A cluster lives until deleted, reconciling every minute: end tests that leave it
	// running after a few hours of workflow time (their events end within that).
	env.SetWorkflowRunTimeout(5 * time.Hour)
	// Hosts fetch configmeta from the cluster's workflow through a client, which this
	// environment lacks: clusters here send it whole, as before; the end-to-end tests
	// run the fetch.
	env.OnGetVersion(change.ConfigMetaByQuery, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return env
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) workflows.ClusterStatus {
	t.Helper()
	v, err := env.QueryWorkflow(workflows.StatusQuery)
	if err != nil {
		t.Fatal(err)
	}
	var s workflows.ClusterStatus
	if err := v.Get(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// deployAndQuery deploys a spec and returns the status once the workflow has settled
// (ready or failed, waiting for operations).
func deployAndQuery(t *testing.T, env *testsuite.TestWorkflowEnvironment, yaml string) workflows.ClusterStatus {
	t.Helper()
	var status workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { status = query(t, env) }, time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, yaml)})
	return status
}

// indexOf returns the position of the first call with the given prefix, or -1.
func indexOf(calls []string, prefix string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func lastIndexOf(calls []string, prefix string) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if strings.HasPrefix(calls[i], prefix) {
			return i
		}
	}
	return -1
}

func TestDeployRunsLevelsInOrder(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	status := deployAndQuery(t, env, threeLevels)

	if status.Phase != workflows.PhaseReady {
		t.Fatalf("phase %s (%s), want ready", status.Phase, status.Message)
	}
	if !slices.Equal(status.Levels[0], []string{"controller"}) || !slices.Equal(status.Levels[2], []string{"edge"}) {
		t.Errorf("levels %v", status.Levels)
	}
	calls := fake.Calls()
	// Every configure of a level precedes every configure of the next.
	if lastIndexOf(calls, "configure c-controller") > indexOf(calls, "configure c-worker") ||
		lastIndexOf(calls, "configure c-worker") > indexOf(calls, "configure c-edge") {
		t.Errorf("levels overlap: %v", calls)
	}
	for _, r := range status.Roles {
		if r.Ready != r.Desired {
			t.Errorf("role %s: %d/%d ready", r.Name, r.Ready, r.Desired)
		}
		for i, m := range r.Members {
			if m.Name != spec.MemberName("c", r.Name, i) || m.State != workflows.MemberReady {
				t.Errorf("member %+v", m)
			}
			if n := countCalls(calls, "configure "+m.Name); n != 1 {
				t.Errorf("%s configured %d times", m.Name, n)
			}
		}
	}
	// A ready cluster lives on, waiting for operations, until the test suite times it out.
	var timeout *temporal.TimeoutError
	if err := env.GetWorkflowError(); !errors.As(err, &timeout) {
		t.Errorf("a ready cluster should still be running; it ended with %v", err)
	}
}

// deployThenDelete deploys the three-level spec, asks for a delete after the given
// (workflow) time, and returns the deleted cluster's final status.
func deployThenDelete(t *testing.T, env *testsuite.TestWorkflowEnvironment, after time.Duration) workflows.ClusterStatus {
	t.Helper()
	return deployThenDeleteSpec(t, env, threeLevels, after)
}

// deployThenDeleteSpec deploys the spec, deletes the cluster after a while of workflow
// time, and returns the final status.
func deployThenDeleteSpec(t *testing.T, env *testsuite.TestWorkflowEnvironment, yaml string, after time.Duration) workflows.ClusterStatus {
	t.Helper()
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.DeleteUpdate, "delete-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("delete rejected: %v", err) },
		})
	}, after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, yaml)})
	var final workflows.ClusterStatus
	if err := env.GetWorkflowResult(&final); err != nil {
		t.Fatal(err)
	}
	if final.Phase != workflows.PhaseDeleted {
		t.Fatalf("phase %s, want deleted", final.Phase)
	}
	return final
}

// configureHangs makes the role's configure run until it is cancelled.
func configureHangs(role string) func(context.Context, backend.ScriptRun) runner.Result {
	return func(ctx context.Context, run backend.ScriptRun) runner.Result {
		if run.Event == spec.EventConfigure && run.Member.Role == role {
			<-ctx.Done()
			return runner.Result{Outcome: runner.Canceled, ExitCode: 143}
		}
		return runner.Result{Outcome: runner.Exited}
	}
}

func countCalls(calls []string, exact string) int {
	n := 0
	for _, c := range calls {
		if c == exact {
			n++
		}
	}
	return n
}

func TestMaxInFlightAndSameLevelConcurrency(t *testing.T) {
	fake := newFakeBackend()
	fake.delay = 20 * time.Millisecond
	env := newEnv(t, fake)
	status := deployAndQuery(t, env, `
name: c
roles:
  - {name: worker, members: 6, maxInFlight: 2, startscript: s.sh}
  - {name: free, members: 6, startscript: s.sh}
`)
	if status.Phase != workflows.PhaseReady {
		t.Fatalf("phase %s", status.Phase)
	}
	if fake.peak["worker"] > 2 {
		t.Errorf("worker ran %d scripts at once, maxInFlight is 2", fake.peak["worker"])
	}
	if fake.peak["free"] < 3 {
		t.Errorf("a role without maxInFlight ran only %d scripts at once", fake.peak["free"])
	}
	// Both roles are in level 0, so they run side by side.
	if fake.peakAll <= fake.peak["free"] {
		t.Errorf("roles of one level did not run concurrently: peak %d across roles, %d in one", fake.peakAll, fake.peak["free"])
	}
}

func TestFailedConfigureStopsLaterLevels(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Member.Name == "c-worker-1" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 3, StdoutTail: "trying\n", StderrTail: "boom: no controller\n"}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	status := deployAndQuery(t, env, threeLevels)

	if status.Phase != workflows.PhaseFailed || !strings.Contains(status.Message, "role worker failed") {
		t.Fatalf("phase %s (%s), want failed naming worker", status.Phase, status.Message)
	}
	failed := status.Role("worker").Members[1]
	if failed.State != workflows.MemberConfigError || failed.StderrTail != "boom: no controller\n" || failed.StdoutTail != "trying\n" {
		t.Errorf("failed member lacks its tails: %+v", failed)
	}
	if !strings.Contains(failed.Detail, "exited with status 3: boom: no controller") {
		t.Errorf("detail %q", failed.Detail)
	}
	if i := indexOf(fake.Calls(), "configure c-edge"); i >= 0 {
		t.Errorf("edge configured although worker failed: %v", fake.Calls())
	}
	for _, m := range status.Role("edge").Members {
		if m.State != workflows.MemberPending || !strings.Contains(m.Detail, "not started") {
			t.Errorf("edge member %+v", m)
		}
	}
}

func TestDeleteTearsDownInReverseOrder(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	final := deployThenDelete(t, env, time.Hour)
	calls := fake.Calls()
	if lastIndexOf(calls, "teardown c-edge") > indexOf(calls, "teardown c-worker") ||
		lastIndexOf(calls, "teardown c-worker") > indexOf(calls, "teardown c-controller") {
		t.Errorf("teardown not in reverse dependency order: %v", calls)
	}
	for _, r := range final.Roles {
		for _, m := range r.Members {
			if m.State != workflows.MemberDeleted || countCalls(calls, "remove "+m.Name) != 1 {
				t.Errorf("member %s: %s, removed %d times", m.Name, m.State, countCalls(calls, "remove "+m.Name))
			}
		}
	}
	if calls[len(calls)-1] != "remove cluster c" {
		t.Errorf("cluster folder not removed last: %v", calls)
	}
}

func TestDeleteMidSetupCancelsAndSkipsLaterLevels(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = configureHangs("controller")
	env := newEnv(t, fake)
	env.SetTestTimeout(10 * time.Second)
	final := deployThenDelete(t, env, time.Second)
	calls := fake.Calls()
	if indexOf(calls, "configure c-worker") >= 0 || indexOf(calls, "create c-worker") >= 0 {
		t.Errorf("a later level was set up during delete: %v", calls)
	}
	if countCalls(calls, "remove c-controller-0") != 1 {
		t.Errorf("controller not removed: %v", calls)
	}
	controller := final.Role("controller").Members[0]
	if controller.State != workflows.MemberDeleted {
		t.Errorf("controller %+v", controller)
	}
	// A cancelled configure may have started something, so teardown still runs (best effort).
	if countCalls(calls, "teardown c-controller-0") != 1 {
		t.Errorf("cancelled controller not torn down once: %v", calls)
	}
}

func TestEmptyRoleDoesNotHoldUpItsDependents(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	status := deployAndQuery(t, env, `
name: c
roles:
  - {name: gateway, members: 0, startscript: s.sh}
  - {name: edge, members: 1, dependsOn: [gateway], startscript: s.sh}
`)
	if status.Phase != workflows.PhaseReady {
		t.Fatalf("phase %s (%s), want ready", status.Phase, status.Message)
	}
	if calls := fake.Calls(); !slices.Equal(calls, []string{"create c-edge-0", "configure c-edge-0"}) {
		t.Errorf("calls %v", calls)
	}
}

func TestCancellingTheWorkflowCleansUpLikeADelete(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = configureHangs("worker")
	env := newEnv(t, fake)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})

	if err := env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("want the workflow cancelled, got %v", err)
	}
	calls := fake.Calls()
	for _, m := range []string{"c-controller-0", "c-worker-0", "c-worker-1", "c-worker-2"} {
		if countCalls(calls, "remove "+m) != 1 {
			t.Errorf("%s not removed after cancel: %v", m, calls)
		}
	}
	if indexOf(calls, "create c-edge") >= 0 || calls[len(calls)-1] != "remove cluster c" {
		t.Errorf("calls %v", calls)
	}
}
