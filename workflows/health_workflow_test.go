package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
)

// These tests skip time: replaceAfter, flapWindow and the timers behind them take no real
// time at all.

const healthSpec = `
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: worker, members: %d, dependsOn: [controller], startscript: s.sh, replaceAfter: 5m, flapLimit: 2, flapWindow: 30m}
`

// Deploys finish within seconds of workflow time; events start at an hour.
const settled = time.Hour

func signalAt(env *testsuite.TestWorkflowEnvironment, at time.Duration, member string, event workflows.HealthEvent) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.MemberEventSignal, workflows.MemberEvent{Member: member, Event: event, Reason: "test says " + string(event), Source: "test"})
	}, at)
}

func queryAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration, into *workflows.ClusterStatus) {
	env.RegisterDelayedCallback(func() { *into = query(t, env) }, at)
}

// outcome is how an update sent by updateAt ended.
type outcome struct {
	refused error
	result  any
}

// updateAt sends an update at the given workflow time.
func updateAt(env *testsuite.TestWorkflowEnvironment, at time.Duration, update string, args ...any) *outcome {
	o := &outcome{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(update, fmt.Sprintf("%s-%s-%p", update, at, o), &testsuite.TestUpdateCallback{
			OnReject: func(err error) { o.refused = err }, OnAccept: func() {}, OnComplete: func(v any, _ error) { o.result = v },
		}, args...)
	}, at)
	return o
}

func memberIn(s workflows.ClusterStatus, name string) *workflows.MemberStatus {
	for _, r := range s.Roles {
		for i := range r.Members {
			if r.Members[i].Name == name {
				return &r.Members[i]
			}
		}
	}
	return nil
}

func runHealth(t *testing.T, fake *fakeBackend, workers int, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, fmt.Sprintf(healthSpec, workers))})
}

func TestDownMemberIsReplacedAfterReplaceAfter(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-1", workflows.HealthDown)
	var down, early, after workflows.ClusterStatus
	queryAt(t, env, settled+time.Minute, &down)
	var beforeReplace []string
	env.RegisterDelayedCallback(func() { beforeReplace = fake.Calls() }, settled+4*time.Minute)
	queryAt(t, env, settled+4*time.Minute, &early)
	queryAt(t, env, settled+10*time.Minute, &after)
	runHealth(t, fake, 3, env)

	if m := memberIn(down, "c-worker-1"); m == nil || m.State != workflows.MemberDown || !strings.Contains(m.Detail, "test says down (from test)") {
		t.Fatalf("after down: %+v", m)
	}
	if down.Phase != workflows.PhaseDegraded || !strings.Contains(down.Message, "c-worker-1 down") {
		t.Errorf("phase %s (%s), want degraded naming the member", down.Phase, down.Message)
	}
	if m := memberIn(early, "c-worker-1"); m == nil || m.State != workflows.MemberDown || memberIn(early, "c-worker-3") != nil {
		t.Errorf("replaced before replaceAfter: %+v", early.Role("worker").Members)
	}
	if memberIn(after, "c-worker-1") != nil {
		t.Errorf("c-worker-1 still there: %+v", after.Role("worker").Members)
	}
	successor := memberIn(after, "c-worker-3")
	if successor == nil || successor.State != workflows.MemberReady || successor.Replaces != "c-worker-1" {
		t.Fatalf("successor: %+v", successor)
	}
	if after.Phase != workflows.PhaseReady || after.Role("worker").Ready != 3 {
		t.Errorf("after: phase %s (%s)", after.Phase, after.Message)
	}
	calls := fake.Calls()[len(beforeReplace):]
	// The successor is set up first, then the replaced member goes, then the survivors hear.
	if countCalls(calls, "configure c-worker-3") != 1 || countCalls(calls, "teardown c-worker-1") != 1 || countCalls(calls, "remove c-worker-1") != 1 {
		t.Errorf("want one configure, teardown and removal: %v", calls)
	}
	if indexOf(calls, "configure c-worker-3") > indexOf(calls, "teardown c-worker-1") {
		t.Errorf("the replaced member went before its successor was set up: %v", calls)
	}
	for _, survivor := range []string{"c-controller-0", "c-worker-0", "c-worker-2"} {
		if countCalls(calls, "addnodes "+survivor+" worker=[c-worker-3]") != 1 || countCalls(calls, "delnodes "+survivor+" worker=[c-worker-1]") != 1 {
			t.Errorf("%s was not told once of the successor and the replaced member: %v", survivor, calls)
		}
	}
	if indexOf(calls, "addnodes c-worker-3") >= 0 || indexOf(calls, "delnodes c-worker-3") >= 0 {
		t.Errorf("the successor was told about itself or the member it replaces: %v", calls)
	}
	if after.Generation != 2 || after.ReachedGeneration != 2 {
		t.Errorf("a replacement is a generation: %d reached %d", after.Generation, after.ReachedGeneration)
	}
}

