package workflows_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/payloadlimit"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// payloadWatch records what the workflows send: the largest payload they encode (inputs,
// results, signals, updates' answers, queries' answers), and the most bytes one workflow
// sends in one burst of commands: those it issues between two events the test environment
// delivers (an activity or child that ended, a child that started, a timer), which is at
// most what one workflow task carries on a real server, where a task may take several
// events at once.
type payloadWatch struct {
	converter.DataConverter
	mu                    sync.Mutex
	largest, largestBurst int
	what, burstOf         string
	// byType is the largest payload of each type encoded.
	byType map[string]int
	step   int
	bursts map[string]int
}

func watchPayloads(env *testsuite.TestWorkflowEnvironment) *payloadWatch {
	w := &payloadWatch{DataConverter: converter.GetDefaultDataConverter(), bursts: map[string]int{}, byType: map[string]int{}}
	env.SetDataConverter(w)
	opts := testWorkerOptions
	opts.Interceptors = []interceptor.WorkerInterceptor{&watchInterceptor{w: w}}
	env.SetWorkerOptions(opts)
	next := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.step++
	}
	env.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) { next() })
	env.SetOnChildWorkflowStartedListener(func(*workflow.Info, workflow.Context, converter.EncodedValues) { next() })
	env.SetOnChildWorkflowCompletedListener(func(*workflow.Info, converter.EncodedValue, error) { next() })
	env.SetOnTimerFiredListener(func(string) { next() })
	return w
}

func (w *payloadWatch) seen(p *commonpb.Payloads, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	size := p.Size()
	if size > w.largest {
		w.largest, w.what = size, what
	}
	w.byType[what] = max(w.byType[what], size)
}

func (w *payloadWatch) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := w.DataConverter.ToPayload(v)
	if err == nil {
		w.seen(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}}, fmt.Sprintf("%T", v))
	}
	return p, err
}

func (w *payloadWatch) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	p, err := w.DataConverter.ToPayloads(values...)
	if err == nil && len(values) > 0 {
		w.seen(p, fmt.Sprintf("%T", values[0]))
	}
	return p, err
}

// sent counts a command's payload in its workflow's current burst.
func (w *payloadWatch) sent(ctx workflow.Context, what string, args ...any) {
	p, err := w.DataConverter.ToPayloads(args...)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := fmt.Sprintf("%s@%d", workflow.GetInfo(ctx).WorkflowExecution.ID, w.step)
	w.bursts[key] += p.Size()
	if w.bursts[key] > w.largestBurst {
		w.largestBurst, w.burstOf = w.bursts[key], key+" "+what
	}
}

type watchInterceptor struct {
	interceptor.WorkerInterceptorBase
	w *payloadWatch
}

func (i *watchInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &watchInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, w: i.w}
}

type watchInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	w *payloadWatch
}

func (in *watchInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return in.Next.Init(&watchOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, w: in.w})
}

type watchOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	w *payloadWatch
}

func (o *watchOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.w.sent(ctx, activityType, args...)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *watchOutbound) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	o.w.sent(ctx, childType, args...)
	return o.Next.ExecuteChildWorkflow(ctx, childType, args...)
}

func (o *watchOutbound) SignalExternalWorkflow(ctx workflow.Context, workflowID, runID, signalName string, arg any) workflow.Future {
	o.w.sent(ctx, signalName, arg)
	return o.Next.SignalExternalWorkflow(ctx, workflowID, runID, signalName, arg)
}

func (o *watchOutbound) SignalChildWorkflow(ctx workflow.Context, workflowID, signalName string, arg any) workflow.Future {
	o.w.sent(ctx, signalName, arg)
	return o.Next.SignalChildWorkflow(ctx, workflowID, signalName, arg)
}

