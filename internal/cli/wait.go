package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/render"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
)

// waitFor shows progress until done accepts the cluster's status.
func waitFor(ctx context.Context, st *starter.Starter, name string, timeout time.Duration, done func(workflows.ClusterStatus) bool) (workflows.ClusterStatus, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	progress := render.NewProgress(os.Stdout)
	final, err := st.Watch(ctx, name, starter.WatchOptions{
		Until:    done,
		OnChange: progress.Update,
		OnNoWorker: func(err error) {
			fmt.Fprintf(os.Stderr, "Waiting: %v\n", err)
		},
	})
	if err != nil && ctx.Err() != nil {
		where := "before any worker answered"
		if final.Phase != "" {
			where = "in phase " + string(final.Phase)
		}
		return final, apperr.Errorf(apperr.Failed, "stopped waiting for %s %s: %v (it carries on; see `clusterflow status %s`)", name, where, ctx.Err(), name)
	}
	return final, err
}

// settled turns a cluster that failed or was canceled into exit status 1, showing the
// failing members' output.
func settled(final workflows.ClusterStatus) error {
	switch final.Phase {
	case workflows.PhaseFailed:
		for _, r := range final.Roles {
			for _, m := range r.Members {
				if m.State == workflows.MemberConfigError {
					fmt.Printf("\n%s: %s\n", m.Name, m.Detail)
					render.Tails(os.Stdout, m)
				}
			}
		}
		if hint := render.RetryHint(final); hint != "" {
			fmt.Printf("\n%s\n", hint)
		}
		return apperr.Errorf(apperr.Failed, "cluster %s failed: %s", final.Name, final.Message)
	case workflows.PhaseCanceled:
		return apperr.Errorf(apperr.Failed, "cluster %s was canceled: %s", final.Name, final.Message)
	case workflows.PhasePaused:
		stuck := false
		for _, r := range final.Roles {
			for _, m := range r.Members {
				if m.Decommission == workflows.DecommissionFailed {
					stuck = true
					fmt.Printf("\n%s: %s\n", m.Name, m.Detail)
					render.Tails(os.Stdout, m)
				}
			}
		}
		if stuck {
			return apperr.Errorf(apperr.Failed, "cluster %s: %s", final.Name, final.Message)
		}
	case workflows.PhaseRolloutPaused:
		if ro := final.Rollout; ro != nil && ro.Member != "" {
			for _, r := range final.Roles {
				for _, m := range r.Members {
					if m.Name == ro.Member {
						fmt.Printf("\n%s: %s\n", m.Name, m.Detail)
						render.Tails(os.Stdout, m)
					}
				}
			}
		}
		return apperr.Errorf(apperr.Failed, "cluster %s: rollout paused: %s", final.Name, final.Message)
	case workflows.PhaseTerminated:
		return apperr.Errorf(apperr.Failed, "cluster %s: %s", final.Name, final.Message)
	}
	return nil
}

// waitSettled waits until the cluster is done with generation g and reports how it ended.
func waitSettled(ctx context.Context, st *starter.Starter, name string, timeout time.Duration, g int) error {
	final, err := waitFor(ctx, st, name, timeout, func(s workflows.ClusterStatus) bool { return s.Settled(g) })
	if err != nil {
		return err
	}
	if err := settled(final); err != nil {
		return err
	}
	return teardownsFailed(final, func(f workflows.FailedTeardown) bool { return f.Generation >= g })
}

// teardownsFailed turns the failed teardowns of what was waited for into exit status 1,
// showing each one's output: the members are gone, but what their teardown did not do
// (hand its data over, deregister) may need doing by hand.
func teardownsFailed(final workflows.ClusterStatus, of func(workflows.FailedTeardown) bool) error {
	var names []string
	for _, f := range final.FailedTeardowns {
		if of(f) {
			names = append(names, f.Member)
			fmt.Printf("\n%s: %s\n", f.Member, f.Detail)
			render.TeardownTails(os.Stdout, f)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return apperr.Errorf(apperr.Failed, "cluster %s: the teardown of %s failed; the members were removed all the same (their output: `clusterflow logs %s %s --event teardown`)",
		final.Name, strings.Join(names, ", "), final.Name, names[0])
}
