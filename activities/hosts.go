package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"

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

// HoldHostLease heartbeats for the lease's term, every workflows.LeaseBeat(timeout), so that
// the server's last word from the host is never older than that. The registry takes a
// missed heartbeat timeout for the host being lost; when that already happened (the
// heartbeat is refused as not found) or the registry cancels the lease, the lease ends.
//
// The heartbeats are sent by hand, not by activity.RecordHeartbeat: the SDK cancels an
// activity whose heartbeat fails to reach the server for a second or two, taking that for
// the heartbeat timeout, and the lease then failed as soon as the link was back, so that a
// host cut off for a fraction of its timeout was taken for lost. Only the server's own
// heartbeat timeout, which is the host's timeout, may end the lease.
func (a *Activities) HoldHostLease(ctx context.Context, timeout time.Duration) error {
	if a.Host == nil {
		return errNotAHost
	}
	term := time.NewTimer(leaseTerm(ctx))
	defer term.Stop()
	beat := workflows.LeaseBeat(timeout)
	tick := time.NewTicker(beat)
	defer tick.Stop()
	c, token := activity.GetClient(ctx), activity.GetInfo(ctx).TaskToken
	for {
		rpcCtx, cancel := context.WithTimeout(ctx, max(beat, time.Second))
		err := c.RecordActivityHeartbeat(rpcCtx, token)
		cancel()
		if leaseOver(err) {
			return err
		}
		select {
		case <-ctx.Done(): // the worker stops
			return ctx.Err()
		case <-term.C:
			return nil
		case <-tick.C:
		}
	}
}

// leaseOver reports whether a heartbeat's error ends the lease: the registry cancelled it,
// or the server no longer knows it (timed out, or its run is gone). Any other error is the
// link's, which the server's heartbeat timeout judges.
func leaseOver(err error) bool {
	var canceled *temporal.CanceledError
	var notFound *serviceerror.NotFound
	return errors.As(err, &canceled) || errors.As(err, &notFound)
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