func TestDownThenUpKeepsTheMember(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-1", workflows.HealthDown)
	signalAt(env, settled+2*time.Minute, "c-worker-1", workflows.HealthUp)
	var after workflows.ClusterStatus
	queryAt(t, env, settled+20*time.Minute, &after)
	runHealth(t, fake, 3, env)

	m := memberIn(after, "c-worker-1")
	if m == nil || m.State != workflows.MemberReady || memberIn(after, "c-worker-3") != nil || after.Phase != workflows.PhaseReady {
		t.Fatalf("after down and up: phase %s, workers %+v", after.Phase, after.Role("worker").Members)
	}
	if tr := m.Health.Transitions; len(tr) != 2 || tr[0].To != workflows.MemberDown || tr[1].To != workflows.MemberReady || tr[1].Source != "test" {
		t.Errorf("transitions %+v", tr)
	}
	if countCalls(fake.Calls(), "remove c-worker-1") != 0 {
		t.Errorf("removed: %v", fake.Calls())
	}
}

func TestGoneIsReplacedAtOnce(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-0", workflows.HealthGone)
	var after workflows.ClusterStatus
	queryAt(t, env, settled+30*time.Second, &after)
	runHealth(t, fake, 2, env)

	if memberIn(after, "c-worker-0") != nil || memberIn(after, "c-worker-2") == nil || memberIn(after, "c-worker-2").State != workflows.MemberReady {
		t.Fatalf("30s after gone: %+v", after.Role("worker").Members)
	}
	// Gone has nothing left to run a teardown script in.
	if calls := fake.Calls(); countCalls(calls, "teardown c-worker-0") != 0 || countCalls(calls, "remove c-worker-0") != 1 {
		t.Errorf("calls %v", calls)
	}
}

func TestFlappingMemberIsNotReplaced(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	// Three recoveries within the 30m flapWindow, more than flapLimit 2.
	for i := range 3 {
		signalAt(env, settled+time.Duration(i)*4*time.Minute, "c-worker-1", workflows.HealthDown)
		signalAt(env, settled+time.Duration(i)*4*time.Minute+time.Minute, "c-worker-1", workflows.HealthUp)
	}
	signalAt(env, settled+15*time.Minute, "c-worker-1", workflows.HealthDown)
	var flapping, stillUp, settledAgain workflows.ClusterStatus
	queryAt(t, env, settled+30*time.Minute, &flapping) // down 15 minutes, past replaceAfter
	signalAt(env, settled+31*time.Minute, "c-worker-1", workflows.HealthUp)
	queryAt(t, env, settled+60*time.Minute, &stillUp)
	queryAt(t, env, settled+62*time.Minute, &settledAgain)
	runHealth(t, fake, 3, env)

	m := memberIn(flapping, "c-worker-1")
	if m == nil || m.State != workflows.MemberFlapping || !strings.Contains(m.Detail, "came back up 3 times within 30m0s (flapLimit 2)") {
		t.Fatalf("want flapping with the reason: %+v", m)
	}
	if memberIn(flapping, "c-worker-3") != nil || countCalls(fake.Calls(), "remove c-worker-1") != 0 {
		t.Errorf("a flapping member was replaced: %v", fake.Calls())
	}
	if flapping.Phase != workflows.PhaseDegraded {
		t.Errorf("phase %s (%s)", flapping.Phase, flapping.Message)
	}
	if m := memberIn(stillUp, "c-worker-1"); m.State != workflows.MemberFlapping {
		t.Errorf("29m after coming up: %s, want still flapping", m.State)
	}
	if m := memberIn(settledAgain, "c-worker-1"); m.State != workflows.MemberReady || settledAgain.Phase != workflows.PhaseReady {
		t.Errorf("up a whole flapWindow: %s, phase %s; want ready", m.State, settledAgain.Phase)
	}
}