// What one member was told, from the fake's calls: "addnodes NAME role=[...]".
func toldOnce(t *testing.T, calls []string, event, nodes string, members []string) {
	t.Helper()
	got := map[string]int{}
	for _, c := range calls {
		if rest, ok := strings.CutPrefix(c, event+" "); ok {
			got[rest]++
		}
	}
	wrong := 0
	for _, m := range members {
		if n := got[m+" "+nodes]; n != 1 {
			if wrong++; wrong <= 3 {
				t.Errorf("%s ran %s about %s %d times, want once", m, event, nodes, n)
			}
		}
	}
	told := 0
	for call, n := range got {
		if strings.Contains(call, " ") {
			told += n
		}
	}
	if told != len(members) {
		t.Errorf("%d %s runs, want %d, one per survivor", told, event, len(members))
	}
}

// The bounds of the size matrix, kept in the workflow tests: 10,000 members with a role
// name of 63 characters and a 32 KiB env, grown by 1,000 and shrunk by 1,000. Every
// survivor hears of exactly the members it did not know, once; no payload and no burst of
// commands of one workflow comes near Temporal's limits (2 MiB and 4 MiB). Before notices
// the addnodes of 10,000 members each told of 1,000 others sent one list per member.
func TestPayloadsStayBoundedAtTenThousandMembers(t *testing.T) {
	withoutRace(t)
	role := strings.Repeat("w", 63)
	fake := newFakeBackend()
	env := newEnv(t, fake)
	env.SetTestTimeout(4 * time.Minute)
	watch := watchPayloads(env)
	const workers = 9999
	resizeAt(t, env, time.Hour, workflows.RoleCount{Role: role, Members: workers + 1000})
	resizeAt(t, env, 2*time.Hour, workflows.RoleCount{Role: role, Members: workers})
	var after workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { after = query(t, env) }, 3*time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, fmt.Sprintf(`
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: %s, members: %d, maxInFlight: 500, dependsOn: [controller], startscript: s.sh, ports: {client: 2379, peer: 2380}, env: {CERT: %s}}
`, role, workers, strings.Repeat("x", 32<<10-20)))})

	if after.Phase != workflows.PhaseReady || after.Role(role).Ready != workers || after.Generation != 3 {
		t.Fatalf("phase %s (%s), %d workers ready, generation %d", after.Phase, after.Message, after.Role(role).Ready, after.Generation)
	}
	survivors := []string{"c-controller-0"}
	for i := range workers {
		survivors = append(survivors, fmt.Sprintf("c-%s-%d", role, i))
	}
	added := fmt.Sprintf("%s=[c-%s-%d … c-%s-%d](1000)", role, role, workers, role, workers+999)
	// Every member was given its ports, a bounded number of members an activity.
	if m := after.Role(role).Members[0]; len(m.Ports) != 2 {
		t.Errorf("%s has ports %v, want its two", m.Name, m.Ports)
	}
	calls := fake.Calls()
	toldOnce(t, calls, "addnodes", added, survivors)
	toldOnce(t, calls, "delnodes", added, survivors)

	t.Logf("largest payload %d bytes (%s); largest burst %d bytes (%s); by type %v", watch.largest, watch.what, watch.largestBurst, watch.burstOf, watch.byType)
	// The status query's answer is the largest by design: its page of members is cut at
	// 1 MiB. Everything else the workflows send stays far below.
	if watch.largest > 1100<<10 {
		t.Errorf("largest payload %d bytes (%s), want at most 1.1 MiB", watch.largest, watch.what)
	}
	for what, size := range watch.byType {
		if what != "workflows.ClusterStatus" && size > 512<<10 {
			t.Errorf("largest %s is %d bytes, want at most 512 KiB", what, size)
		}
	}
	if watch.largestBurst > 1536<<10 {
		t.Errorf("largest burst of commands %d bytes (%s), want at most 1.5 MiB", watch.largestBurst, watch.burstOf)
	}
}

// refusingCommands refuses, past its guarded converter's limit, the inputs of the commands
// that carry members (a role child's input, the cluster's files), and no other payload:
// the test's limit is far below what the bounded status and results are cut to.
type refusingCommands struct {
	converter.DataConverter
	guarded converter.DataConverter
}

func (r refusingCommands) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	if len(values) == 1 {
		switch values[0].(type) {
		case workflows.RoleInput, backend.ClusterFiles:
			return r.guarded.ToPayloads(values...)
		}
	}
	return r.DataConverter.ToPayloads(values...)
}

