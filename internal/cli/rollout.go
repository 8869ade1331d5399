package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// runRollout follows, pauses, resumes and undoes rollouts, as kubectl rollout does.
func runRollout(ctx context.Context, args []string) error {
	fs := newFlagSet("rollout", "status|pause|resume|undo NAME [--wait [--timeout D]] [--to-revision N] [-o json]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	wait, timeout := waitFlags(fs, "with status, wait until the rollout is done or paused, showing progress")
	to := fs.Int("to-revision", 0, "with undo, the revision to go back to (default: the one before the current)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 2 {
		return apperr.Errorf(apperr.Invalid, "rollout needs an action and a cluster name: clusterflow rollout status|pause|resume|undo NAME")
	}
	action, name := fs.Arg(0), fs.Arg(1)
	st, _, closeClient, err := conn.starter(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	switch action {
	case "status":
		return rolloutStatus(ctx, st, name, *wait, *timeout, *out == "json")
	case "pause":
		_, err = st.RolloutPause(ctx, name)
	case "resume":
		_, err = st.RolloutResume(ctx, name)
	case "undo":
		_, err = st.RolloutUndo(ctx, name, *to)
	default:
		return apperr.Errorf(apperr.Invalid, "rollout: unknown action %q (known: status, pause, resume, undo)", action)
	}
	if err != nil {
		return err
	}
	status, err := st.Status(ctx, name)
	if err != nil {
		return err
	}
	render.Rollout(os.Stdout, status, time.Now())
	return nil
}

// rolloutStatus prints the rollout's progress, first waiting until it is done or paused
// if asked: a paused one exits non-zero.
func rolloutStatus(ctx context.Context, st *starter.Starter, name string, wait bool, timeout time.Duration, asJSON bool) error {
	status, err := st.Status(ctx, name)
	if err != nil {
		return err
	}
	if wait {
		status, err = waitFor(ctx, st, name, timeout, func(s workflows.ClusterStatus) bool {
			return s.Settled(s.Generation) && (s.Rollout == nil || s.Rollout.State != workflows.RolloutRunning)
		})
		if err != nil {
			return err
		}
	}
	if asJSON {
		if err := printJSON(status.Rollout); err != nil {
			return err
		}
	} else {
		render.Rollout(os.Stdout, status, time.Now())
	}
	if wait {
		return settled(status)
	}
	return nil
}

// runRestart starts a rolling restart.
func runRestart(ctx context.Context, args []string) error {
	fs := newFlagSet("restart", "NAME [--role R] [--members A,B] [--wait [--timeout D]]")
	var conn connection
	conn.register(fs, "warn")
	role := fs.String("role", "", "restart every ready member of this role")
	members := fs.StringSlice("members", nil, "restart these members (comma-separated)")
	wait, timeout := waitFlags(fs, "wait until the restart is done or paused, showing progress")
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	if _, err := st.Restart(ctx, name, workflows.RestartRequest{Role: *role, Members: *members}); err != nil {
		return err
	}
	if !*wait {
		fmt.Printf("Cluster %s: rolling restart started; follow it with `clusterflow rollout status %s`.\n", name, name)
		return nil
	}
	return rolloutStatus(ctx, st, name, true, *timeout, false)
}

// runRevisions lists a cluster's revisions.
func runRevisions(ctx context.Context, args []string) error {
	fs := newFlagSet("revisions", "NAME [-o json]")
	var conn connection
	conn.register(fs, "warn")
	out := outputFlag(fs)
	name, st, closeClient, err := clusterCommand(ctx, fs, &conn, args)
	if err != nil {
		return err
	}
	defer closeClient()
	status, err := st.Status(ctx, name)
	if err != nil {
		return err
	}
	if *out == "json" {
		return printJSON(status.Revisions)
	}
	render.Revisions(os.Stdout, status, time.Now())
	return nil
}
