package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/backend"
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
	return WithAgentVersion(ctx, *a.Host, a.Backend), nil
}

// agentVersionWait bounds the question to the host's agent: a registration goes on
// without its version rather than wait for an agent that does not answer.
const agentVersionWait = 10 * time.Second

// WithAgentVersion is the host's registration with its agent's version, when the backend
// has an agent and it answered.
func WithAgentVersion(ctx context.Context, reg workflows.HostRegistration, b backend.Backend) workflows.HostRegistration {
	if r, ok := b.(backend.AgentReporter); ok {
		ctx, cancel := context.WithTimeout(ctx, agentVersionWait)
		defer cancel()
		if v, err := r.AgentVersion(ctx); err == nil {
			reg.AgentVersion = v
		}
	}
	return reg
}

// HoldHostLease heartbeats for the lease's term, once a beat (workflows.LeaseBeatOf: the
// lease's heartbeat timeout less the host timeout), so that the server's last word from
// the host is never older than that. The registry takes a missed heartbeat timeout for the
// host being lost; when that already happened (the heartbeat is refused as not found) or
// the registry cancels the lease, the lease ends.
//
// The heartbeats are sent by hand, not by activity.RecordHeartbeat: the SDK cancels an
// activity whose heartbeat fails to reach the server for a second or two, taking that for
// the heartbeat timeout, and the lease then failed as soon as the link was back, so that a
// host cut off for a fraction of its timeout was taken for lost. Only the server's own
// heartbeat timeout, which is the host's timeout and a beat, may end the lease. A heartbeat
// that fails is sent again within a second or so, not a beat later: the silence the server
// sees is then at most a beat, the cut, and that second, under the heartbeat timeout for any
// cut shorter than the host timeout by more than the second.
func (a *Activities) HoldHostLease(ctx context.Context, timeout time.Duration) error {
	if a.Host == nil {
		return errNotAHost
	}
	term := time.NewTimer(leaseTerm(ctx))
	defer term.Stop()
	info := activity.GetInfo(ctx)
	beat := workflows.LeaseBeatOf(timeout, info.HeartbeatTimeout)
	// A heartbeat stuck on a cut link gives up after half a beat (1 to 10 s), and the next
	// is sent after a quarter of a beat (at most a second).
	limit, again := min(max(beat/2, time.Second), 10*time.Second), min(beat/4, time.Second)
	c := activity.GetClient(ctx)
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done(): // the worker stops
			return ctx.Err()
		case <-term.C:
			return nil
		case <-next.C:
		}
		sent := time.Now()
		rpcCtx, cancel := context.WithTimeout(ctx, limit)
		err := c.RecordActivityHeartbeat(rpcCtx, info.TaskToken)
		cancel()
		if leaseOver(err) {
			return err
		}
		if err != nil {
			next.Reset(again)
		} else {
			next.Reset(beat - time.Since(sent))
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
