package starter

import (
	"context"
	"fmt"
	"os"
	"os/user"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
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

// Preview says what an apply of c (or, with c nil, a resize to counts) would do to the
// cluster, changing nothing: the dry run.
func (s *Starter) Preview(ctx context.Context, name string, c *spec.Cluster, counts []workflows.RoleCount) (workflows.Preview, error) {
	return s.preview(ctx, name, workflows.PreviewRequest{Spec: c, Counts: counts})
}

// PreviewRemoving is what ResizeRemoving would do, changing nothing.
func (s *Starter) PreviewRemoving(ctx context.Context, name string, counts []workflows.RoleCount, remove []string) (workflows.Preview, error) {
	req, err := s.resizeRequest(ctx, name, counts, remove)
	if err != nil {
		return workflows.Preview{}, err
	}
	return s.preview(ctx, name, workflows.PreviewRequest{Counts: req.Counts, Remove: req.Remove})
}

func (s *Starter) preview(ctx context.Context, name string, req workflows.PreviewRequest) (workflows.Preview, error) {
	var preview workflows.Preview
	if err := s.queryCluster(ctx, name, workflows.PreviewQuery, "preview the change to "+name, &preview, req); err != nil {
		return preview, err
	}
	if preview.Refused != "" {
		return preview, apperr.Errorf(apperr.Invalid, "%s", preview.Refused)
	}
	return preview, nil
}

// Restart starts a rolling restart of the chosen members (see workflows.RestartRequest).
func (s *Starter) Restart(ctx context.Context, name string, req workflows.RestartRequest) (workflows.RolloutStatus, error) {
	var status workflows.RolloutStatus
	err := s.update(ctx, name, workflows.RestartUpdate, &status, req)
	return status, err
}

// RunAction runs a role's action on members (see workflows.ActionRequest); it returns
// once the cluster accepted it, with its ID, which the status's Actions follow.
func (s *Starter) RunAction(ctx context.Context, name string, req workflows.ActionRequest) (workflows.ActionStatus, error) {
	var status workflows.ActionStatus
	req.By = ClientIdentity()
	err := s.update(ctx, name, workflows.RunActionUpdate, &status, req)
	return status, err
}