func TestMeltdownPausesReplacementUntilMembersRecover(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	// Four workers allow two unavailable (50%); three go down at once.
	for _, m := range []string{"c-worker-0", "c-worker-1", "c-worker-2"} {
		signalAt(env, settled, m, workflows.HealthDown)
	}
	var paused, recovered workflows.ClusterStatus
	queryAt(t, env, settled+20*time.Minute, &paused)
	signalAt(env, settled+21*time.Minute, "c-worker-2", workflows.HealthUp)
	queryAt(t, env, settled+22*time.Minute, &recovered)
	runHealth(t, fake, 4, env)

	if paused.Phase != workflows.PhasePaused || !strings.Contains(paused.Message, "3 of 4 members unavailable, more than maxUnavailable 50% allows (2)") || !strings.Contains(paused.Message, "clusterflow resume c") {
		t.Errorf("phase %s (%s), want paused with the reason", paused.Phase, paused.Message)
	}
	if n := len(paused.Role("worker").Members); n != 4 || paused.Role("worker").Paused == "" {
		t.Errorf("replaced during a meltdown: %+v", paused.Role("worker"))
	}
	// One recovers: two down is within the limit, and both are overdue, so both go.
	for _, gone := range []string{"c-worker-0", "c-worker-1"} {
		if memberIn(recovered, gone) != nil {
			t.Errorf("%s not replaced once the role recovered: %+v", gone, recovered.Role("worker").Members)
		}
	}
	if recovered.Phase != workflows.PhaseReady || recovered.Role("worker").Ready != 4 || memberIn(recovered, "c-worker-2").State != workflows.MemberReady {
		t.Errorf("recovered: phase %s (%s)", recovered.Phase, recovered.Message)
	}
}

func TestResumeReplacesDuringAMeltdown(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-0", workflows.HealthDown)
	signalAt(env, settled, "c-worker-1", workflows.HealthGone)
	early := updateAt(env, settled/2, workflows.ResumeUpdate)
	resume := updateAt(env, settled+10*time.Minute, workflows.ResumeUpdate)
	var paused, after workflows.ClusterStatus
	queryAt(t, env, settled+9*time.Minute, &paused)
	queryAt(t, env, settled+11*time.Minute, &after)
	runHealth(t, fake, 2, env)

	if early.refused == nil || !strings.Contains(early.refused.Error(), "nothing to resume") {
		t.Errorf("resume with nothing paused: %v", early.refused)
	}
	if paused.Phase != workflows.PhasePaused || memberIn(paused, "c-worker-1").State != workflows.MemberDown {
		t.Errorf("two of two unavailable: phase %s, c-worker-1 %s", paused.Phase, memberIn(paused, "c-worker-1").State)
	}
	if resumed, ok := resume.result.(workflows.ResumeResult); !ok || len(resumed.Roles) != 1 || resumed.Roles[0] != "worker" {
		t.Errorf("resume result %+v, refused %v", resume.result, resume.refused)
	}
	if memberIn(after, "c-worker-0") != nil || memberIn(after, "c-worker-1") != nil || after.Role("worker").Ready != 2 || after.Phase != workflows.PhaseReady {
		t.Errorf("after resume: phase %s, workers %+v", after.Phase, after.Role("worker").Members)
	}
}

