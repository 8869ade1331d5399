// Package metric counts what the workflows do, for the worker's Prometheus metrics
// (clusterflow worker --metrics-address). It reports through the SDK's workflow metrics
// handler, which records nothing while a workflow replays: each count is made once, when
// its step first runs, however often the history is replayed afterwards. Recording is not
// a command, so counting changes no history. The names and labels are the operator
// guide's metrics table; deploy/prometheus and deploy/grafana use them.
package metric

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The metrics' names, as Prometheus shows them. A timer is a histogram in seconds
// (_bucket, _sum, _count): its count is the number of what it times.
const (
	OperationSeconds   = "clusterflow_operation_seconds"
	ScriptSeconds      = "clusterflow_script_seconds"
	MemberTransitions  = "clusterflow_member_transitions_total"
	MemberReplacements = "clusterflow_member_replacements_total"
)

// The kinds of an operation (a pass toward the desired state, or a delete).
const (
	KindDeploy = "deploy"
	KindUpdate = "update"
	KindDelete = "delete"
)

// Operation records one pass of a cluster's operation loop: its kind, how it ended
// (ok, failed, paused, held, canceled, superseded) and how long it took on the workflow's
// clock.
func Operation(ctx workflow.Context, cluster, kind, result string, began time.Time) {
	workflow.GetMetricsHandler(ctx).
		WithTags(map[string]string{"cluster": cluster, "kind": kind, "result": result}).
		Timer(OperationSeconds).Record(workflow.Now(ctx).Sub(began))
}

// PassResult names how a pass ended, as Operation records it.
func PassResult(end plan.Ending, held bool) string {
	switch end {
	case plan.Settled:
		return "ok"
	case plan.Failed:
		return "failed"
	case plan.RolloutPaused:
		return "paused"
	case plan.Again:
		return "superseded"
	}
	if held {
		return "held"
	}
	return "canceled"
}

// DeleteResult names how a delete ended: ok, or leftovers when something could not be
// removed (the phase's message names it).
func DeleteResult(leftovers string) string {
	if leftovers != "" {
		return "leftovers"
	}
	return "ok"
}

// Script records one startscript run on a member: its event, how it ended (ScriptResult)
// and how long the workflow waited for it.
func Script(ctx workflow.Context, cluster, role string, event spec.Event, result string, began time.Time) {
	workflow.GetMetricsHandler(ctx).
		WithTags(map[string]string{"cluster": cluster, "role": role, "event": string(event), "result": result}).
		Timer(ScriptSeconds).Record(workflow.Now(ctx).Sub(began))
}

// ScriptResult names how a run ended: ok, failed (non-zero exit), timed_out, not_ready
// (its check never passed), canceled, refused (its host would not run it) or error
// (nothing could run it: the agent, the host). A run on a lost host that its operation
// stopped waiting for is recorded as abandoned.
func ScriptResult(res backend.ScriptResult, err error) string {
	switch {
	case err == nil && res.Outcome == backend.NotReady:
		return "not_ready"
	case err == nil:
		return "ok"
	case flow.IsCanceled(err):
		return "canceled"
	case flow.HasErrorType(err, backend.ErrScriptFailed):
		return "failed"
	case flow.HasErrorType(err, backend.ErrScriptTimedOut):
		return "timed_out"
	case flow.RefusedBeforeLaunch(err):
		return "refused"
	}
	return "error"
}

// Transition records a member's health moving from one state to another on an event. A
// report of the member's own check (its probe) is told apart from every other source
// (an operator, Alertmanager, the hosts' leases, clusterflow's timers), whose names are
// free text and would make a label without bound.
func Transition(ctx workflow.Context, cluster, role string, from, to plan.MemberState, event plan.HealthEvent, source string) {
	reporter := "other"
	if source == workflows.ProbeSource {
		reporter = "probe"
	}
	workflow.GetMetricsHandler(ctx).
		WithTags(map[string]string{"cluster": cluster, "role": role, "from": string(from), "to": string(to), "event": string(event), "reporter": reporter}).
		Counter(MemberTransitions).Inc(1)
}

// Replacement records a member's replacement starting, on the event that caused it.
func Replacement(ctx workflow.Context, cluster, role string, event plan.HealthEvent) {
	workflow.GetMetricsHandler(ctx).
		WithTags(map[string]string{"cluster": cluster, "role": role, "event": string(event)}).
		Counter(MemberReplacements).Inc(1)
}
