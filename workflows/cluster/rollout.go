package cluster

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// A rollout moves the members of the roles an apply changed to the new revision, role by
// role in dependency order: canaries first, alone, then batches of the role's maxInFlight,
// never taking the role past its maxUnavailable. Each updated member is watched before the
// next batch starts; a down or unhealthy report about it, its host lost, or a failed
// upgrade pauses the rollout, and members not yet moved stay on the revision they ran. A
// rollout is part of the pass that converges to its generation, so a resize, a cancel, a
// delete or maintenance act on it as on any operation.

// Handlers, registered with the other updates (changes.go).

func (c *cluster) validateRolloutPause() error {
	if err := c.refuseChange("rollout pause"); err != nil {
		return err
	}
	switch ro := c.state.Rollout; {
	case !rollout.Running(&c.state):
		return flow.Refused(apperr.Conflict, "rollout pause refused: cluster %s has no rollout in progress", c.state.Name)
	case ro.Paused != "":
		return flow.Refused(apperr.Conflict, "rollout pause refused: the %s is already paused: %s", ro.What(), ro.Paused)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutPause(ctx workflow.Context) (workflows.RolloutStatus, error) {
	w.state.Rollout.Paused, w.state.Rollout.Member, w.state.Rollout.PausedAt = "paused by an operator", "", workflow.Now(ctx)
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}

func (c *cluster) validateRolloutResume() error {
	if err := c.refuseChange("rollout resume"); err != nil {
		return err
	}
	if !rollout.Running(&c.state) || c.state.Rollout.Paused == "" {
		return flow.Refused(apperr.Conflict, "rollout resume refused: cluster %s has no paused rollout", c.state.Name)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutResume(ctx workflow.Context) (workflows.RolloutStatus, error) {
	ro := w.state.Rollout
	ro.Paused, ro.Member, ro.Tripped, ro.TrippedBy = "", "", "", ""
	w.newGeneration(ro.What() + " resumed")
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}

func (c *cluster) validateRolloutUndo(req workflows.UndoRequest) error {
	if err := c.refuseChange("rollout undo"); err != nil {
		return err
	}
	next, err := rollout.UndoSpec(&c.state, c.spec, req.ToRevision)
	if err != nil {
		return err
	}
	return c.validateApply(workflows.ApplyRequest{Spec: next})
}

func (w *clusterWorkflow) onRolloutUndo(ctx workflow.Context, req workflows.UndoRequest) (workflows.RolloutStatus, error) {
	to := req.ToRevision
	if to == 0 {
		to = w.state.Revision - 1
	}
	next, err := rollout.UndoSpec(&w.state, w.spec, to)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	w.applySpec(ctx, next, req.By, fmt.Sprintf("undo to revision %d", to))
	return rollout.Answer(&w.state, w.spec), nil
}

// The rollout pass.

// rollOut moves the outdated members of each role to its current revision, role by role in
// dependency order. It returns whether the desired generation changed meanwhile, which
// starts the pass again; a pause, a cancel or a delete ends it.
func (w *clusterWorkflow) rollOut(ctx workflow.Context, changed func() bool) (again bool) {
	ro := w.state.Rollout
	if ro == nil || !ro.Ended.IsZero() || ro.Paused != "" {
		return false
	}
	roles := plan.RolloutRoles(w.state.Levels, w.state.Roles)
	pending := len(ro.Replacing) > 0 || slices.ContainsFunc(roles, func(role string) bool { return len(ro.Due(*w.state.Role(role))) > 0 })
	if !pending {
		ro.Ended, ro.Failed, ro.Watching = workflow.Now(ctx), nil, nil
		return false
	}
	if workflow.GetVersion(ctx, change.Rollouts, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	w.setPhase(ctx, workflows.PhaseRollingOut, ro.What())
	if len(ro.Replacing) > 0 && !w.replacedBatchDone(ctx) {
		return changed()
	}
	batches := 0
	for _, group := range plan.RolloutGroups(w.state.Levels, w.state.Roles, w.spec, ro.Restart) {
		for {
			switch {
			case ctx.Err() != nil || w.heldByMaintenance(ctx):
				return false
			case changed():
				return true
			case ro.Paused != "":
				return false
			}
			var work []rolloutStep
			for _, role := range group {
				def, ok := w.spec.Role(role)
				rs := w.state.Role(role)
				due := ro.Due(*rs)
				if !ok || len(due) == 0 {
					continue
				}
				batch, why := plan.NextBatch(def, *rs, due, ro.Moved[role])
				if len(batch.Members) == 0 {
					w.pauseRollout(ctx, "", fmt.Sprintf("role %s: %s", role, why))
					return false
				}
				work = append(work, rolloutStep{def, batch})
			}
			if len(work) == 0 {
				break
			}
			batches++
			if def := work[0].def; len(work) == 1 && def.StrategyFor() == spec.Replace && !ro.Restart {
				// The next pass sets the successors up, removes the members they replace and
				// tells the others; the rollout goes on from there.
				w.replaceBatch(ctx, def, work[0].batch)
				return true
			}
			if !w.updateBatches(ctx, work, batches) {
				return changed()
			}
		}
	}
	ro.Ended, ro.Watching = workflow.Now(ctx), nil
	return false
}

// replaceBatch starts replacing a batch's members with members set up with the new
// revision: each is marked as being replaced, as the health machine marks one, and a new
// generation's pass does the rest.
func (w *clusterWorkflow) replaceBatch(ctx workflow.Context, def spec.Role, batch plan.RolloutBatch) {
	ro := w.state.Rollout
	rs := w.state.Role(def.Name)
	ro.Replacing, ro.ReplacingRole = nil, def.Name
	for _, old := range batch.Members {
		m := rs.Member(old.Name)
		m.State, m.Leaving, m.Since = plan.MemberReplacing, true, workflow.Now(ctx)
		m.Detail = fmt.Sprintf("being replaced by the %s", ro.What())
		ro.Replacing = append(ro.Replacing, old.Name)
	}
	w.newGeneration(fmt.Sprintf("%s: replace %s", ro.What(), spec.Some(ro.Replacing, refusalNames)))
	w.Touch(ctx)
}

// keepReplacedOnFailure is what a replace rollout does when a successor it set up failed:
// the rollout pauses, and the member the successor was to replace stays, ready again,
// while the failed successor leaves. It reports whether there was such a successor.
func (w *clusterWorkflow) keepReplacedOnFailure(ctx workflow.Context) bool {
	ro := w.state.Rollout
	if ro == nil || len(ro.Replacing) == 0 {
		return false
	}
	rs := w.state.Role(ro.ReplacingRole)
	var failed []string
	detail := ""
	for i := range rs.Members {
		s := &rs.Members[i]
		if s.State != plan.MemberConfigError || !slices.Contains(ro.Replacing, s.Replaces) {
			continue
		}
		if old := rs.Member(s.Replaces); old != nil && old.State == plan.MemberReplacing {
			old.State, old.Leaving, old.ReplacedBy = plan.MemberReady, false, ""
			old.Detail = fmt.Sprintf("kept: its replacement %s failed", s.Name)
		}
		ro.Replacing = slices.DeleteFunc(ro.Replacing, func(n string) bool { return n == s.Replaces })
		s.Leaving, s.Replaces = true, ""
		failed = append(failed, s.Name)
		if detail == "" {
			detail = s.Detail
		}
	}
	if len(failed) == 0 {
		return false
	}
	w.pauseRollout(ctx, failed[0], fmt.Sprintf("the replacement %s (revision %d) failed to set up, and the members it was to replace stay: %s", spec.Some(failed, refusalNames), ro.Revision, detail))
	return true
}

// replacedBatchDone checks the batch being replaced once the passes since set its
// successors up: a successor that failed pauses the rollout, and the others are watched.
// It reports whether the rollout goes on.
func (w *clusterWorkflow) replacedBatchDone(ctx workflow.Context) bool {
	ro := w.state.Rollout
	rs := w.state.Role(ro.ReplacingRole)
	def, _ := w.spec.Role(ro.ReplacingRole)
	var successors, failed []string
	for _, m := range rs.Members {
		if m.State == plan.MemberDeleted || !slices.Contains(ro.Replacing, m.Replaces) {
			continue
		}
		successors = append(successors, m.Name)
		if m.State != plan.MemberReady {
			failed = append(failed, m.Name)
		}
	}
	switch {
	case len(failed) > 0:
		_, m := w.state.FindMember(failed[0])
		w.pauseRollout(ctx, failed[0], fmt.Sprintf("the replacement %s (revision %d) is %s: %s", spec.Some(failed, refusalNames), ro.Revision, m.State, m.Detail))
		return false
	case len(successors) < len(ro.Replacing):
		w.pauseRollout(ctx, "", fmt.Sprintf("%d of the members replacing %s are missing", len(ro.Replacing)-len(successors), spec.Some(ro.Replacing, refusalNames)))
		return false
	}
	if why := w.watch(ctx, []spec.Update{def.Update}, successors); why != "" {
		w.pauseRollout(ctx, ro.TrippedBy, why)
		return false
	}
	if ro.Moved == nil {
		ro.Moved = map[string]int{}
	}
	ro.Moved[ro.ReplacingRole] += len(successors)
	ro.Replacing, ro.ReplacingRole = nil, ""
	return ctx.Err() == nil
}

// rolloutStep is one role's batch of a rollout step.
type rolloutStep struct {
	def   spec.Role
	batch plan.RolloutBatch
}

// updateBatches updates one batch of each role of a group at once, and watches them. It reports whether the rollout goes on.
func (w *clusterWorkflow) updateBatches(ctx workflow.Context, batches []rolloutStep, n int) bool {
	ro := w.state.Rollout
	op, event := plan.OpUpgrade, spec.EventUpgrade
	if ro.Restart {
		op, event = plan.OpRestart, spec.EventRestart
	}
	var work []plan.RoleWork
	var names []string
	for _, b := range batches {
		label := fmt.Sprintf("b%d", n)
		if b.batch.Canary {
			label = fmt.Sprintf("canary%d", n)
		}
		// The role's own maxInFlight, when it has one, still bounds the scripts run at once.
		work = append(work, plan.RoleWork{Role: b.def.Name, Members: b.batch.Members, Batch: label})
		for _, m := range b.batch.Members {
			names = append(names, m.Name)
		}
	}
	w.runner.RunLevel(ctx, w, op, work)
	var failed []string
	for _, name := range names {
		rs, m := w.state.FindMember(name)
		if m == nil {
			continue
		}
		if m.State == plan.MemberConfigError && m.Event == event {
			// A failed upgrade leaves the member running what it can: the rollout pauses, and
			// the member is not replaced for it.
			m.State = plan.MemberReady
			failed = append(failed, name)
			if !slices.Contains(ro.Failed, name) {
				ro.Failed = append(ro.Failed, name)
			}
			continue
		}
		ro.Failed = slices.DeleteFunc(ro.Failed, func(f string) bool { return f == name })
		if m.Event == event && m.State == plan.MemberReady {
			m.RestartDue = false
			if ro.Moved == nil {
				ro.Moved = map[string]int{}
			}
			ro.Moved[rs.Name]++
		}
	}
	w.Touch(ctx)
	if ctx.Err() != nil {
		return false
	}
	if len(failed) > 0 {
		_, m := w.state.FindMember(failed[0])
		what := fmt.Sprintf("the upgrade of %s to revision %d", spec.Some(failed, refusalNames), ro.Revision)
		if ro.Restart {
			what = "the restart of " + spec.Some(failed, refusalNames)
		}
		w.pauseRollout(ctx, failed[0], fmt.Sprintf("%s failed: %s", what, m.Detail))
		return false
	}
	policies := make([]spec.Update, len(batches))
	for i, b := range batches {
		policies[i] = b.def.Update
	}
	if why := w.watch(ctx, policies, names); why != "" {
		w.pauseRollout(ctx, ro.TrippedBy, why)
		return false
	}
	return ctx.Err() == nil
}

// watch keeps an eye on a batch just updated: it ends after its roles' longest watch (at
// its least, once every member reported up since; at its most otherwise), or at once when
// the health gate closes, with why.
func (w *clusterWorkflow) watch(ctx workflow.Context, policies []spec.Update, names []string) string {
	ro := w.state.Rollout
	ro.Watching, ro.Tripped, ro.TrippedBy = names, "", ""
	defer func() { ro.Watching = nil }()
	started := workflow.Now(ctx)
	closed := func() bool {
		return rollout.GateClosed(&w.state, names, func(host string) bool { return hosts.Reachable(&w.state, host) }) || ro.Paused != ""
	}
	var minWatch, maxWatch time.Duration
	for _, p := range policies {
		low, high := p.Watch()
		minWatch, maxWatch = max(minWatch, low), max(maxWatch, high)
	}
	w.Touch(ctx)
	if minWatch > 0 {
		if _, err := workflow.AwaitWithTimeout(ctx, minWatch, closed); err != nil {
			return ""
		}
	}
	if !closed() && maxWatch > minWatch {
		if _, err := workflow.AwaitWithTimeout(ctx, maxWatch-minWatch, func() bool { return closed() || rollout.AllReportedUp(&w.state, names, started) }); err != nil {
			return ""
		}
	}
	return ro.Tripped
}

// pauseRollout stops the rollout where it stands, naming why.
func (w *clusterWorkflow) pauseRollout(ctx workflow.Context, member, why string) {
	ro := w.state.Rollout
	ro.Paused, ro.Member, ro.PausedAt = spec.Clip(why, workflows.MaxDetail), member, workflow.Now(ctx)
	w.logger.Warn("Rollout paused", "Rollout", ro.What(), "Member", member, "Reason", why)
	w.Touch(ctx)
}

func (c *cluster) validateRestart(req workflows.RestartRequest) error {
	_, err := c.restartTargets(req)
	return err
}

func (w *clusterWorkflow) onRestart(ctx workflow.Context, req workflows.RestartRequest) (workflows.RolloutStatus, error) {
	targets, err := w.restartTargets(req)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	rollout.Start(&w.state, &workflows.RolloutRecord{Revision: w.state.Revision, Restart: true, Started: workflow.Now(ctx)})
	total := 0
	for _, role := range slices.Sorted(maps.Keys(targets)) {
		rs := w.state.Role(role)
		for _, name := range targets[role] {
			rs.Member(name).RestartDue = true
			total++
		}
	}
	w.newGeneration(fmt.Sprintf("rolling restart of %d members", total))
	w.Touch(ctx)
	return rollout.Answer(&w.state, w.spec), nil
}