func TestFailedSetupIsReplacedUpToMaxReplacements(t *testing.T) {
	fake := newFakeBackend()
	// Every worker but the first fails its configure.
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Member.Role == "worker" && run.Member.Name != "c-worker-0" && run.Event == "configure" {
			return runner.Result{Outcome: runner.Exited, ExitCode: 1, StderrTail: "no disk"}
		}
		return runner.Result{Outcome: runner.Exited}
	}
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	queryAt(t, env, settled, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, `
name: c
roles:
  - {name: worker, members: 2, startscript: s.sh, replaceOnConfigError: true, maxReplacements: 2}
  - {name: edge, members: 1, dependsOn: [worker], startscript: s.sh}
`)})
	calls := fake.Calls()
	for _, m := range []string{"c-worker-1", "c-worker-2", "c-worker-3"} {
		if countCalls(calls, "configure "+m) != 1 {
			t.Errorf("%s: want one configure: %v", m, calls)
		}
	}
	if indexOf(calls, "configure c-worker-4") >= 0 || indexOf(calls, "configure c-edge") >= 0 {
		t.Errorf("more than 2 replacements, or the next level ran: %v", calls)
	}
	last := memberIn(after, "c-worker-3")
	if after.Phase != workflows.PhaseFailed || last == nil || last.State != workflows.MemberConfigError || last.Replacements != 2 || last.Replaces != "c-worker-2" {
		t.Errorf("phase %s (%s), last %+v", after.Phase, after.Message, last)
	}
	if memberIn(after, "c-worker-1") != nil || countCalls(calls, "teardown c-worker-1") != 1 {
		t.Errorf("a replaced failed member is torn down and removed: %v", calls)
	}
}

func TestReconcileRemovesRoguesAndReplacesGoneMembers(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	env.RegisterDelayedCallback(func() {
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "worker", Name: "c-worker-7"}, true)
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "ghost", Name: "c-ghost-0"}, true)
		fake.setSandbox(backend.MemberRef{Cluster: "c", Role: "worker", Name: "c-worker-0"}, false)
	}, settled)
	var after workflows.ClusterStatus
	queryAt(t, env, settled+2*time.Minute, &after) // the default reconcile runs every minute
	runHealth(t, fake, 2, env)

	calls := fake.Calls()
	if countCalls(calls, "teardown c-worker-7") != 1 || countCalls(calls, "remove c-worker-7") != 1 || countCalls(calls, "remove c-ghost-0") != 1 {
		t.Errorf("rogues not torn down and removed once: %v", calls)
	}
	if countCalls(calls, "teardown c-ghost-0") != 0 {
		t.Errorf("a rogue of a role the cluster does not have has no script to run: %v", calls)
	}
	if memberIn(after, "c-worker-7") != nil || after.Role("ghost") != nil {
		t.Errorf("rogues still in status: %+v", after.Roles)
	}
	workers := after.Role("worker").Members
	if memberIn(after, "c-worker-0") != nil || len(workers) != 2 || workers[1].Replaces != "c-worker-0" || workers[1].State != workflows.MemberReady {
		t.Errorf("gone member not replaced: %+v", workers)
	}
	if indexOf(calls, "delnodes c-controller-0 worker=[c-worker-7]") >= 0 {
		t.Errorf("members were told about a rogue they never knew: %v", calls)
	}
	if after.Phase != workflows.PhaseReady {
		t.Errorf("phase %s (%s)", after.Phase, after.Message)
	}
}

// A listing taken while the workers were still being set up does not have them; by the
// time it comes back they are ready. Reconcile judges only the members set up before it
// listed, so it does not take them for gone (at 10,000 members, 519 were).
func TestReconcileDoesNotJudgeMembersSetUpWhileItListed(t *testing.T) {
	fake := newFakeBackend()
	fake.outcome = func(_ context.Context, run backend.ScriptRun) runner.Result {
		if run.Member.Role == "controller" && run.Event == spec.EventConfigure {
			time.Sleep(1500 * time.Millisecond) // so that the 1 s reconcile lists meanwhile
		}
		return runner.Result{Outcome: runner.Exited}
	}
	var once sync.Once
	var heldBack []string
	var heldUntilEdge bool
	fake.listed = func(members []backend.MemberRef) {
		once.Do(func() {
			for _, m := range members {
				heldBack = append(heldBack, m.Name)
			}
			// Hold the listing back until the edge level writes its files: the workers are
			// ready in the workflow's state by then.
			deadline := time.Now().Add(20 * time.Second)
			for fake.filesWritten() < 3 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			heldUntilEdge = fake.filesWritten() >= 3
		})
	}
	env := newEnv(t, fake)
	var after workflows.ClusterStatus
	queryAt(t, env, time.Minute, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, `
name: c
reconcileEvery: 1s
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: worker, members: 2, dependsOn: [controller], startscript: s.sh}
  - {name: edge, members: 1, dependsOn: [worker], startscript: s.sh}
`)})

	if !heldUntilEdge || slices.Contains(heldBack, "c-worker-0") {
		t.Fatalf("the race did not happen: the first listing held %v, held until the edge level: %v", heldBack, heldUntilEdge)
	}
	for _, name := range []string{"c-worker-0", "c-worker-1"} {
		if m := memberIn(after, name); m == nil || m.State != workflows.MemberReady || m.Health != nil {
			t.Errorf("%s was judged by a listing taken before it was set up: %+v", name, m)
		}
	}
	if after.Generation != 1 || after.Phase != workflows.PhaseReady {
		t.Errorf("generation %d, phase %s (%s); want the deploy's generation, ready", after.Generation, after.Phase, after.Message)
	}
}