// A payload past the limit fails its operation, saying why, rather than wedging the
// workflow (Temporal fails the task that carries it, again and again) or passing for done.
// The limit is lowered so that, of a deploy of 150 members, the configmeta write fits and
// the role child's input does not (then, lower still, neither does the write). The cluster
// ends failed, its members say why, nothing ran, and it still takes a delete.
func TestAPayloadPastTheLimitFailsTheOperationLoudly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		want  string
	}{
		{"the role child's input", 20 << 10, "role worker failed: 150 of 150 members in config_error"},
		{"the cluster's files", 8 << 10, "could not write the cluster's files: payload of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeBackend()
			env := newEnv(t, fake)
			env.SetDataConverter(refusingCommands{
				DataConverter: converter.GetDefaultDataConverter(),
				guarded:       payloadlimit.Converter(converter.GetDefaultDataConverter(), tc.limit),
			})
			var failed workflows.ClusterStatus
			env.RegisterDelayedCallback(func() { failed = query(t, env) }, time.Hour)
			final := deployThenDeleteSpec(t, env, "name: c\nroles:\n  - {name: worker, members: 150, startscript: s.sh}\n", 2*time.Hour)
			if failed.Phase != workflows.PhaseFailed || !strings.Contains(failed.Message, tc.want) {
				t.Fatalf("phase %s (%s), want failed saying %q", failed.Phase, failed.Message, tc.want)
			}
			for _, m := range failed.Role("worker").Members {
				if m.State == workflows.MemberReady {
					t.Errorf("%s is ready", m.Name)
				}
				if tc.name == "the role child's input" && (m.State != workflows.MemberConfigError || !strings.Contains(m.Detail, fmt.Sprintf("passes the limit of %d KiB", tc.limit>>10))) {
					t.Errorf("%s: %s (%s), want config_error saying the payload passes the limit", m.Name, m.State, m.Detail)
				}
			}
			if n := countCalls(fake.Calls(), "configure "); n != 0 {
				t.Errorf("%d configures ran", n)
			}
			if final.Phase != workflows.PhaseDeleted {
				t.Errorf("after the delete: %s", final.Phase)
			}
		})
	}
}

// A run whose history has grown starts afresh before its next large step: a delete that
// arrives while the deploy runs, with continue-as-new due after it, is carried to the next
// run, which deletes the cluster; the first run tears nothing down.
func TestADueContinueAsNewComesBeforeADelete(t *testing.T) {
	fake := newFakeBackend()
	fake.delay = 10 * time.Millisecond // the delete arrives while the deploy runs
	env := newEnv(t, fake)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.DeleteUpdate, "delete", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("delete refused: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		})
	}, time.Millisecond)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: testSpec(t, threeLevels), ContinueAsNewEvery: 1})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after the stopped deploy, got %v", err)
	}
	var next workflows.ClusterInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Carried == nil || !next.Carried.Deleting {
		t.Fatalf("the delete was not handed over: %+v", next.Carried)
	}
	if calls := fake.Calls(); indexOf(calls, "teardown") >= 0 || indexOf(calls, "remove") >= 0 {
		t.Errorf("the first run began the delete: %v", calls)
	}
	env = newEnv(t, fake)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, next)
	var final workflows.ClusterStatus
	if err := env.GetWorkflowResult(&final); err != nil {
		t.Fatal(err)
	}
	if final.Phase != workflows.PhaseDeleted {
		t.Errorf("the next run ended %s (%s), want deleted", final.Phase, final.Message)
	}
	if n := len(fake.members); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
}

