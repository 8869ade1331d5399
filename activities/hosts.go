package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/workflows"
)

// errNotAHost is returned by host activities on a worker that serves no host.
var errNotAHost = temporal.NewNonRetryableApplicationError("this worker serves no host (start it with --host)", "NotAHost", nil)

// CheckInHost tells the registry that the host's worker polls its queue again, and what it
// says about its host now.
func (a *Activities) CheckInHost(ctx context.Context) (workflows.HostRegistration, error) {
	if a.Host == nil {
		return workflows.HostRegistration{}, errNotAHost
	}
	return *a.Host, nil
}

// HoldHostLease heartbeats for the lease's term, every workflows.LeaseBeat(timeout): the host's
// worker lets its heartbeats through that often (its MaxHeartbeatThrottleInterval), so the
// server's last word from the host is never older than that. The registry takes a missed
// heartbeat for the host being lost; when that already happened (the heartbeat is
// refused), the context ends and so does the lease.
func (a *Activities) HoldHostLease(ctx context.Context, timeout time.Duration) error {
	if a.Host == nil {
		return errNotAHost
	}
	term := time.NewTimer(leaseTerm(ctx))
	defer term.Stop()
	tick := time.NewTicker(workflows.LeaseBeat(timeout))
	defer tick.Stop()
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-term.C:
			return nil
		case <-tick.C:
		}
	}
}

// leaseTerm ends the lease a little before its start-to-close timeout, so that renewing it
// is not mistaken for a failure.
func leaseTerm(ctx context.Context) time.Duration {
	info := activity.GetInfo(ctx)
	left := time.Until(info.Deadline)
	if left <= 0 {
		return 0
	}
	return left - min(left/10, info.HeartbeatTimeout)
}