func TestMemberEventRefusesUnknownMembersAndSignalsIgnoreThem(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	unknownMember := updateAt(env, settled, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-9", Event: workflows.HealthDown})
	unknownEvent := updateAt(env, settled, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-0", Event: "exploded"})
	signalAt(env, settled, "c-worker-9", workflows.HealthGone)
	up := updateAt(env, settled+time.Minute, workflows.MemberEventUpdate, workflows.MemberEvent{Member: "c-worker-0", Event: workflows.HealthUp})
	var after workflows.ClusterStatus
	queryAt(t, env, settled+2*time.Minute, &after)
	runHealth(t, fake, 2, env)

	if unknownMember.refused == nil || !strings.Contains(unknownMember.refused.Error(), `cluster c has no member "c-worker-9" (its members: c-controller-0, c-worker-0, c-worker-1)`) {
		t.Errorf("unknown member: refused %v, result %+v", unknownMember.refused, unknownMember.result)
	}
	if unknownEvent.refused == nil || !strings.Contains(unknownEvent.refused.Error(), `event "exploded" is not one of down, up, gone, unhealthy`) {
		t.Errorf("unknown event: refused %v, result %+v", unknownEvent.refused, unknownEvent.result)
	}
	if ignored, ok := up.result.(workflows.MemberEventResult); !ok || ignored.Ignored != "no transition from ready on up" || ignored.To != workflows.MemberReady {
		t.Errorf("up for a ready member should be ignored: %+v (refused %v)", up.result, up.refused)
	}
	if after.Phase != workflows.PhaseReady || after.Generation != 1 {
		t.Errorf("unknown members changed the cluster: phase %s generation %d", after.Phase, after.Generation)
	}
}

func TestApplyChangesTheHealthPolicyOfARunningRole(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	quicker := testSpec(t, strings.Replace(fmt.Sprintf(healthSpec, 2), "replaceAfter: 5m", "replaceAfter: 1m", 1))
	apply := updateAt(env, settled, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: quicker})
	signalAt(env, settled+time.Minute, "c-worker-0", workflows.HealthDown)
	var after workflows.ClusterStatus
	queryAt(t, env, settled+3*time.Minute, &after)
	runHealth(t, fake, 2, env)

	if result, ok := apply.result.(workflows.ChangeResult); !ok || !result.Changed || result.Summary != "worker settings" {
		t.Errorf("apply result %+v, refused %v", apply.result, apply.refused)
	}
	if memberIn(after, "c-worker-0") != nil {
		t.Errorf("not replaced 2m after down with replaceAfter 1m: %+v", after.Role("worker").Members)
	}
}

// Periodic reconciles continue the workflow as new before its history grows large, and
// the next run carries every member's health, timers included.
func TestReconcilesContinueAsNewCarryingHealth(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, 10*time.Minute, "c-worker-1", workflows.HealthDown)
	yaml := strings.Replace(fmt.Sprintf(healthSpec, 2), "roles:", "reconcileEvery: 10s\nroles:", 1)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, strings.Replace(yaml, "replaceAfter: 5m", "replaceAfter: 5h", 1))})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after 300 reconciles (50 minutes), got %v", err)
	}
	var next workflows.ClusterInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	var m *workflows.Member
	for _, r := range next.Carried.State.Roles {
		for i := range r.Members {
			if r.Members[i].Name == "c-worker-1" {
				m = &r.Members[i]
			}
		}
	}
	if m == nil || m.State != workflows.MemberDown || m.Health == nil || m.Health.Due.IsZero() || len(m.Health.Transitions) != 1 {
		t.Errorf("carried member %+v, health %+v", m, m.Health)
	}
}

