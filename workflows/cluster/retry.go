package cluster

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/announce"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Retry: a member whose configure failed (or was cancelled, or whose sandbox could not be
// made) goes back to pending, keeping its sandbox, name and host, and a new generation sets
// it up again in dependency order, as a resize would; scripts are idempotent, so its
// configure runs over whatever the failed run left. Its dependents that never started go
// with it. A member whose decommission failed, or held by a failed removing, has it run
// again; a survivor whose removing failed is ready again and hears it again; a member
// whose addnodes or delnodes failed is ready again and is told what it was not (retell.go).

// validateRetry refuses a retry of a cluster being deleted or held, of members that do not
// exist or are not in config_error, of a failure retry does not run again, and a retry
// with nothing to retry; every problem at once.
func (u *updates) validateRetry(req workflows.RetryRequest) error {
	if err := u.refuseChange("retry"); err != nil {
		return err
	}
	_, problems := u.retried(req)
	if len(problems) > 0 {
		return flow.Refused(apperr.Invalid, "retry refused: %s", strings.Join(problems, "; "))
	}
	return nil
}

// retried is the members a retry runs again, or what is wrong with it.
func (u *updates) retried(req workflows.RetryRequest) (names, problems []string) {
	failed := func(m plan.Member) string {
		if m.Decommission == plan.DecommissionFailed {
			return ""
		}
		if m.State != plan.MemberConfigError {
			return fmt.Sprintf("member %s is %s, not config_error: nothing to retry", m.Name, m.State)
		}
		if u.w.appContract && m.Event == spec.EventRemoving {
			return ""
		}
		if u.w.announceOptions.KeepsUntold(m.Event) {
			return announce.UntoldProblem(&u.w.state, m)
		}
		if m.Event != spec.EventConfigure && m.Event != "" {
			retries := "a failed configure; a failed notification stays to be seen in its output"
			if u.w.appContract {
				retries = "a failed configure, decommission, addnodes, delnodes or removing"
			}
			return fmt.Sprintf("member %s failed %s, which retry does not run again (it retries %s, and a replacement or a new revision moves on)", m.Name, m.Event, retries)
		}
		return ""
	}
	if len(req.Members) == 0 {
		for _, rs := range u.w.state.Roles {
			for _, m := range rs.Members {
				if m.State != plan.MemberConfigError && m.Decommission != plan.DecommissionFailed {
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
			problems = append(problems, fmt.Sprintf("no member of cluster %s is in config_error, nor waits on a failed decommission", u.w.state.Name))
		}
		return names, problems
	}
	for _, name := range req.Members {
		_, m := u.w.state.FindMember(name)
		switch {
		case m == nil || m.State == plan.MemberDeleted:
			problems = append(problems, fmt.Sprintf("cluster %s has no member %q", u.w.state.Name, spec.Clip(name, spec.MaxMemberNameLength)))
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
func (u *updates) onRetry(ctx workflow.Context, req workflows.RetryRequest) (workflows.ChangeResult, error) {
	names, _ := u.retried(req)
	now := workflow.Now(ctx)
	removing := false
	for _, name := range names {
		_, m := u.w.state.FindMember(name)
		switch {
		case m.Decommission == plan.DecommissionFailed:
			m.Decommission, m.Detail = "", "retrying decommission"
			if u.w.appContract && !m.RemovingTold {
				m.Detail = "retrying removing"
			}
		case u.w.announceOptions.KeepsUntold(m.Event):
			// Set up all along: ready again, it is told what it was not at the next
			// announcement (see retell).
			m.State, m.Since, m.Detail = plan.MemberReady, now, "retrying "+string(m.Event)
		case m.Event == spec.EventRemoving:
			// A survivor whose removing failed was set up all along: it is ready again,
			// and hears the removing again with every survivor that knows the members held.
			m.State, m.Since, m.Detail = plan.MemberReady, now, "retrying removing"
			removing = true
		default:
			m.State, m.Since, m.Detail = plan.MemberPending, now, "retrying configure"
		}
		m.StdoutTail, m.StderrTail = "", ""
	}
	if removing {
		for i := range u.w.state.Roles {
			for j := range u.w.state.Roles[i].Members {
				if m := &u.w.state.Roles[i].Members[j]; m.Decommission == plan.DecommissionFailed && !m.RemovingTold {
					m.Decommission, m.Detail = "", "retrying removing"
				}
			}
		}
	}
	summary := "retry " + spec.Some(names, flow.RefusalNames)
	u.w.NewGeneration(summary)
	u.w.Touch(ctx)
	u.w.logger.Info("Retrying failed members", "Generation", u.w.state.Generation, "Members", len(names))
	return workflows.ChangeResult{Generation: u.w.state.Generation, Changed: true, Summary: summary}, nil
}
