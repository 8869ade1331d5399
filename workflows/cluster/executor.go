package cluster

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/announce"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/internal/metric"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// The executor carries out the planner's passes (workflows/plan): deploys, resizes, applies,
// actions and rollouts, stage by stage as plan.Decide chooses them, and deletes (the removal
// toward the empty spec). Each step's work is planned when the step is taken, and runs as a
// child workflow per role through the role runner.

// What announcing needs of the executor (announce.Cluster).

func (e *executor) State() *workflows.ClusterState    { return &e.w.state }
func (e *executor) Desired() spec.Cluster             { return e.w.spec }
func (e *executor) Logger() log.Logger                { return e.w.logger }
func (e *executor) Touch(ctx workflow.Context)        { e.w.Touch(ctx) }
func (e *executor) Removed() *[]workflows.RemovedNode { return &e.w.removed }

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
// members up level by level, tell the members that were there what changed, and go on
// with the rollout in progress. The planner decides each stage as the last one ends
// (plan.Decide); the executor carries it out. It reports whether the desired state changed
// meanwhile and another pass is needed.
func (e *executor) convergeOnce(ctx workflow.Context) (again bool) {
	generation := e.w.state.Generation
	at, seen := plan.Cursor{Stage: plan.StageBegin}, stageOutcome{}
	began, kind := workflow.Now(ctx), metric.KindUpdate
	if e.w.state.ReachedGeneration == 0 {
		kind = metric.KindDeploy
	}
	for {
		d := plan.Decide(at, e.view(ctx, generation, seen))
		if d.End != plan.GoOn {
			metric.Operation(ctx, e.w.state.Name, kind, metric.PassResult(d.End, d.Held), began)
		}
		switch d.End {
		case plan.GoOn:
			at, seen = d.Take, e.take(ctx, d)
			continue
		case plan.Stop:
			if d.Held {
				e.noteHeld(ctx)
			}
		case plan.Again:
			return true
		case plan.Failed:
			e.w.SetPhase(ctx, workflows.PhaseFailed, d.Message)
		case plan.RolloutPaused:
			e.w.state.ReachedGeneration = generation
			e.w.SetPhase(ctx, workflows.PhaseRolloutPaused, rollout.PausedMessage(&e.w.state))
		case plan.Settled:
			e.w.state.ReachedGeneration = generation
			e.w.health.RefreshMeltdown(e.w)
			phase, message := e.w.health.Phase(e.w)
			e.w.SetPhase(ctx, phase, message)
		}
		return false
	}
}

// held says maintenance holds the cluster's operations now: a pass stops at its next
// boundary, and resumes afterwards (a delete it never holds).
func (e *executor) held() bool { return e.w.InMaintenance() && !e.w.deleteRequested }

// noteHeld shows that maintenance holds the operation, once per generation.
func (e *executor) noteHeld(ctx workflow.Context) {
	if e.w.state.Held == "" {
		e.w.state.Held = fmt.Sprintf("generation %d", e.w.state.Generation)
		e.w.logger.Info("Operation held for maintenance", "Generation", e.w.state.Generation)
		e.w.Touch(ctx)
	}
}

// stageOutcome is what a stage reports for the planner's next decision.
type stageOutcome struct {
	failed, replaced bool
	rollout          plan.RolloutProgress
}

// view is what the planner reads: the cluster now, and how the last stage went.
func (e *executor) view(ctx workflow.Context, generation int, seen stageOutcome) plan.PassView {
	v := plan.PassView{
		Desired: e.w.spec, Roles: e.w.state.Roles, Levels: e.w.state.Levels,
		Cancelled: ctx.Err() != nil, Held: e.held(), Changed: e.w.state.Generation != generation,
		StepFailed: seen.failed, Replaced: seen.replaced, Rollout: rollout.View(&e.w.state),
	}
	v.Rollout.Progress = seen.rollout
	return v
}

// take carries out the stage the planner decided.
func (e *executor) take(ctx workflow.Context, d plan.Decision) stageOutcome {
	switch d.Take.Stage {
	case plan.StageActions:
		// Actions act on the members as they are, before this pass changes them: so they run
		// on a cluster whose setup failed, too.
		e.runActions(ctx)
	case plan.StageRemoval:
		e.adoptRogues(workflow.Now(ctx))
		if e.w.setUpElsewhere {
			hosts.RemoveStale(ctx, &e.w.state, e.w.logger)
		}
		e.removeUnwanted(ctx, false)
	case plan.StageRestart:
		e.startRestarted(ctx)
	case plan.StageReshape:
		e.reshape(workflow.Now(ctx))
	case plan.StageSetup:
		return stageOutcome{failed: !e.setUpLevel(ctx, d.Step)}
	case plan.StageReplaceFailed:
		return stageOutcome{replaced: e.w.health.ReplaceFailed(ctx, e.w, d.Replace)}
	case plan.StageKeepReplaced:
		// The rollout pauses; the next pass removes the failed successors and tells the
		// others of those that were set up.
		return stageOutcome{replaced: rollout.KeepReplacedOnFailure(ctx, e.w)}
	case plan.StageSkipLevels:
		e.skipLaterLevels(d.Take.Level, strings.Join(e.w.state.Levels[d.Take.Level], ", "))
	case plan.StageRemoveReplaced:
		e.removeReplaced(ctx)
	case plan.StageAnnounce:
		if d.Take.Failing == "" {
			if err := e.WriteClusterFiles(ctx, false); err != nil {
				e.w.logger.Warn("Could not refresh configmeta after deploy", "Error", err)
			}
		}
		announce.Announce(ctx, e, e.w.announceOptions)
	case plan.StageRollout:
		return stageOutcome{rollout: rollout.Begin(ctx, e.w)}
	case plan.StageRolloutBatch:
		return stageOutcome{rollout: rollout.UpdateBatch(ctx, e.w, d.Batch, d.Take.Batches)}
	case plan.StageRolloutReplace:
		rollout.ReplaceBatch(ctx, e.w, d.Batch[0])
	case plan.StageRolloutPause:
		rollout.Pause(ctx, e.w, "", d.Message)
	case plan.StageRolloutDone:
		rollout.Done(ctx, e.w)
	}
	return stageOutcome{}
}