// A replacement and a resize of the same role at the same moment create and remove each
// member once: both are the one convergence's business.
func TestReplacementAndResizeTogetherNeitherDoubleCreateNorDoubleDelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members int
		gone    string
		want    []string
		created []string
	}{
		{"grow", 4, "c-worker-1", []string{"c-worker-0", "c-worker-2", "c-worker-3<c-worker-1", "c-worker-4"}, []string{"c-worker-3", "c-worker-4"}},
		{"shrink away the gone member", 2, "c-worker-2", []string{"c-worker-0", "c-worker-1"}, nil},
		{"shrink another", 1, "c-worker-0", []string{"c-worker-1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeBackend()
			env := newEnv(t, fake)
			var deployed []string
			env.RegisterDelayedCallback(func() {
				deployed = fake.Calls()
				env.SignalWorkflow(workflows.MemberEventSignal, workflows.MemberEvent{Member: tc.gone, Event: workflows.HealthGone})
			}, settled)
			resizeAt(t, env, settled, workflows.RoleCount{Role: "worker", Members: tc.members})
			var after workflows.ClusterStatus
			queryAt(t, env, settled+10*time.Minute, &after)
			runHealth(t, fake, 3, env)

			var got []string
			for _, m := range after.Role("worker").Members {
				name := m.Name
				if m.Replaces != "" {
					name += "<" + m.Replaces
				}
				got = append(got, name)
				if m.State != workflows.MemberReady {
					t.Errorf("%s is %s", m.Name, m.State)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("workers %v, want %v", got, tc.want)
			}
			calls := fake.Calls()[len(deployed):]
			var created []string
			for _, c := range calls {
				if name, ok := strings.CutPrefix(c, "configure "); ok {
					created = append(created, name)
				}
			}
			slices.Sort(created) // members of a role are set up at once
			if !slices.Equal(created, tc.created) {
				t.Errorf("configured %v, want %v: %v", created, tc.created, calls)
			}
			if countCalls(calls, "remove "+tc.gone) != 1 {
				t.Errorf("%s removed %d times: %v", tc.gone, countCalls(calls, "remove "+tc.gone), calls)
			}
		})
	}
}

// A shrink removes members that are down before healthy ones, whatever their ordinals.
func TestShrinkRemovesDownMembersFirst(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	signalAt(env, settled, "c-worker-0", workflows.HealthDown)
	resizeAt(t, env, settled+time.Minute, workflows.RoleCount{Role: "worker", Members: 2})
	var after workflows.ClusterStatus
	queryAt(t, env, settled+2*time.Minute, &after)
	runHealth(t, fake, 3, env)

	if got := memberNames(after); !slices.Equal(got, []string{"c-controller-0=ready", "c-worker-1=ready", "c-worker-2=ready"}) {
		t.Errorf("members %v, want c-worker-0 (down) removed", got)
	}
	if after.Phase != workflows.PhaseReady {
		t.Errorf("phase %s (%s)", after.Phase, after.Message)
	}
}

