package cluster

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// The executor runs the planner's passes (workflows/plan): deploys, resizes and applies
// (removal, restart starts, setup, announcements), and deletes (the removal toward the
// empty spec). It is the one level loop: each step is planned when it is taken, and run as
// a child workflow per role through the role runner.

// passHooks let an operation act around a pass's steps. before runs ahead of each step's
// planning (writing the cluster's files, say) and after once the step ran; either returns
// false to end the pass. Any may be nil.
type passHooks struct {
	before func(step plan.Step) bool
	after  func(step plan.Step) bool
	// prepare, once a step's work is planned, readies it (writing what its members will
	// read, say) and may change it; false ends the pass there, running nothing.
	prepare func(step plan.Step, work []plan.RoleWork) ([]plan.RoleWork, bool)
	// restarted names the restarted hosts, for a restart pass.
	restarted []string
}

// runPass takes the pass's steps in order until one ends it, the context ends, or none is
// left. desired is read at each step: a change that arrives midway is planned for.
func (e *executor) runPass(ctx workflow.Context, desired *spec.Cluster, pass plan.Pass, hooks passHooks) {
	for _, step := range pass.Steps {
		if ctx.Err() != nil || hooks.before != nil && !hooks.before(step) {
			return
		}
		forget, work := step.Work(*desired, e.w.state.Roles, hooks.restarted)
		for _, name := range forget {
			_, m := e.w.state.FindMember(name)
			m.State, m.Since = plan.MemberDeleted, workflow.Now(ctx) // never created: nothing to tear down
		}
		switch step.Op {
		case plan.OpTeardown, plan.OpDecommission:
			work = e.dropUnreachable(work, workflow.Now(ctx))
			if e.w.lifecycle {
				e.sayWhyRemoved(work)
			}
		case plan.OpConfigure:
			e.markSetUpNow(work)
		}
		if hooks.prepare != nil {
			var ok bool
			if work, ok = hooks.prepare(step, work); !ok {
				return
			}
		}
		e.w.runner.RunLevel(ctx, e.w, step.Op, work)
		switch step.Op {
		case plan.OpTeardown:
			for _, rw := range work {
				e.w.noteRemoved(rw.Role, rw.Members)
				if e.w.lifecycle {
					e.noteFailedTeardowns(rw, workflow.Now(ctx))
				}
			}
		case plan.OpStart:
			if ctx.Err() != nil {
				return
			}
			e.w.health.FailedStartsAreDown(ctx, e.w, work)
		}
		if hooks.after != nil && !hooks.after(step) {
			return
		}
	}
}

// converge brings the members to the desired generation: a deploy is the first
// convergence, and every resize or apply a later one. A change arriving midway restarts
// it at the next level boundary, so the newest desired state wins and requests apply in
// the order they arrived. ctx is cancelled by a cancel or a delete.
func (e *executor) converge(ctx workflow.Context) {
	for {
		e.w.state.Operations++
		e.w.state.AttemptedGeneration, e.w.state.Held = e.w.state.Generation, ""
		message := strings.TrimSuffix(fmt.Sprintf("generation %d: %s", e.w.state.Generation, e.w.lastChange), ": ")
		switch {
		case e.w.state.ReachedGeneration > 0:
			e.w.SetPhase(ctx, workflows.PhaseUpdating, message)
		case e.w.lifecycle && e.w.state.Phase != workflows.PhaseDeploying:
			// A deploy that failed or was cancelled, going on (a retry, a resize): until it
			// is done, its phase must not still say how the last attempt ended.
			e.w.SetPhase(ctx, workflows.PhaseDeploying, message)
		}
		if !e.convergeOnce(ctx) {
			return
		}
	}
}

