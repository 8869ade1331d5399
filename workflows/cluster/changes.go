package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// setUpdateHandlers registers resize, apply, cancel, delete and the member-health updates. Each is accepted at any
// moment, including midway through another operation; the handlers only record the new
// desired state and leave the work to run's operation loop.
func (w *clusterWorkflow) setUpdateHandlers(ctx workflow.Context) error {
	handlers := []struct {
		name        string
		handler     any
		validator   any
		description string
	}{
		{workflows.ResizeUpdate, w.onResize, w.validateResize, "Set the member count of roles, e.g. worker=4; returns the new generation"},
		{workflows.ApplyUpdate, w.onApply, w.validateApply, "Change member counts, add or remove roles by a new spec; returns the new generation"},
		{workflows.CancelUpdate, w.onCancel, w.validateCancel, "Stop the operation in progress; running scripts are killed"},
		{workflows.DeleteUpdate, w.onDelete, nil, "Delete the cluster: stop what runs, tear members down and remove them"},
		{workflows.MemberEventUpdate, w.health.onMemberEvent, w.validateMemberEvent, "Report a member's health: {member, event: down|up|gone|unhealthy, reason, source, at}; returns the transition"},
		{workflows.ResumeUpdate, w.health.onResume, w.validateResume, "Lift paused replacement (the meltdown guard) and flapping marks"},
		{workflows.ReconcileUpdate, w.health.onReconcile, w.validateReconcile, "Compare the members with what the backend has now: remove rogues, replace members gone"},
		{workflows.RolloutPauseUpdate, w.onRolloutPause, w.validateRolloutPause, "Pause the rollout in progress before its next batch"},
		{workflows.RolloutResumeUpdate, w.onRolloutResume, w.validateRolloutResume, "Go on with a paused rollout; members whose update failed are tried again"},
		{workflows.RunActionUpdate, w.onRunAction, w.validateRunAction, "Run {action} of a role on {role} or {members} with {params}, {parallel} at once"},
		{workflows.RestartUpdate, w.onRestart, w.validateRestart, "Restart {role} or {members} (default: every role listing restart) by their role's update policy and health gate"},
		{workflows.RetryUpdate, w.onRetry, w.validateRetry, "Run again the failed configure of {members} in config_error (none: every one) and converge"},
		{workflows.RolloutUndoUpdate, w.onRolloutUndo, w.validateRolloutUndo, "Make a new revision equal to {toRevision} (default: the one before) and roll it out to the members that moved"},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.handler, workflow.UpdateHandlerOptions{
			Validator: h.validator, Description: h.description,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (w *clusterWorkflow) onResize(ctx workflow.Context, req workflows.ResizeRequest) (workflows.ChangeResult, error) {
	next := w.resized(req)
	next.Signature = req.Signature
	result := w.change(ctx, next)
	w.growActive(ctx)
	return result, nil
}

// resized is the desired spec with the resize's member counts.
func (c *cluster) resized(req workflows.ResizeRequest) spec.Cluster {
	next := c.spec
	next.Roles = slices.Clone(c.spec.Roles)
	for _, count := range req.Counts {
		for i := range next.Roles {
			if next.Roles[i].Name == count.Role {
				next.Roles[i].Members = count.Members
			}
		}
	}
	return next
}

func (w *clusterWorkflow) onApply(ctx workflow.Context, req workflows.ApplyRequest) (workflows.ChangeResult, error) {
	return w.applySpec(ctx, req.Spec, req.By, ""), nil
}

// applySpec makes next the desired spec, as an apply or a rollout's undo (why says which)
// asks: membership changes as a resize, and a new revision to roll out when what members
// run changed.
func (w *clusterWorkflow) applySpec(ctx workflow.Context, next spec.Cluster, by, why string) workflows.ChangeResult {
	for _, old := range w.spec.Roles {
		if _, kept := next.Role(old.Name); !kept && w.hasMembers(old.Name) {
			w.retiring = append(w.retiring, old)
		}
	}
	// Retiring roles keep their scripts: a delete reinstalls scripts from the spec before
	// it tears members down.
	next.Scripts = maps.Clone(next.Scripts)
	for _, r := range w.retiring {
		if content, ok := w.spec.Scripts[r.ScriptHash]; ok {
			next.Scripts[r.ScriptHash] = content
		}
	}
	previous := w.spec
	result := w.change(ctx, next)
	if result.Changed && rollout.NoteRevision(&w.state, w.spec, previous, by, why, workflow.Now(ctx)) {
		result.Revision = w.state.Revision
	}
	w.growActive(ctx)
	if result.Changed && next.Origin != w.state.Origin {
		w.state.Origin = next.Origin
		if err := workflow.UpsertMemo(ctx, map[string]any{"origin": next.Origin}); err != nil {
			w.logger.Warn("Could not update the origin in the memo", "Error", err)
		}
	}
	return result
}

// NewGeneration starts the next desired generation: every membership change (a resize or
// apply, a replacement, a rogue's removal) is one, and the operation loop converges to it.
// reason says what it is for, in the updating phase's message.
func (c *cluster) NewGeneration(reason string) {
	c.state.Generation++
	c.lastChange = reason
}

// change makes next the desired spec. A change that asks for nothing new keeps the
// generation; any other starts the next one, and members it no longer wants stop setting
// up at once.
func (w *clusterWorkflow) change(ctx workflow.Context, next spec.Cluster) workflows.ChangeResult {
	summary := describeChange(w.spec, next)
	if summary == "" {
		return workflows.ChangeResult{Generation: w.state.Generation, Summary: "no change"}
	}
	w.spec = next
	w.NewGeneration(summary)
	w.state.SpecGeneration = w.state.Generation
	w.noteSignature()
	w.syncDesired()
	w.Touch(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		workflows.ClusterRolesKey.ValueSet(w.spec.RoleNames()), workflows.ClusterMembersKey.ValueSet(int64(w.spec.TotalMembers()))); err != nil {
		w.logger.Warn("Could not upsert the ClusterRoles and ClusterMembers search attributes", "Error", err)
	}
	w.runner.StopUnwanted(ctx, w, w.spec)
	w.logger.Info("Desired state changed", "Generation", w.state.Generation, "Change", summary)
	return workflows.ChangeResult{Generation: w.state.Generation, Changed: true, Summary: summary}
}

// keptSignatures bounds the generations whose signers status shows.
const keptSignatures = 10

// noteSignature records who signed the desired generation's spec, once any spec of the
// cluster was signed (an unsigned cluster's status says nothing of signatures).
func (c *cluster) noteSignature() {
	if c.spec.Signature == nil && len(c.state.Signatures) == 0 {
		return
	}
	entry := workflows.GenerationSignature{Generation: c.state.Generation}
	if c.spec.Signature != nil {
		entry.Key = c.spec.Signature.Key
	}
	c.state.Signatures = slices.Insert(c.state.Signatures, 0, entry)
	c.state.Signatures = c.state.Signatures[:min(len(c.state.Signatures), keptSignatures)]
}

// growActive hands the members a change adds to a role that is configuring now to its
// child, so they start at once rather than when the level ends. They are listed in
// configmeta first, as every member is before it configures.
func (w *clusterWorkflow) growActive(ctx workflow.Context) {
	type growth struct {
		op    *role.Operation
		role  string
		added []plan.Member
	}
	var grown []growth
	for _, name := range w.runner.ConfiguringRoles() {
		op := w.runner.Configuring(name)
		if rs := w.state.Role(name); rs != nil {
			added := w.addPendingTo(rs, workflow.Now(ctx))
			if w.bounded {
				added = added[:min(len(added), w.runner.Room(op))]
			}
			if len(added) > 0 {
				grown = append(grown, growth{op, name, added})
			}
		}
	}
	if len(grown) == 0 {
		return
	}
	w.Touch(ctx)
	if err := w.writeClusterFiles(ctx, false); err != nil {
		w.logger.Warn("Could not list new members in configmeta; they start once the running level ends", "Error", err)
		return
	}
	for _, g := range grown {
		if !w.runner.InProgress(g.role, g.op) {
			continue // the child ended meanwhile; the operation sets them up itself
		}
		rs := w.state.Role(g.role)
		for i := range g.added {
			rs.Member(g.added[i].Name).KnowsUpTo = w.state.ConfigMetaVersion
			g.added[i].KnowsUpTo = w.state.ConfigMetaVersion
		}
		w.runner.Grow(ctx, g.op, g.added)
	}
}

// onCancel stops the operation in progress. Its running scripts are killed, and the
// cluster settles in phase canceled.
func (w *clusterWorkflow) onCancel(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if w.cancelOperation != nil { // the validator ran in this same workflow task
		w.cancelRequested = true
		w.cancelOperation()
	}
	return w.snapshot(), nil
}

// onDelete accepts a delete in any phase. A second delete while one runs changes nothing.
func (w *clusterWorkflow) onDelete(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if !w.deleteRequested {
		w.deleteRequested = true
		if w.cancelOperation != nil {
			w.cancelOperation()
		}
	}
	return w.snapshot(), nil
}

func (c *cluster) hasMembers(role string) bool {
	rs := c.state.Role(role)
	return rs != nil && slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State != plan.MemberDeleted })
}

// describeChange sums up how next differs from the current spec, e.g. "worker 2 → 4, +edge
// (2)"; it is empty when nothing that matters changed.
func describeChange(current, next spec.Cluster) string {
	var parts []string
	for _, r := range next.Roles {
		old, ok := current.Role(r.Name)
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("+%s (%d)", r.Name, r.Members))
		case old.Members != r.Members:
			parts = append(parts, fmt.Sprintf("%s %d → %d", r.Name, old.Members, r.Members))
		case !roleEqual(old, r):
			parts = append(parts, r.Name+" settings")
		}
	}
	for _, r := range current.Roles {
		if _, ok := next.Role(r.Name); !ok {
			parts = append(parts, "-"+r.Name)
		}
	}
	if current.ReconcileEvery != next.ReconcileEvery {
		parts = append(parts, "reconcileEvery")
	}
	return strings.Join(parts, ", ")
}

func roleEqual(a, b spec.Role) bool {
	return len(plan.Reconfigured(a, b)) == 0 && a.MaxInFlight == b.MaxInFlight && a.Startscript == b.Startscript && a.Health == b.Health &&
		a.Update == b.Update
}