// setUpLevel sets a level's pending members up, once it wrote the cluster's files
// (configmeta lists the members about to be set up). It reports false if it could not
// write them, having said so.
func (e *executor) setUpLevel(ctx workflow.Context, step plan.Step) bool {
	if e.w.lifecycle {
		if err := e.assignPorts(ctx, step.Roles); err != nil {
			if ctx.Err() == nil {
				e.w.SetPhase(ctx, workflows.PhaseFailed, "could not give members their ports: "+flow.ErrorMessage(err))
			}
			return false
		}
	}
	if err := e.WriteClusterFiles(ctx, step.Level == 0); err != nil {
		// Cancelled by a delete is not a failure; anything else is.
		if ctx.Err() == nil {
			e.w.SetPhase(ctx, workflows.PhaseFailed, "could not write the cluster's files: "+flow.ErrorMessage(err))
		}
		return false
	}
	e.RunStep(ctx, step, e.StepWork(ctx, e.w.spec, step, nil))
	return true
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
	removal := plan.Removal(e.w.state.Levels, replacedToo)
	if e.w.lifecycle {
		removal = plan.GracefulRemoval(e.w.state.Levels, replacedToo)
	}
	for _, step := range removal.Steps {
		if ctx.Err() != nil {
			break
		}
		if e.w.appContract && step.Op == plan.OpDecommission {
			if announce.TellRemoving(ctx, e, e.w.announceOptions, step); ctx.Err() != nil {
				break
			}
		}
		work := e.StepWork(ctx, e.w.spec, step, nil)
		if e.w.lifecycle && len(work) > 0 {
			// Configmeta is refreshed before each removal step that acts, so the members it
			// acts on read themselves leaving, as do their peers.
			if err := e.WriteClusterFiles(ctx, false); err != nil {
				e.w.logger.Warn("Could not refresh configmeta before a removal step", "Error", err)
			}
		}
		e.RunStep(ctx, step, work)
	}
	e.dropRemoved()
	e.w.Touch(ctx)
}

// delete tears the cluster down in reverse dependency order and removes every member. It
// runs on a disconnected context: once started, nothing can stop it halfway and leave debris.
func (e *executor) delete(parent workflow.Context) {
	ctx, _ := workflow.NewDisconnectedContext(parent)
	began := workflow.Now(ctx)
	e.w.state.Operations++
	e.w.SetPhase(ctx, workflows.PhaseDeleting, "")
	e.w.state.Installed = nil // teardown scripts must be there, whatever became of the hosts' files
	if err := e.WriteClusterFiles(ctx, true); err != nil {
		e.w.logger.Warn("Could not reinstall startscripts; teardown scripts may fail", "Error", err)
	}
	// A delete is the removal toward the empty spec: every member, whatever its state.
	e.runPass(ctx, &spec.Cluster{}, plan.Removal(e.w.state.Levels, true), nil)
	// Any reachable host may hold the folder of a member that has left.
	failed := hosts.OnEach(flow.WithQuickActivity(ctx, "remove "+e.w.state.Name), &e.w.state, e.w.setUpElsewhere, e.w.hostsAtOnce(), hosts.ReachableHosts(&e.w.state), func(ctx workflow.Context, _ string) error {
		return workflow.ExecuteActivity(ctx, flow.ActRemoveCluster, e.w.Folder().Key()).Get(ctx, nil)
	})
	if e.w.state.OnHosts {
		hosts.ReportPlacement(ctx, e.w, workflows.ClusterPlacement{Cluster: e.w.state.Name, Gone: true})
	}
	left := e.leftovers(hosts.DescribeFailures(failed))
	metric.Operation(ctx, e.w.state.Name, metric.KindDelete, metric.DeleteResult(left), began)
	e.w.SetPhase(ctx, workflows.PhaseDeleted, left)
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
		if err := e.WriteClusterFiles(ctx, true); err != nil {
			e.w.logger.Warn("Could not write the cluster's files to its restarted hosts; their starts may fail", "Error", err)
		}
	}
	e.runPass(ctx, &e.w.spec, plan.Restart(e.w.state.Levels), restarted)
}

// replacing reports whether any member is waiting for its successor before it goes.
func (e *executor) replacing() bool {
	n, _ := plan.CountAll(e.w.state.Roles, plan.MemberReplacing)
	return n > 0
}
