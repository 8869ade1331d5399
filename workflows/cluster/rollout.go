package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A rollout moves the members of the roles an apply changed to the new revision, role by
// role in dependency order: canaries first, alone, then batches of the role's maxInFlight,
// never taking the role past its maxUnavailable. Each updated member is watched before the
// next batch starts; a down or unhealthy report about it, its host lost, or a failed
// upgrade pauses the rollout, and members not yet moved stay on the revision they ran. A
// rollout is part of the pass that converges to its generation, so a resize, a cancel, a
// delete or maintenance act on it as on any operation.

// Bounds of what revisions keep: the records listed, and the settings kept for undo.
// Kept settings ride in the state continue-as-new carries, beside the spec: their roles
// (as JSON, envs included) and the scripts the spec no longer has are held under
// keptSettingsBytes in all, so that the carried state stays under Temporal's payload limit
// whatever the spec holds.
const (
	keptRevisions        = 20
	keptRevisionSettings = 5
	keptSettingsBytes    = 128 << 10
)

// initRevisions starts the revisions of a cluster that has none: a new one, or one from
// before revisions, whose members all run revision 1.
func (c *cluster) initRevisions(at time.Time) {
	if c.state.Revision > 0 {
		return
	}
	c.state.Revision = 1
	for _, r := range c.spec.Roles {
		if rs := c.state.Role(r.Name); rs != nil {
			rs.NoteRevision(1, plan.SettingsDigest(r))
		}
	}
	c.state.Revisions = []workflows.RevisionRecord{{Revision: workflows.Revision{Number: 1, At: at, Change: "deployed", Digest: specDigest(c.spec)}}}
}

// noteRevision makes the next revision when the desired spec's roles run other settings
// than previous's, and starts rolling it out; or when only their health policies changed,
// which take effect at once and move no member.
func (c *cluster) noteRevision(previous spec.Cluster, by, why string, at time.Time) bool {
	changed := plan.ChangedRoles(previous, c.spec)
	var parts []string
	for _, r := range c.spec.Roles {
		old, ok := previous.Role(r.Name)
		if !ok {
			continue
		}
		fields := settingsChanged(old, r)
		if old.Health != r.Health {
			fields = append(fields, "health")
		}
		if len(fields) > 0 {
			parts = append(parts, r.Name+": "+strings.Join(fields, ", "))
		}
	}
	if len(parts) == 0 {
		return false
	}
	c.state.Revision++
	for _, name := range changed {
		r, _ := c.spec.Role(name)
		if rs := c.state.Role(name); rs != nil {
			rs.NoteRevision(c.state.Revision, plan.SettingsDigest(r))
		}
	}
	change := strings.Join(parts, "; ")
	if why != "" {
		change = why + " (" + change + ")"
	}
	// The revision being left is kept now, with what it ran; the current one is the spec.
	if n := len(c.state.Revisions); n > 0 {
		c.state.Revisions[n-1].Roles = settingsOf(previous)
	}
	c.state.Revisions = append(c.state.Revisions, workflows.RevisionRecord{
		Revision: workflows.Revision{Number: c.state.Revision, At: at, By: spec.Clip(by, 256), Change: spec.Clip(change, 1024), Digest: specDigest(c.spec)},
	})
	if n := len(c.state.Revisions); n > keptRevisions {
		c.state.Revisions = slices.Clone(c.state.Revisions[n-keptRevisions:])
	}
	c.keepRevisionSettings(previous.Scripts)
	if len(changed) > 0 {
		c.startRollout(&workflows.RolloutRecord{Revision: c.state.Revision, Started: at})
	}
	return true
}

// settingsChanged names what differs between two versions of a role that a member runs.
func settingsChanged(old, next spec.Role) []string {
	changed := slices.DeleteFunc(plan.Reconfigured(old, next), func(field string) bool {
		return field == "dependsOn" || field == "cardinality"
	})
	return changed
}

// settingsOf is a spec's roles as a revision keeps them.
func settingsOf(c spec.Cluster) []spec.Role { return slices.Clone(c.Roles) }

