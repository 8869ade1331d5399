package activities

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/runner"
)

// Activities performs member operations through a backend.
type Activities struct {
	Backend backend.Backend
}

// WriteClusterFiles installs startscripts and writes the configmeta every member reads.
func (a *Activities) WriteClusterFiles(ctx context.Context, files ClusterFiles) error {
	return a.Backend.WriteClusterFiles(ctx, files)
}

// CreateMember creates a member's sandbox.
func (a *Activities) CreateMember(ctx context.Context, m MemberRef) error {
	return a.Backend.CreateMember(ctx, m)
}

// RemoveMember stops what a member left running and removes its sandbox.
func (a *Activities) RemoveMember(ctx context.Context, m MemberRef) error {
	return a.Backend.RemoveMember(ctx, m)
}

// RemoveCluster removes the cluster's remaining files.
func (a *Activities) RemoveCluster(ctx context.Context, cluster string) error {
	return a.Backend.RemoveCluster(ctx, cluster)
}

// RunStartscript runs one startscript event for one member, heartbeating its progress. A
// script that exits non-zero or times out fails the activity with a non-retryable error whose
// details are the ScriptResult, tails included.
func (a *Activities) RunStartscript(ctx context.Context, run ScriptRun) (ScriptResult, error) {
	res, err := a.Backend.RunScript(ctx, run, func(p runner.Progress) {
		activity.RecordHeartbeat(ctx, p)
	})
	if err != nil {
		return res, err
	}
	switch {
	case res.Outcome == runner.Canceled:
		return res, ctx.Err()
	case res.Outcome == runner.TimedOut:
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s timed out after %s%s", run.Event, run.Timeout, lastLineOf(res)), ErrScriptTimedOut, nil, res)
	case res.ExitCode != 0:
		return res, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s exited with status %d%s", run.Event, res.ExitCode, lastLineOf(res)), ErrScriptFailed, nil, res)
	}
	return res, nil
}

// lastLineOf quotes the script's last line of stderr (or stdout) so the one-line error
// already says what went wrong.
func lastLineOf(res ScriptResult) string {
	for _, tail := range []string{res.StderrTail, res.StdoutTail} {
		lines := strings.Split(strings.TrimSpace(tail), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
			return ": " + last
		}
	}
	return ""
}
