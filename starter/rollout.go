package starter

import (
	"context"
	"fmt"
	"os"
	"os/user"

	"github.com/clusterflow/clusterflow/workflows"
)

// RolloutPause stops the cluster's rollout before its next batch; the members updated stay
// updated and the others keep what they run.
func (s *Starter) RolloutPause(ctx context.Context, name string) (workflows.RolloutStatus, error) {
	var status workflows.RolloutStatus
	err := s.update(ctx, name, workflows.RolloutPauseUpdate, &status)
	return status, err
}

// RolloutResume goes on with a paused rollout; members whose update failed are tried again.
func (s *Starter) RolloutResume(ctx context.Context, name string) (workflows.RolloutStatus, error) {
	var status workflows.RolloutStatus
	err := s.update(ctx, name, workflows.RolloutResumeUpdate, &status)
	return status, err
}

// RolloutUndo makes a new revision equal to revision to (0: the one before the current)
// and rolls it out to the members that moved; those that never did are not touched.
func (s *Starter) RolloutUndo(ctx context.Context, name string, to int) (workflows.RolloutStatus, error) {
	var status workflows.RolloutStatus
	err := s.update(ctx, name, workflows.RolloutUndoUpdate, &status, workflows.UndoRequest{ToRevision: to, By: ClientIdentity()})
	return status, err
}

// ClientIdentity names who applies a change, for the revisions: the local user and host.
func ClientIdentity() string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s@%s", who, host)
}
