package hosts

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// startLease keeps the host's lease in a goroutine of its own, once per host.
func (r *hostsRegistry) startLease(ctx workflow.Context, name string) {
	if r.leases[name] != nil {
		return
	}
	leaseCtx, cancel := workflow.WithCancel(ctx)
	r.leases[name] = cancel
	workflow.Go(leaseCtx, func(ctx workflow.Context) { r.keepLease(ctx, name) })
}

// stopLease ends the host's lease goroutine, if it has one.
func (r *hostsRegistry) stopLease(name string) {
	if cancel := r.leases[name]; cancel != nil {
		cancel()
		delete(r.leases, name)
	}
}

// keepLease alternates between waiting for the host (a check-in on its queue) and holding
// its lease, marking it lost when a lease breaks.
func (r *hostsRegistry) keepLease(ctx workflow.Context, name string) {
	queue := workflows.HostTaskQueue(workflow.GetInfo(ctx).TaskQueueName, name)
	for ctx.Err() == nil {
		var reg plan.HostRegistration
		checkIn := withCheckIn(ctx, queue, name)
		if h := r.host(name); !h.Lost {
			// Taken for alive (a run that continued as new): it must answer within its
			// timeout, like a lease, or be lost.
			checkIn = workflow.WithScheduleToStartTimeout(checkIn, h.Timeout)
		}
		err := workflow.ExecuteActivity(checkIn, flow.ActCheckInHost).Get(ctx, &reg)
		if ctx.Err() != nil {
			return
		}
		h := r.host(name)
		if err != nil && !h.Lost {
			h.Lost = true
			r.logger.Warn("Host lost", "Host", name, "LastSeen", h.LastSeen, "Error", err)
			r.changed()
			continue
		}
		if err != nil || reg.Name != name {
			// A worker of another host on this queue, or a failing one: try again later.
			r.logger.Warn("Host check-in failed", "Host", name, "Registered", reg.Name, "Error", err)
			_ = workflow.Sleep(ctx, h.Timeout)
			continue
		}
		h.HostRegistration, h.Lost, h.LastSeen = reg, false, workflow.Now(ctx)
		r.logger.Info("Host ready", "Host", name)
		r.changed()
		for {
			timeout := r.host(name).Timeout
			err := workflow.ExecuteActivity(withLease(ctx, queue, timeout, leaseBeat(ctx, timeout)), flow.ActHoldHostLease, timeout).Get(ctx, nil)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				break
			}
			r.host(name).LastSeen = workflow.Now(ctx)
		}
		h = r.host(name)
		h.Lost = true
		r.logger.Warn("Host lost", "Host", name, "LastSeen", h.LastSeen)
		r.changed()
	}
}

// withCheckIn waits as long as it takes for the host's worker to poll again.
func withCheckIn(ctx workflow.Context, queue, host string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
		Summary:             "check in " + host,
	})
}

// leaseBeat is how often a lease of the host timeout heartbeats (change.SparseLeaseBeats).
func leaseBeat(ctx workflow.Context, timeout time.Duration) time.Duration {
	if workflow.GetVersion(ctx, change.SparseLeaseBeats, workflow.DefaultVersion, 1) >= 1 {
		return workflows.LeaseBeat(timeout)
	}
	return workflows.LegacyLeaseBeat(timeout)
}

// withLease breaks the lease when the host goes unheard of for its timeout (the heartbeat
// timeout is one beat longer, since the last heartbeat the server got may be a beat old),
// or cannot even start the lease within it.
func withLease(ctx workflow.Context, queue string, timeout, beat time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: timeout,
		StartToCloseTimeout:    leaseTerm + timeout,
		HeartbeatTimeout:       timeout + beat,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                fmt.Sprintf("lease of %s", queue),
	})
}
