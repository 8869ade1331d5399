package starter

import (
	"context"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
)

// WatchInterval is how often Watch polls the status query once it has waited a while.
const WatchInterval = 250 * time.Millisecond

// pollInterval grows with the wait, from 25 ms to WatchInterval. A poll that comes late
// adds half the interval on average, so a tenth of the wait keeps that near 5%: a small
// deploy is done within a few hundred milliseconds. A long wait still polls at most 4
// times a second, and each poll asks for counts alone.
func pollInterval(waited time.Duration) time.Duration {
	return min(max(waited/10, 25*time.Millisecond), WatchInterval)
}

// WatchOptions say when a watch ends and what to tell the watcher meanwhile.
type WatchOptions struct {
	// Until says the wait is over.
	Until func(workflows.ClusterStatus) bool
	// OnChange is called with each status that differs from the last.
	OnChange func(workflows.ClusterStatus)
	// OnNoWorker, if set, is called once when no worker answers; Watch keeps waiting.
	OnNoWorker func(error)
}

// Watch polls a cluster's status until opts.Until accepts it or ctx ends, and returns the
// last status seen. A worker that does not answer (restarting, or not started yet) is waited
// for. Polls ask for the roles' counts alone, which is all progress shows: a status with
// every member is a query per 2,000 of them. Only the status Until accepts comes with its
// members, so that the caller can show the failed ones.
func (s *Starter) Watch(ctx context.Context, name string, opts WatchOptions) (workflows.ClusterStatus, error) {
	var last workflows.ClusterStatus
	started := time.Now()
	toldNoWorker := false
	for first := true; ; first = false {
		status, err := s.query(ctx, name, false)
		switch {
		case ctx.Err() != nil:
			return last, ctx.Err()
		case apperr.Is(err, apperr.Unavailable):
			if opts.OnNoWorker != nil && !toldNoWorker {
				opts.OnNoWorker(err)
				toldNoWorker = true
			}
		case err != nil:
			return last, err
		default:
			if first || !status.UpdatedAt.Equal(last.UpdatedAt) || status.Phase != last.Phase {
				opts.OnChange(status)
			}
			last = status
			if opts.Until(status) {
				// The summary serves if the full status no longer answers, or moved on.
				if full, err := s.query(ctx, name, true); err == nil && opts.Until(full) {
					return full, nil
				}
				return status, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(pollInterval(time.Since(started))):
		}
	}
}