// A member's own check reaches the history only when it changes something: the update's
// validator refuses, with nothing recorded, a check from a host that does not hold the
// member and one that would change nothing; a taken one keeps the check with the member.
func TestAProbeReportIsRefusedWhenStaleOrChangingNothing(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	check := func(host string, passed bool) *spec.ProbeCheck {
		return &spec.ProbeCheck{Host: host, At: time.Unix(1, 0), Passed: passed, Result: "exited with status 1", Output: "refused", InARow: 3}
	}
	probe := func(event workflows.HealthEvent, host string) workflows.MemberEvent {
		return workflows.MemberEvent{Member: "c-worker-0", Event: event, Source: workflows.ProbeSource, Reason: "check", Check: check(host, event == workflows.HealthUp)}
	}
	otherHost := updateAt(env, settled, workflows.MemberEventUpdate, probe(workflows.HealthDown, "elsewhere"))
	upWhileReady := updateAt(env, settled, workflows.MemberEventUpdate, probe(workflows.HealthUp, ""))
	down := updateAt(env, settled+time.Minute, workflows.MemberEventUpdate, probe(workflows.HealthDown, ""))
	downAgain := updateAt(env, settled+2*time.Minute, workflows.MemberEventUpdate, probe(workflows.HealthDown, ""))
	tooLong := probe(workflows.HealthDown, "")
	tooLong.Check.Output = strings.Repeat("x", spec.MaxCheckOutput+1)
	long := updateAt(env, settled+2*time.Minute, workflows.MemberEventUpdate, tooLong)
	var after workflows.ClusterStatus
	queryAt(t, env, settled+3*time.Minute, &after)
	runHealth(t, fake, 2, env)

	for what, o := range map[string]struct {
		got  *outcome
		want string
	}{
		"a check from another host":    {otherHost, `member c-worker-0 is on host "", not "elsewhere", which checked it`},
		"an up for a ready member":     {upWhileReady, "member c-worker-0 is ready, which a check's up does not change"},
		"a down for a down member":     {downAgain, "member c-worker-0 is down, which a check's down does not change"},
		"a check with too long output": {long, "check.output: is 513 bytes; at most 512"},
	} {
		if o.got.refused == nil || !strings.Contains(o.got.refused.Error(), o.want) {
			t.Errorf("%s: refused %v (result %+v), want %q", what, o.got.refused, o.got.result, o.want)
		}
	}
	if r, ok := down.result.(workflows.MemberEventResult); !ok || r.To != workflows.MemberDown {
		t.Errorf("a failing check of a ready member: %+v (refused %v)", down.result, down.refused)
	}
	m := memberIn(after, "c-worker-0")
	if m == nil || m.Health == nil || m.Health.LastCheck == nil || m.Health.LastCheck.InARow != 3 || len(m.Health.Transitions) != 1 {
		t.Fatalf("the member after one taken check: %+v", m)
	}
}

// TestABurstOfDownsRechecksABoundedNumberOfMembersAtOnce: an alert that takes every member
// of a checked role down asks their hosts to count their checks afresh, but never more at
// once than health.RechecksAtOnce, whatever the number of members: the workflow's pending
// activities stay under Temporal's 2,000. The members past the bound stay down.
func TestABurstOfDownsRechecksABoundedNumberOfMembersAtOnce(t *testing.T) {
	const members = health.RechecksAtOnce + 50
	fake := newFakeBackend()
	env := newEnv(t, fake)
	var mu sync.Mutex
	var running, most, asked int
	recheck := func(ctx context.Context, m backend.MemberRef) error {
		mu.Lock()
		running++
		asked++
		most = max(most, running)
		mu.Unlock()
		// Each recheck is held until every member's down has arrived, or 3 s passed.
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			all := asked >= members
			mu.Unlock()
			if all {
				break
			}
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}
	env.RegisterActivityWithOptions(recheck, activity.RegisterOptions{Name: "RecheckMember", DisableAlreadyRegisteredCheck: true})
	for i := range members {
		signalAt(env, settled, fmt.Sprintf("c-db-%d", i), workflows.HealthDown)
	}
	var after workflows.ClusterStatus
	queryAt(t, env, settled+time.Minute, &after)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, fmt.Sprintf(`
name: c
roles:
  - {name: db, members: %d, maxInFlight: 500, startscript: s.sh, events: [configure, addnodes, delnodes, teardown, check], replaceAfter: 24h}
`, members))})

	if most > health.RechecksAtOnce || asked < health.RechecksAtOnce {
		t.Errorf("%d members down at once: %d rechecks asked, at most %d at once; want %d at once at most, and that many asked",
			members, asked, most, health.RechecksAtOnce)
	}
	if down := after.Role("db").States[workflows.MemberDown]; down != members {
		t.Errorf("%d of %d members down after the burst; want all", down, members)
	}
}
