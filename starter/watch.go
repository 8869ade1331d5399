package starter

import (
	"context"
	"errors"
	"time"

	"github.com/clusterflow/clusterflow/workflows"
)

// WatchInterval is how often Watch polls the status query.
const WatchInterval = 250 * time.Millisecond

// Watch polls a cluster's status, calling onChange whenever it changes, until done says the
// wait is over or ctx ends. It returns the last status seen.
func (s *Starter) Watch(ctx context.Context, name string, done func(workflows.ClusterStatus) bool, onChange func(workflows.ClusterStatus)) (workflows.ClusterStatus, error) {
	var last workflows.ClusterStatus
	ticker := time.NewTicker(WatchInterval)
	defer ticker.Stop()
	for first := true; ; first = false {
		status, err := s.Status(ctx, name)
		var noWorker *NoWorkerError
		switch {
		case ctx.Err() != nil:
			return last, ctx.Err()
		case errors.As(err, &noWorker):
			// A worker restarting is normal during a long deploy; keep waiting.
		case err != nil:
			return last, err
		default:
			if first || !status.UpdatedAt.Equal(last.UpdatedAt) || status.Phase != last.Phase {
				onChange(status)
			}
			last = status
			if done(status) {
				return status, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-ticker.C:
		}
	}
}
