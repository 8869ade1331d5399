package workflows_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
)

func maintenanceAt(env *testsuite.TestWorkflowEnvironment, at time.Duration, on bool) {
	env.RegisterDelayedCallback(func() {
		m := workflows.Maintenance{}
		if on {
			m = workflows.Maintenance{On: true, Reason: "moving servers", Since: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
		}
		env.SignalWorkflow(workflows.MaintenanceSignal, m)
	}, at)
}

// refusedFor checks that a validator refused the update with the code (the refusal's
// ApplicationError type) and in words that say each of words.
func refusedFor(o *outcome, code apperr.Code, words ...string) error {
	if o.refused == nil {
		return fmt.Errorf("not refused: %v", o.result)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(o.refused, &appErr) || appErr.Type() != string(code) {
		return fmt.Errorf("refused without code %s: %#v", code, o.refused)
	}
	for _, w := range words {
		if !strings.Contains(o.refused.Error(), w) {
			return fmt.Errorf("refusal does not say %q: %v", w, o.refused)
		}
	}
	return nil
}

// A member down when maintenance begins is not replaced while it lasts, even past its
// replaceAfter; the timer fires once maintenance ends. Events sent meanwhile are recorded,
// not acted on, and changes are refused naming the maintenance.
func TestMaintenanceHoldsReplacementUntilItEnds(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-1", workflows.HealthDown)
	maintenanceAt(env, settled+time.Minute, true)
	var held, after workflows.ClusterStatus
	queryAt(t, env, settled+10*time.Minute, &held)
	resize := updateAt(env, settled+11*time.Minute, workflows.ResizeUpdate, workflows.ResizeRequest{Counts: []workflows.RoleCount{{Role: "worker", Members: 5}}})
	report := updateAt(env, settled+11*time.Minute, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-0", Event: workflows.HealthDown})
	signalAt(env, settled+12*time.Minute, "c-worker-2", workflows.HealthDown)
	var heldCalls []string
	env.RegisterDelayedCallback(func() { heldCalls = fake.Calls() }, settled+30*time.Minute)
	maintenanceAt(env, settled+30*time.Minute, false)
	queryAt(t, env, settled+40*time.Minute, &after)
	runHealth(t, fake, 3, env)

	if held.Phase != workflows.PhaseMaintenance || !strings.Contains(held.Message, "moving servers") || held.Maintenance == nil {
		t.Errorf("held: phase %s (%s)", held.Phase, held.Message)
	}
	if m := memberIn(held, "c-worker-1"); m == nil || m.State != workflows.MemberDown {
		t.Errorf("replaced during maintenance: %+v", held.Role("worker").Members)
	}
	if err := refusedFor(resize, apperr.Maintenance, "resize refused", "maintenance is on", "moving servers"); err != nil {
		t.Error(err)
	}
	if err := refusedFor(report, apperr.Maintenance, "member-event refused", "maintenance is on"); err != nil {
		t.Error(err)
	}
	w2 := memberIn(after, "c-worker-2")
	if w2 == nil || w2.State != workflows.MemberReady || w2.Health == nil {
		t.Fatalf("c-worker-2 after: %+v", w2)
	}
	last := w2.Health.Transitions[len(w2.Health.Transitions)-1]
	if last.From != workflows.MemberReady || last.To != workflows.MemberReady || !strings.Contains(last.Reason, "not acted on") {
		t.Errorf("the held event was not recorded as such: %+v", last)
	}
	if indexOf(heldCalls, "configure c-worker-3") >= 0 {
		t.Errorf("something ran during maintenance: %v", heldCalls)
	}
	if memberIn(after, "c-worker-1") != nil || memberIn(after, "c-worker-3") == nil || after.Phase != workflows.PhaseReady {
		t.Errorf("after maintenance: phase %s (%s), members %+v", after.Phase, after.Message, after.Role("worker").Members)
	}
}

// A deploy under way stops at its next level when maintenance begins, and goes on from
// there when it ends: every member is configured once.
func TestMaintenanceStopsADeployAndItResumes(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	maintenanceAt(env, 0, true)
	var held, after workflows.ClusterStatus
	queryAt(t, env, time.Hour, &held)
	var heldCalls []string
	env.RegisterDelayedCallback(func() { heldCalls = fake.Calls() }, time.Hour)
	maintenanceAt(env, 2*time.Hour, false)
	queryAt(t, env, 3*time.Hour, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels)})

	if held.Phase != workflows.PhaseMaintenance || !strings.Contains(held.Message, "is held and resumes when maintenance ends") {
		t.Errorf("held: phase %s (%s)", held.Phase, held.Message)
	}
	if indexOf(heldCalls, "configure c-worker") >= 0 || indexOf(heldCalls, "configure c-edge") >= 0 {
		t.Errorf("a later level started in maintenance: %v", heldCalls)
	}
	if after.Phase != workflows.PhaseReady {
		t.Fatalf("after: phase %s (%s)", after.Phase, after.Message)
	}
	calls := fake.Calls()
	for _, m := range []string{"c-controller-0", "c-worker-0", "c-worker-1", "c-worker-2", "c-edge-0", "c-edge-1"} {
		if n := countCalls(calls, "configure "+m); n != 1 {
			t.Errorf("%s configured %d times: %v", m, n, calls)
		}
	}
}

// Export is refused while an operation runs; in maintenance it marks the cluster, and only
// then does retire close the workflow, as exported and with no teardown.
func TestRetireNeedsAnExportInMaintenance(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	early := updateAt(env, 0, workflows.ExportUpdate)
	tooSoon := updateAt(env, settled, workflows.RetireUpdate)
	outside := updateAt(env, settled+time.Minute, workflows.ExportUpdate)
	maintenanceAt(env, settled+2*time.Minute, true)
	inside := updateAt(env, settled+3*time.Minute, workflows.ExportUpdate)
	retire := updateAt(env, settled+4*time.Minute, workflows.RetireUpdate)
	runHealth(t, fake, 2, env)

	if err := refusedFor(early, apperr.Unavailable, "export refused", "running an operation"); err != nil {
		t.Error(err)
	}
	if err := refusedFor(tooSoon, apperr.Conflict, "retire refused", "not exported during the maintenance"); err != nil {
		t.Error(err)
	}
	if outside.refused != nil || inside.refused != nil || retire.refused != nil {
		t.Fatalf("refused: export %v, export in maintenance %v, retire %v", outside.refused, inside.refused, retire.refused)
	}
	var result workflows.ClusterStatus
	if err := env.GetWorkflowResult(&result); err != nil {
		t.Fatal(err)
	}
	if result.Phase != workflows.PhaseExported {
		t.Errorf("retired as %s (%s)", result.Phase, result.Message)
	}
	if i := indexOf(fake.Calls(), "teardown"); i >= 0 {
		t.Errorf("retire tore members down: %v", fake.Calls())
	}
}