// convergeOnce makes one pass: remove what is no longer wanted (dependents first), set new
// members up level by level, then tell the members that were there what changed. It
// reports whether the desired state changed meanwhile and another pass is needed.
func (e *executor) convergeOnce(ctx workflow.Context) (again bool) {
	generation := e.w.state.Generation
	changed := func() bool { return e.w.state.Generation != generation }
	if e.w.HeldByMaintenance(ctx) {
		return false
	}
	// Actions act on the members as they are, before this pass changes them: so they run
	// on a cluster whose setup failed, too.
	if e.runActions(ctx); ctx.Err() != nil {
		return false
	}
	e.adoptRogues(workflow.Now(ctx))
	if e.w.setUpElsewhere {
		hosts.RemoveStale(ctx, &e.w.state, e.w.logger)
	}
	e.removeUnwanted(ctx, false)
	if ctx.Err() != nil {
		return false
	}
	e.startRestarted(ctx)
	if ctx.Err() != nil {
		return false
	}
	if changed() {
		return true
	}
	e.w.reshape(workflow.Now(ctx))
	if ended, again := e.setUp(ctx, changed); ended {
		return again
	}
	e.removeReplaced(ctx)
	if ctx.Err() != nil || e.w.HeldByMaintenance(ctx) {
		return false
	}
	if err := e.writeClusterFiles(ctx, false); err != nil {
		e.w.logger.Warn("Could not refresh configmeta after deploy", "Error", err)
	}
	e.announce(ctx)
	if ctx.Err() != nil {
		return false
	}
	if e.w.health.ReplaceFailed(ctx, e.w, slices.Concat(e.w.state.Levels...)) {
		return true
	}
	// A failed notification leaves its member in config_error, and the cluster failed.
	var failed []string
	for _, level := range e.w.state.Levels {
		failed = append(failed, plan.LevelProblems(e.w.spec, e.w.state.Roles, level)...)
	}
	if len(failed) > 0 {
		e.w.SetPhase(ctx, workflows.PhaseFailed, strings.Join(failed, "; "))
		return false
	}
	if rollout.Run(ctx, e.w, changed) {
		return true
	}
	if ctx.Err() != nil || e.w.HeldByMaintenance(ctx) {
		return false
	}
	e.w.state.ReachedGeneration = generation
	if rollout.Running(&e.w.state) && e.w.state.Rollout.Paused != "" {
		e.w.SetPhase(ctx, workflows.PhaseRolloutPaused, rollout.PausedMessage(&e.w.state))
		return false
	}
	e.w.health.RefreshMeltdown(e.w)
	phase, message := e.w.health.Phase(e.w)
	e.w.SetPhase(ctx, phase, message)
	return false
}

// setUp runs the setup pass: level by level, it writes the cluster's files (configmeta
// lists the members about to be set up), sets the level's pending members up, and goes on
// only if all of them are. It reports whether the pass ended there (a failure, a hold by
// maintenance, a cancel, a change) and whether another pass is due.
func (e *executor) setUp(ctx workflow.Context, changed func() bool) (ended, again bool) {
	e.runPass(ctx, &e.w.spec, plan.Setup(e.w.state.Levels), passHooks{
		before: func(step plan.Step) bool {
			if e.w.HeldByMaintenance(ctx) {
				ended = true
				return false
			}
			if e.w.lifecycle {
				if err := e.assignPorts(ctx, step.Roles); err != nil {
					if ctx.Err() == nil {
						e.w.SetPhase(ctx, workflows.PhaseFailed, "could not give members their ports: "+flow.ErrorMessage(err))
					}
					ended = true
					return false
				}
			}
			if err := e.writeClusterFiles(ctx, step.Level == 0); err != nil {
				// Cancelled by a delete is not a failure; anything else is.
				if ctx.Err() == nil {
					e.w.SetPhase(ctx, workflows.PhaseFailed, "could not write the cluster's files: "+flow.ErrorMessage(err))
				}
				ended = true
				return false
			}
			return true
		},
		after: func(step plan.Step) bool {
			if ctx.Err() != nil || e.w.HeldByMaintenance(ctx) {
				ended = true
				return false
			}
			if changed() || e.w.health.ReplaceFailed(ctx, e.w, step.Roles) {
				ended, again = true, true
				return false
			}
			if failed := plan.LevelProblems(e.w.spec, e.w.state.Roles, step.Roles); len(failed) > 0 {
				if rollout.KeepReplacedOnFailure(ctx, e.w) {
					// The rollout paused; the next pass removes the failed successors and tells
					// the others of those that were set up.
					ended, again = true, true
					return false
				}
				e.skipLaterLevels(step.Level, strings.Join(step.Roles, ", "))
				e.removeReplaced(ctx)
				e.announce(ctx)
				e.w.SetPhase(ctx, workflows.PhaseFailed, strings.Join(failed, "; "))
				ended = true
				return false
			}
			return true
		},
	})
	return ended || ctx.Err() != nil, again
}

// sayWhyRemoved tells each member of a teardown why it leaves: its teardown then knows
// whether its data has anywhere to go.
func (e *executor) sayWhyRemoved(work []plan.RoleWork) {
	for _, rw := range work {
		for i := range rw.Members {
			m := &rw.Members[i]
			switch {
			case e.w.state.Phase == workflows.PhaseDeleting:
				m.RemovedFor = "delete"
			case m.State == plan.MemberRogue:
				m.RemovedFor = "orphan"
			case m.State == plan.MemberReplacing && m.ReplacedOn() == plan.HealthDrain:
				m.RemovedFor = "drain"
			case m.State == plan.MemberReplacing:
				m.RemovedFor = "replace"
			default:
				m.RemovedFor = "shrink"
			}
		}
	}
}