// Cluster files go to every host at once, and a first write to a host carries the
// startscripts: with eight hosts and 900 KB of scripts, the writes one workflow task
// schedules must still stay far under Temporal's 4 MiB (all eight at once would be 7 MB).
func TestFilesToManyHostsStayUnderTheTaskLimit(t *testing.T) {
	fake := newFakeBackend()
	env := newEnv(t, fake)
	w := watchPayloads(env)
	env.OnSignalExternalWorkflow(mock.Anything, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, mock.Anything).Return(nil)
	big := "#!/bin/sh\n# " + strings.Repeat("x", 900<<10) + "\n"
	c, err := spec.Parse([]byte("name: c\nroles:\n  - {name: w, members: 8, startscript: s.sh, placement: {maxPerHost: 1}}\n"), "test.yaml",
		func(string) ([]byte, error) { return []byte(big), nil })
	if err != nil {
		t.Fatal(err)
	}
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Hosts: readyHosts("h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8"), Spec: c})
	if s := query(t, env); s.Phase != workflows.PhaseReady {
		t.Fatalf("phase %s (%s), want ready", s.Phase, s.Message)
	}
	if w.largestBurst > 2<<20 {
		t.Errorf("one burst of commands sent %d bytes (%s), want at most 2 MiB", w.largestBurst, w.burstOf)
	}
}

// TestARolloutStaysBoundedAtTenThousandMembers rolls a new revision out in place to a role
// of 10,000 members with the longest role name and a certificate-sized env, half of them
// at once after the canary: each member upgrades once, and nothing the workflows send comes
// near Temporal's limits.
func TestARolloutStaysBoundedAtTenThousandMembers(t *testing.T) {
	withoutRace(t)
	role := strings.Repeat("w", 63)
	fake := newFakeBackend()
	env := newEnv(t, fake)
	env.SetTestTimeout(4 * time.Minute)
	watch := watchPayloads(env)
	const workers = 10000
	specFor := func(version string) spec.Cluster {
		return testSpec(t, fmt.Sprintf(`
name: c
roles:
  - {name: controller, cardinality: "1", startscript: s.sh}
  - {name: %s, members: %d, maxInFlight: 500, dependsOn: [controller], startscript: s.sh, events: [configure, addnodes, delnodes, teardown, upgrade], heartbeatTimeout: 24h,
     update: {canaries: 1, maxInFlight: "50%%", watch: 0s}, env: {CERT: %s, VERSION: "%s"}}
`, role, workers, strings.Repeat("x", 32<<10-40), version))
	}
	// The test environment's clock skips ahead to the next timer while the fake's activities
	// wait for a busy machine's CPU: a day's heartbeat timeout keeps that from failing them.
	updateAt(env, time.Hour, workflows.ApplyUpdate, workflows.ApplyRequest{Spec: specFor("2")})
	var after workflows.ClusterStatus
	env.RegisterDelayedCallback(func() { after = query(t, env) }, 3*time.Hour)
	env.ExecuteWorkflow(workflows.ClusterWorkflowName, workflows.ClusterInput{Spec: specFor("1")})

	if after.Phase != workflows.PhaseReady || after.Revision != 2 || after.Rollout == nil || after.Rollout.State != workflows.RolloutDone {
		t.Fatalf("phase %s (%s), revision %d, rollout %+v; workflow error %v", after.Phase, after.Message, after.Revision, after.Rollout, env.GetWorkflowError())
	}
	upgraded := map[string]int{}
	for _, c := range fake.Calls() {
		if name, ok := strings.CutPrefix(c, "upgrade "); ok {
			upgraded[name]++
		}
	}
	for i := range workers {
		if name := fmt.Sprintf("c-%s-%d", role, i); upgraded[name] != 1 {
			t.Fatalf("%s upgraded %d times", name, upgraded[name])
		}
	}
	if len(upgraded) != workers {
		t.Errorf("%d members upgraded, want %d", len(upgraded), workers)
	}
	t.Logf("largest payload %d bytes (%s); largest burst %d bytes (%s)", watch.largest, watch.what, watch.largestBurst, watch.burstOf)
	for what, size := range watch.byType {
		if what != "workflows.ClusterStatus" && size > 512<<10 {
			t.Errorf("largest %s is %d bytes, want at most 512 KiB", what, size)
		}
	}
	if watch.largestBurst > 1536<<10 {
		t.Errorf("largest burst of commands %d bytes (%s), want at most 1.5 MiB", watch.largestBurst, watch.burstOf)
	}
}
