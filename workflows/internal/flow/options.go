package flow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/payloadlimit"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

const (
	// scriptStopAllowance covers a cancelled or timed-out script's grace period on top of
	// its own timeout.
	scriptStopAllowance = 2 * time.Minute
)

// ExecuteActivity is workflow.ExecuteActivity for an input that may be large (the cluster's
// files). The SDK panics when it cannot encode an activity's input, and clusterflow's data
// converter refuses one past the payload limit (internal/payloadlimit): the panic would
// fail the workflow task again and again. Here it fails the activity instead, so the
// operation fails, saying why.
func ExecuteActivity(ctx workflow.Context, activity any, args ...any) (f workflow.Future) {
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok || !payloadlimit.IsTooLarge(err) {
				panic(r)
			}
			future, settable := workflow.NewFuture(ctx)
			settable.SetError(temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrPayloadTooLarge, nil))
			f = future
		}
	}()
	return workflow.ExecuteActivity(ctx, activity, args...)
}

// WithQuickActivity suits short backend calls: retried a few times, then reported.
func WithQuickActivity(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    5,
		},
		Summary: summary,
	})
}

// WithScriptActivity suits one startscript run. The member's agent heartbeats it, so a lost
// agent or member is noticed within the heartbeat timeout; a retry then re-attaches to the
// run if it is still there. It waits for a cancelled script to be stopped.
func WithScriptActivity(ctx workflow.Context, role spec.Role, event spec.Event, member string) workflow.Context {
	heartbeatTimeout := role.HeartbeatTimeout
	if heartbeatTimeout == 0 {
		heartbeatTimeout = spec.DefaultHeartbeatTimeout
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: role.Timeout + role.ReadyWait(event) + scriptStopAllowance,
		HeartbeatTimeout:    heartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{backend.ErrScriptFailed, backend.ErrScriptTimedOut},
		},
		Summary: fmt.Sprintf("%s %s", event, member),
	})
}