// specDigest names every role's settings at once, health policies included.
func specDigest(c spec.Cluster) string {
	h := sha256.New()
	for _, r := range c.Roles {
		fmt.Fprintf(h, "%s=%s %+v\n", r.Name, plan.SettingsDigest(r), r.Health)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// keepRevisionSettings keeps the settings of the newest earlier revisions that fit the
// bounds, with the scripts they need that the spec does not hold (from those kept before,
// or from left, the spec just left), and drops the others'.
func (c *cluster) keepRevisionSettings(left map[string]string) {
	scripts := map[string]string{}
	budget, kept := keptSettingsBytes, 0
	for i := len(c.state.Revisions) - 1; i >= 0; i-- {
		rec := &c.state.Revisions[i]
		if rec.Roles == nil {
			continue
		}
		cost, needs := workflows.PayloadSize(rec.Roles), map[string]string{}
		for _, r := range rec.Roles {
			if _, inSpec := c.spec.Scripts[r.ScriptHash]; inSpec {
				continue
			}
			if _, have := scripts[r.ScriptHash]; have {
				continue
			}
			content, ok := c.state.RevisionScripts[r.ScriptHash]
			if !ok {
				content, ok = left[r.ScriptHash]
			}
			if !ok {
				cost = budget + 1 // its script is gone: it cannot be kept
				break
			}
			needs[r.ScriptHash] = content
			cost += len(content)
		}
		if kept >= keptRevisionSettings || cost > budget {
			rec.Roles = nil
			continue
		}
		kept++
		budget -= cost
		maps.Copy(scripts, needs)
	}
	c.state.RevisionScripts = scripts
	if len(scripts) == 0 {
		c.state.RevisionScripts = nil
	}
}

// revisionRecordOf finds a revision still listed.
func (c *cluster) revisionRecordOf(number int) *workflows.RevisionRecord {
	for i := range c.state.Revisions {
		if c.state.Revisions[i].Number == number {
			return &c.state.Revisions[i]
		}
	}
	return nil
}

// undoSpec is the desired spec with every role's settings as they were at revision to:
// member counts, placement and dependencies stay as they are now.
func (c *cluster) undoSpec(to int) (spec.Cluster, error) {
	if to == 0 {
		to = c.state.Revision - 1
	}
	rec := c.revisionRecordOf(to)
	switch {
	case to < 1 || to >= c.state.Revision:
		return spec.Cluster{}, flow.Refused(apperr.Invalid, "rollout undo refused: cluster %s is at revision %d; undo goes back to an earlier one (see `clusterflow revisions %s`)", c.state.Name, c.state.Revision, c.state.Name)
	case rec == nil:
		return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: revision %d of cluster %s is no longer listed (the last %d are); apply its spec file again", to, c.state.Name, keptRevisions)
	case rec.Roles == nil:
		return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: the settings of revision %d are no longer kept (the newest %d are, within %d KiB of envs and scripts); apply its spec file again", to, keptRevisionSettings, keptSettingsBytes>>10)
	}
	next := c.spec
	next.Roles = slices.Clone(c.spec.Roles)
	next.Scripts = maps.Clone(c.spec.Scripts)
	next.Signature = nil
	for i, r := range next.Roles {
		old := plan.Named(rec.Roles, r.Name, func(r *spec.Role) string { return r.Name })
		if old == nil {
			continue // a role added since: nothing to go back to
		}
		r.Startscript, r.ScriptHash, r.Env, r.Events = old.Startscript, old.ScriptHash, old.Env, old.Events
		r.Timeout, r.HeartbeatTimeout, r.Health = old.Timeout, old.HeartbeatTimeout, old.Health
		next.Roles[i] = r
		if _, ok := next.Scripts[r.ScriptHash]; !ok {
			content, kept := c.state.RevisionScripts[r.ScriptHash]
			if !kept {
				return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: the startscript role %s ran at revision %d is no longer kept; apply its spec file again", r.Name, to)
			}
			next.Scripts[r.ScriptHash] = content
		}
	}
	return next, nil
}

// Handlers, registered with the other updates (changes.go).

// startRollout makes ro the rollout in progress. A rolling restart it replaces is dropped:
// a new revision's members restart with it anyway.
func (c *cluster) startRollout(ro *workflows.RolloutRecord) {
	for i := range c.state.Roles {
		for j := range c.state.Roles[i].Members {
			c.state.Roles[i].Members[j].RestartDue = false
		}
	}
	c.state.Rollout = ro
}

func (c *cluster) rolloutRunning() bool {
	ro := c.state.Rollout
	return ro != nil && ro.Ended.IsZero()
}

func (c *cluster) validateRolloutPause() error {
	if err := c.refuseChange("rollout pause"); err != nil {
		return err
	}
	switch ro := c.state.Rollout; {
	case !c.rolloutRunning():
		return flow.Refused(apperr.Conflict, "rollout pause refused: cluster %s has no rollout in progress", c.state.Name)
	case ro.Paused != "":
		return flow.Refused(apperr.Conflict, "rollout pause refused: the %s is already paused: %s", ro.What(), ro.Paused)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutPause(ctx workflow.Context) (workflows.RolloutStatus, error) {
	w.state.Rollout.Paused, w.state.Rollout.Member, w.state.Rollout.PausedAt = "paused by an operator", "", workflow.Now(ctx)
	w.touch(ctx)
	return w.rolloutAnswer(), nil
}

func (c *cluster) validateRolloutResume() error {
	if err := c.refuseChange("rollout resume"); err != nil {
		return err
	}
	if !c.rolloutRunning() || c.state.Rollout.Paused == "" {
		return flow.Refused(apperr.Conflict, "rollout resume refused: cluster %s has no paused rollout", c.state.Name)
	}
	return nil
}

func (w *clusterWorkflow) onRolloutResume(ctx workflow.Context) (workflows.RolloutStatus, error) {
	ro := w.state.Rollout
	ro.Paused, ro.Member, ro.Tripped, ro.TrippedBy = "", "", "", ""
	w.newGeneration(ro.What() + " resumed")
	w.touch(ctx)
	return w.rolloutAnswer(), nil
}

func (c *cluster) validateRolloutUndo(req workflows.UndoRequest) error {
	if err := c.refuseChange("rollout undo"); err != nil {
		return err
	}
	next, err := c.undoSpec(req.ToRevision)
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
	next, err := w.undoSpec(to)
	if err != nil {
		return workflows.RolloutStatus{}, err
	}
	w.applySpec(ctx, next, req.By, fmt.Sprintf("undo to revision %d", to))
	return w.rolloutAnswer(), nil
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
	w.touch(ctx)
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
		_, m := w.findMember(failed[0])
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
	w.runner.runLevel(ctx, op, work)
	var failed []string
	for _, name := range names {
		rs, m := w.findMember(name)
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
	w.touch(ctx)
	if ctx.Err() != nil {
		return false
	}
	if len(failed) > 0 {
		_, m := w.findMember(failed[0])
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
	closed := func() bool { return w.gateClosed(names) || ro.Paused != "" }
	var minWatch, maxWatch time.Duration
	for _, p := range policies {
		low, high := p.Watch()
		minWatch, maxWatch = max(minWatch, low), max(maxWatch, high)
	}
	w.touch(ctx)
	if minWatch > 0 {
		if _, err := workflow.AwaitWithTimeout(ctx, minWatch, closed); err != nil {
			return ""
		}
	}
	if !closed() && maxWatch > minWatch {
		if _, err := workflow.AwaitWithTimeout(ctx, maxWatch-minWatch, func() bool { return closed() || w.allReportedUp(names, started) }); err != nil {
			return ""
		}
	}
	return ro.Tripped
}

// gateClosed says whether anything about the watched members halts the rollout, and
// records why: a health report against one, or one no longer ready (its host lost, say).
func (c *cluster) gateClosed(names []string) bool {
	ro := c.state.Rollout
	if ro.Tripped != "" {
		return true
	}
	for _, name := range names {
		_, m := c.findMember(name)
		switch {
		case m == nil || m.State == plan.MemberDeleted:
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("%s left during its watch", name), name
		case m.Host != "" && !c.reachable(m.Host):
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("the host of %s, %s, was lost during its watch", name, m.Host), name
		case m.State != plan.MemberReady:
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("%s went %s during its watch", name, m.State), name
		}
		if ro.Tripped != "" {
			return true
		}
	}
	return false
}

// noteHealthReport closes the gate on a down, gone or unhealthy report about a watched
// member, whatever the state machine does with it.
func (c *cluster) noteHealthReport(name string, ev workflows.MemberEvent) {
	ro := c.state.Rollout
	if ro == nil || ro.Tripped != "" || !slices.Contains(ro.Watching, name) {
		return
	}
	switch ev.Event {
	case plan.HealthDown, plan.HealthGone, plan.HealthUnhealthy:
		why := fmt.Sprintf("%s was reported %s during its watch", name, ev.Event)
		if ev.Source != "" {
			why += " by " + ev.Source
		}
		if ev.Reason != "" {
			why += ": " + ev.Reason
		}
		ro.Tripped, ro.TrippedBy = why, name
	}
}

// allReportedUp says whether every watched member was reported up since its update.
func (c *cluster) allReportedUp(names []string, since time.Time) bool {
	for _, name := range names {
		_, m := c.findMember(name)
		if m == nil || m.Health == nil || m.Health.LastReport != plan.HealthUp || len(m.Health.Transitions) == 0 {
			return false
		}
		if last := m.Health.Transitions[len(m.Health.Transitions)-1]; last.At.Before(since) {
			return false
		}
	}
	return true
}

// pauseRollout stops the rollout where it stands, naming why.
func (w *clusterWorkflow) pauseRollout(ctx workflow.Context, member, why string) {
	ro := w.state.Rollout
	ro.Paused, ro.Member, ro.PausedAt = spec.Clip(why, workflows.MaxDetail), member, workflow.Now(ctx)
	w.logger.Warn("Rollout paused", "Rollout", ro.What(), "Member", member, "Reason", why)
	w.touch(ctx)
}

// rolloutPhase is the phase a pass that reached its generation ends in while the rollout
// is paused.
func (c *cluster) rolloutPausedMessage() string {
	ro := c.state.Rollout
	if ro.Restart {
		return fmt.Sprintf("%s: %s; `clusterflow rollout resume %s` goes on", ro.What(), ro.Paused, c.state.Name)
	}
	return fmt.Sprintf("%s: %s; `clusterflow rollout resume %s` goes on, `clusterflow rollout undo %s` goes back", ro.What(), ro.Paused, c.state.Name, c.state.Name)
}

// rolloutStatus is the latest rollout's progress, or nil when there was none.
func (c *cluster) rolloutStatus() *workflows.RolloutStatus {
	ro := c.state.Rollout
	if ro == nil {
		return nil
	}
	out := &workflows.RolloutStatus{Revision: ro.Revision, Restart: ro.Restart, State: workflows.RolloutRunning, Started: ro.Started, Ended: ro.Ended, Paused: ro.Paused, PausedAt: ro.PausedAt, Member: ro.Member}
	switch {
	case !ro.Ended.IsZero():
		out.State = workflows.RolloutDone
	case ro.Paused != "":
		out.State = workflows.RolloutPaused
	}
	for _, role := range plan.RolloutRoles(c.state.Levels, c.state.Roles) {
		rs := c.state.Role(role)
		if ro.Moved[role] == 0 && len(ro.Due(*rs)) == 0 && (ro.Restart || rs.Current() != ro.Revision) {
			continue // not part of this rollout
		}
		def, _ := c.spec.Role(role)
		rst := workflows.RolloutRoleStatus{Role: role, Revision: rs.Current(), Strategy: def.StrategyFor(), Policy: def.Update.String()}
		outdated := ro.Due(*rs)
		if ro.Restart {
			rst.Updated = ro.Moved[role]
		}
		for _, m := range rs.Members {
			isOutdated := slices.ContainsFunc(outdated, func(o plan.Member) bool { return o.Name == m.Name })
			switch {
			case m.State == plan.MemberDeleted:
			case slices.Contains(ro.Watching, m.Name):
				rst.InWatch = append(rst.InWatch, m.Name)
			case slices.Contains(ro.Failed, m.Name):
				if len(rst.Failed) < workflows.ReportNames {
					rst.Failed = append(rst.Failed, m.Name)
				}
			case isOutdated:
				rst.Waiting++
			case m.State.SetUp() && !ro.Restart:
				rst.Updated++
			}
		}
		out.Roles = append(out.Roles, rst)
	}
	return out
}

// rolloutAnswer is what the rollout updates return: the latest rollout's progress, or an
// empty one when a change made none (an undo that moves no member).
func (c *cluster) rolloutAnswer() workflows.RolloutStatus {
	if ro := c.rolloutStatus(); ro != nil {
		return *ro
	}
	return workflows.RolloutStatus{Revision: c.state.Revision, State: workflows.RolloutDone}
}

// revisionsList is the revisions as `clusterflow revisions` lists them, oldest first.
func (c *cluster) revisionsList() []workflows.Revision {
	out := make([]workflows.Revision, len(c.state.Revisions))
	for i, rec := range c.state.Revisions {
		out[i] = rec.Revision
		out[i].Kept = rec.Roles != nil || rec.Number == c.state.Revision
	}
	return out
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
	w.startRollout(&workflows.RolloutRecord{Revision: w.state.Revision, Restart: true, Started: workflow.Now(ctx)})
	total := 0
	for _, role := range slices.Sorted(maps.Keys(targets)) {
		rs := w.state.Role(role)
		for _, name := range targets[role] {
			rs.Member(name).RestartDue = true
			total++
		}
	}
	w.newGeneration(fmt.Sprintf("rolling restart of %d members", total))
	w.touch(ctx)
	return w.rolloutAnswer(), nil
}
