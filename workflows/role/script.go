package role

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/internal/metric"
)

// runScript runs one event's startscript on a member, through its host's agent, and
// stops it at once when the member's operation is cancelled.
func (r *roleWorkflow) runScript(ctx workflow.Context, i int, event spec.Event) (backend.ScriptResult, error) {
	m := r.members[i]
	run := backend.ScriptRun{
		Member:     r.ref(i),
		Event:      event,
		ScriptHash: r.in.Role.ScriptHash,
		EnvHash:    r.in.EnvHash,
		Env:        r.in.Role.Env,
		Timeout:    r.in.Role.Timeout,
		Revision:   r.in.Revision,
		Limits:     r.in.Role.Limits,
	}
	if event == spec.EventUpgrade {
		run.FromRevision = max(m.Revision, 1)
	}
	run.Ports = m.Ports
	if len(spec.ContainerFields(r.in.Role.Container)) > 0 {
		container := r.in.Role.Container
		run.Container = &container
	}
	switch event {
	case spec.EventConfigure:
		run.Joining, run.Replaces, run.Bootstrap = m.Joining, m.Replaces, m.Bootstrap
	case spec.EventTeardown, spec.EventDecommission:
		run.Reason = m.RemovedFor
	}
	// A member leaving is no longer checked; any other run says how to check it once it
	// succeeds. No history of before probes has a role listing check.
	if r.in.Role.Wants(spec.EventCheck) && event != spec.EventTeardown && event != spec.EventDecommission {
		probe := r.in.Role.Probe.WithDefaults()
		run.Probe = &probe
	}
	if a := r.in.Action; a != nil {
		run.Action, run.Params = a.Name, a.Params
	}
	if event.Notifies() {
		switch {
		case r.in.Notice != nil:
			knows := m.Knowledge()
			run.Notice, run.NodesRole, run.Knows = r.in.Notice.ID, r.in.Notice.Role, &knows
		case r.in.Nodes != nil:
			run.NodesRole, run.Nodes = r.in.Nodes.Role, r.nodesFor(i)
		}
	}
	var res backend.ScriptResult
	began := workflow.Now(ctx)
	f := workflow.ExecuteActivity(flow.OnMemberHost(flow.WithScriptActivity(ctx, r.in.Role, event, m.Name), m.Host), flow.ActRunStartscript, run)
	if workflow.GetVersion(ctx, change.StopScriptsAtOnce, workflow.DefaultVersion, 1) >= 1 {
		if abandoned := r.stopWhenCanceled(ctx, f, backend.ScriptStop{Member: run.Member, Event: event, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID}, m.Host); abandoned {
			metric.Script(ctx, r.in.Cluster, r.in.Role.Name, event, "abandoned", began)
			return res, ctx.Err()
		}
	}
	err := f.Get(ctx, &res)
	metric.Script(ctx, r.in.Cluster, r.in.Role.Name, event, metric.ScriptResult(res, err), began)
	return res, err
}

// stopWhenCanceled waits for the run, and if the member's operation is cancelled first (a
// delete, a cancel, a member no longer wanted or set up elsewhere), asks the member's host
// to stop the script at once: its agent hears of the cancel otherwise only at its next
// heartbeat, a third of the role's heartbeat timeout later. The run then reports its
// cancellation, which the caller waits for. A run on a lost host is abandoned instead
// (true): nothing there can stop it or report, and waiting for its heartbeat timeout would
// hold the whole operation; its sandbox goes once the host is back.
func (r *roleWorkflow) stopWhenCanceled(ctx workflow.Context, run workflow.Future, stop backend.ScriptStop, host string) (abandoned bool) {
	canceled := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(run, func(workflow.Future) {})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { canceled = true })
	sel.Select(ctx)
	if !canceled {
		return false
	}
	if r.hostLost[stop.Member.Name] {
		return true
	}
	stopCtx, _ := workflow.NewDisconnectedContext(ctx)
	stopCtx = workflow.WithActivityOptions(stopCtx, workflow.ActivityOptions{
		// A lost host cannot stop anything: its run's heartbeat timeout ends it.
		ScheduleToStartTimeout: stopScriptWait,
		StartToCloseTimeout:    stopScriptWait,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                fmt.Sprintf("stop %s %s", stop.Event, stop.Member.Name),
	})
	workflow.ExecuteActivity(flow.OnHost(stopCtx, host, stopScriptWait), flow.ActStopScript, stop) // not waited for: the run's end is
	return false
}

// stopScriptWait bounds a stop's wait for the member's host.
const stopScriptWait = 10 * time.Second
