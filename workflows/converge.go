package workflows

import (
	"fmt"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"
)

// converge brings the members to the desired generation: a deploy is the first
// convergence, and every resize or apply a later one. A change arriving midway restarts
// it at the next level boundary, so the newest desired state wins and requests apply in
// the order they arrived. ctx is cancelled by a cancel or a delete.
func (w *clusterWorkflow) converge(ctx workflow.Context) {
	for {
		w.state.Operations++
		w.state.AttemptedGeneration, w.state.Held = w.state.Generation, ""
		if w.state.ReachedGeneration > 0 {
			w.setPhase(ctx, PhaseUpdating, strings.TrimSuffix(fmt.Sprintf("generation %d: %s", w.state.Generation, w.lastChange), ": "))
		}
		if !w.convergeOnce(ctx) {
			return
		}
	}
}

// convergeOnce makes one pass: remove what is no longer wanted (dependents first), set new
// members up level by level, then tell the members that were there what changed. It
// reports whether the desired state changed meanwhile and another pass is needed.
func (w *clusterWorkflow) convergeOnce(ctx workflow.Context) (again bool) {
	generation := w.state.Generation
	changed := func() bool { return w.state.Generation != generation }
	if w.heldByMaintenance(ctx) {
		return false
	}
	w.adoptRogues(workflow.Now(ctx))
	if w.setUpElsewhere {
		w.hosts.removeStale(ctx)
	}
	w.removeUnwanted(ctx, false)
	if ctx.Err() != nil {
		return false
	}
	w.startRestarted(ctx)
	if ctx.Err() != nil {
		return false
	}
	if changed() {
		return true
	}
	w.reshape(workflow.Now(ctx))
	// Level by level: write the files (configmeta lists the members about to be set up),
	// set the level's pending members up, and go on only if all of them are.
	ended, again := false, false
	w.runPass(ctx, w.spec, plan.Setup(w.state.Levels), passHooks{
		before: func(step plan.Step) bool {
			if w.heldByMaintenance(ctx) {
				ended = true
				return false
			}
			if err := w.writeClusterFiles(ctx, step.Level == 0); err != nil {
				// Cancelled by a delete is not a failure; anything else is.
				if ctx.Err() == nil {
					w.setPhase(ctx, PhaseFailed, "could not write the cluster's files: "+errorMessage(err))
				}
				ended = true
				return false
			}
			return true
		},
		after: func(step plan.Step) bool {
			if ctx.Err() != nil || w.heldByMaintenance(ctx) {
				ended = true
				return false
			}
			if changed() || w.health.replaceFailed(ctx, step.Roles) {
				ended, again = true, true
				return false
			}
			if failed := plan.LevelProblems(w.spec, w.state.Roles, step.Roles); len(failed) > 0 {
				w.skipLaterLevels(step.Level, strings.Join(step.Roles, ", "))
				w.removeReplaced(ctx)
				w.announce(ctx)
				w.setPhase(ctx, PhaseFailed, strings.Join(failed, "; "))
				ended = true
				return false
			}
			return true
		},
	})
	if ended || ctx.Err() != nil {
		return again
	}
	w.removeReplaced(ctx)
	if ctx.Err() != nil || w.heldByMaintenance(ctx) {
		return false
	}
	if err := w.writeClusterFiles(ctx, false); err != nil {
		w.logger.Warn("Could not refresh configmeta after deploy", "Error", err)
	}
	w.announce(ctx)
	if ctx.Err() != nil {
		return false
	}
	if w.health.replaceFailed(ctx, slices.Concat(w.state.Levels...)) {
		return true
	}
	// A failed notification leaves its member in config_error, and the cluster failed.
	var failed []string
	for _, level := range w.state.Levels {
		failed = append(failed, plan.LevelProblems(w.spec, w.state.Roles, level)...)
	}
	if len(failed) > 0 {
		w.setPhase(ctx, PhaseFailed, strings.Join(failed, "; "))
		return false
	}
	w.state.ReachedGeneration = generation
	w.refreshMeltdown()
	phase, message := w.healthPhase()
	w.setPhase(ctx, phase, message)
	return false
}

// removeReplaced removes the members whose successors are now set up (or failed to be).
func (w *clusterWorkflow) removeReplaced(ctx workflow.Context) {
	if w.replacing() {
		w.removeUnwanted(ctx, true)
	}
}

// markSetUpNow records that the members about to be set up configure with the configmeta
// just written, and so know the members it lists; a member placed afresh is this
// operation's to set up now.
func (c *cluster) markSetUpNow(work []plan.RoleWork) {
	for _, rw := range work {
		rs := c.state.Role(rw.Role)
		for i := range rw.Members {
			live := rs.Member(rw.Members[i].Name)
			live.KnowsUpTo, live.Moved = c.state.ConfigMetaVersion, false
			rw.Members[i].KnowsUpTo, rw.Members[i].Moved = c.state.ConfigMetaVersion, false
		}
	}
}

// skipLaterLevels says why members of roles after a failed level never started.
func (c *cluster) skipLaterLevels(failedLevel int, failedRoles string) {
	for _, level := range c.state.Levels[failedLevel+1:] {
		for _, name := range level {
			rs := c.state.Role(name)
			for i := range rs.Members {
				if rs.Members[i].State == MemberPending {
					rs.Members[i].Detail = "not started: level with " + failedRoles + " failed"
				}
			}
		}
	}
}

// canceledMessage sums up what a cancel left behind.
func (c *cluster) canceledMessage() string {
	canceled, notStarted := 0, 0
	for _, r := range c.state.Roles {
		for _, m := range r.Members {
			switch {
			case m.State == MemberConfigError && m.Detail == "canceled":
				canceled++
			case m.State == MemberPending:
				notStarted++
			}
		}
	}
	return fmt.Sprintf("stopped at generation %d by a cancel: %d %s canceled, %d not started", c.state.Generation, canceled, plural(canceled, "member"), notStarted)
}

func errorMessage(err error) string {
	return rootCause(err).Error()
}
