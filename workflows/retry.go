package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
)

// Retry: a member whose configure failed (or was cancelled, or whose sandbox could not be
// made) goes back to pending, keeping its sandbox, name and host, and a new generation sets
// it up again in dependency order, as a resize would; scripts are idempotent, so its
// configure runs over whatever the failed run left. Its dependents that never started go
// with it.

// validateRetry refuses a retry of a cluster being deleted or held, of members that do not
// exist or are not in config_error, of a failure retry does not run again, and a retry
// with nothing to retry; every problem at once.
func (c *cluster) validateRetry(req RetryRequest) error {
	if err := c.refuseChange("retry"); err != nil {
		return err
	}
	_, problems := c.retried(req)
	if len(problems) > 0 {
		return refused(apperr.Invalid, "retry refused: %s", strings.Join(problems, "; "))
	}
	return nil
}

// retried is the members a retry runs again, or what is wrong with it.
func (c *cluster) retried(req RetryRequest) (names, problems []string) {
	failed := func(m Member) string {
		if m.Decommission == DecommissionFailed {
			return ""
		}
		if m.State != MemberConfigError {
			return fmt.Sprintf("member %s is %s, not config_error: nothing to retry", m.Name, m.State)
		}
		if m.Event != spec.EventConfigure && m.Event != "" {
			return fmt.Sprintf("member %s failed %s, which retry does not run again (it retries a failed configure; a failed notification stays to be seen in its output, and a replacement or a new revision moves on)", m.Name, m.Event)
		}
		return ""
	}
	if len(req.Members) == 0 {
		for _, rs := range c.state.Roles {
			for _, m := range rs.Members {
				if m.State != MemberConfigError && m.Decommission != DecommissionFailed {
					continue
				}
				if why := failed(m); why != "" {
					problems = append(problems, why)
				} else {
					names = append(names, m.Name)
				}
			}
		}
		if len(names) == 0 && len(problems) == 0 {
			problems = append(problems, fmt.Sprintf("no member of cluster %s is in config_error, nor waits on a failed decommission", c.state.Name))
		}
		return names, problems
	}
	for _, name := range req.Members {
		_, m := c.findMember(name)
		switch {
		case m == nil || m.State == MemberDeleted:
			problems = append(problems, fmt.Sprintf("cluster %s has no member %q", c.state.Name, spec.Clip(name, spec.MaxMemberNameLength)))
		case slices.Contains(names, name):
			problems = append(problems, fmt.Sprintf("member %s is named more than once", name))
		default:
			if why := failed(*m); why != "" {
				problems = append(problems, why)
			} else {
				names = append(names, name)
			}
		}
	}
	return names, problems
}

// onRetry puts the members back to pending and starts a new generation that sets them up.
func (w *clusterWorkflow) onRetry(ctx workflow.Context, req RetryRequest) (ChangeResult, error) {
	names, _ := w.retried(req)
	now := workflow.Now(ctx)
	for _, name := range names {
		_, m := w.findMember(name)
		if m.Decommission == DecommissionFailed {
			m.Decommission, m.Detail = "", "retrying decommission"
		} else {
			m.State, m.Since, m.Detail = MemberPending, now, "retrying configure"
		}
		m.StdoutTail, m.StderrTail = "", ""
	}
	summary := "retry " + spec.Some(names, refusalNames)
	w.newGeneration(summary)
	w.touch(ctx)
	w.logger.Info("Retrying failed members", "Generation", w.state.Generation, "Members", len(names))
	return ChangeResult{Generation: w.state.Generation, Changed: true, Summary: summary}, nil
}