// removeReplaced removes the members whose successors are now set up (or failed to be).
func (e *executor) removeReplaced(ctx workflow.Context) {
	if e.replacing() {
		e.removeUnwanted(ctx, true)
	}
}

// removeUnwanted tears down and removes the members the desired spec no longer wants, in
// reverse dependency order, the members of one role in parallel. Members never created are
// simply forgotten. Removed members that others knew of wait to be announced by delnodes.
// Members being replaced stay until replacedToo: they go once their successors are set up.
func (e *executor) removeUnwanted(ctx workflow.Context, replacedToo bool) {
	removal, hooks := plan.Removal(e.w.state.Levels, replacedToo), passHooks{}
	if e.w.lifecycle {
		removal = plan.GracefulRemoval(e.w.state.Levels, replacedToo)
		// Configmeta is refreshed before each removal step that acts, so the members it
		// acts on read themselves leaving, as do their peers.
		hooks.prepare = func(_ plan.Step, work []plan.RoleWork) ([]plan.RoleWork, bool) {
			if len(work) > 0 {
				if err := e.writeClusterFiles(ctx, false); err != nil {
					e.w.logger.Warn("Could not refresh configmeta before a removal step", "Error", err)
				}
			}
			return work, true
		}
	}
	if e.w.appContract {
		hooks.before = func(step plan.Step) bool {
			if step.Op == plan.OpDecommission {
				e.tellRemoving(ctx, step)
			}
			return ctx.Err() == nil
		}
	}
	e.runPass(ctx, &e.w.spec, removal, hooks)
	e.w.dropRemoved()
	e.w.Touch(ctx)
}

// delete tears the cluster down in reverse dependency order and removes every member. It
// runs on a disconnected context: once started, nothing can stop it halfway and leave debris.
func (e *executor) delete(parent workflow.Context) {
	ctx, _ := workflow.NewDisconnectedContext(parent)
	e.w.state.Operations++
	e.w.SetPhase(ctx, workflows.PhaseDeleting, "")
	e.w.state.Installed = nil // teardown scripts must be there, whatever became of the hosts' files
	if err := e.writeClusterFiles(ctx, true); err != nil {
		e.w.logger.Warn("Could not reinstall startscripts; teardown scripts may fail", "Error", err)
	}
	// A delete is the removal toward the empty spec: every member, whatever its state.
	e.runPass(ctx, &spec.Cluster{}, plan.Removal(e.w.state.Levels, true), passHooks{})
	// Any reachable host may hold the folder of a member that has left.
	failed := hosts.OnEach(flow.WithQuickActivity(ctx, "remove "+e.w.state.Name), &e.w.state, e.w.setUpElsewhere, hosts.ReachableHosts(&e.w.state), func(ctx workflow.Context, _ string) error {
		return workflow.ExecuteActivity(ctx, flow.ActRemoveCluster, e.w.Folder().Key()).Get(ctx, nil)
	})
	if e.w.state.OnHosts {
		hosts.ReportPlacement(ctx, e.w, workflows.ClusterPlacement{Cluster: e.w.state.Name, Gone: true})
	}
	e.w.SetPhase(ctx, workflows.PhaseDeleted, e.leftovers(hosts.DescribeFailures(failed)))
}

// leftovers says what could not be removed, so a user knows what to clean by hand.
func (e *executor) leftovers(removeClusterFailures string) string {
	var notes []string
	var left []string
	for _, r := range e.w.state.Roles {
		for _, m := range r.Members {
			if m.State != plan.MemberDeleted {
				left = append(left, m.Name)
			}
		}
	}
	if len(left) > 0 {
		notes = append(notes, fmt.Sprintf("could not remove %s; see their details", spec.Some(left, flow.RefusalNames)))
	}
	if removeClusterFailures != "" {
		notes = append(notes, "could not remove the cluster's folder: "+removeClusterFailures)
	}
	return strings.Join(notes, "; ")
}

// startRestarted runs the start pass for the restarted hosts, level by level.
func (e *executor) startRestarted(ctx workflow.Context) {
	restarted := e.w.state.Restarted
	if len(restarted) == 0 {
		return
	}
	e.w.state.Restarted = nil
	if workflow.GetVersion(ctx, change.FilesBeforeStart, workflow.DefaultVersion, 1) >= 1 {
		if err := e.writeClusterFiles(ctx, true); err != nil {
			e.w.logger.Warn("Could not write the cluster's files to its restarted hosts; their starts may fail", "Error", err)
		}
	}
	e.runPass(ctx, &e.w.spec, plan.Restart(e.w.state.Levels), passHooks{restarted: restarted})
}

// replacing reports whether any member is waiting for its successor before it goes.
func (e *executor) replacing() bool {
	n, _ := plan.CountAll(e.w.state.Roles, plan.MemberReplacing)
	return n > 0
}
