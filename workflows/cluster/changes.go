package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// setUpdateHandlers registers resize, apply, cancel, delete and the member-health updates. Each is accepted at any
// moment, including midway through another operation; the handlers only record the new
// desired state and leave the work to run's operation loop.
func (u *updates) setUpdateHandlers(ctx workflow.Context) error {
	handlers := []struct {
		name        string
		handler     any
		validator   any
		description string
	}{
		{workflows.ResizeUpdate, u.onResize, u.validateResize, "Set the member count of roles, e.g. worker=4; returns the new generation"},
		{workflows.ApplyUpdate, u.onApply, u.validateApply, "Change member counts, add or remove roles by a new spec; returns the new generation"},
		{workflows.CancelUpdate, u.onCancel, u.validateCancel, "Stop the operation in progress; running scripts are killed"},
		{workflows.DeleteUpdate, u.onDelete, nil, "Delete the cluster: stop what runs, tear members down and remove them"},
		{workflows.MemberEventUpdate, func(ctx workflow.Context, ev workflows.MemberEvent) (workflows.MemberEventResult, error) {
			return u.w.health.Report(ctx, u.w, ev), nil
		}, u.validateMemberEvent, "Report a member's health: {member, event: down|up|gone|unhealthy, reason, source, at}; returns the transition"},
		{workflows.ResumeUpdate, func(ctx workflow.Context) (workflows.ResumeResult, error) { return u.w.health.Resume(ctx, u.w), nil }, u.validateResume, "Lift paused replacement (the meltdown guard) and flapping marks"},
		{workflows.ReconcileUpdate, func(ctx workflow.Context) (workflows.ReconcileReport, error) {
			return u.w.health.Reconcile(ctx, u.w), nil
		}, u.validateReconcile, "Compare the members with what the backend has now: remove rogues, replace members gone"},
		{workflows.RolloutPauseUpdate, u.onRolloutPause, u.validateRolloutPause, "Pause the rollout in progress before its next batch"},
		{workflows.RolloutResumeUpdate, u.onRolloutResume, u.validateRolloutResume, "Go on with a paused rollout; members whose update failed are tried again"},
		{workflows.RunActionUpdate, u.onRunAction, u.validateRunAction, "Run {action} of a role on {role} or {members} with {params}, {parallel} at once"},
		{workflows.RestartUpdate, u.onRestart, u.validateRestart, "Restart {role} or {members} (default: every role listing restart) by their role's update policy and health gate"},
		{workflows.RetryUpdate, u.onRetry, u.validateRetry, "Run again the failed configure of {members} in config_error (none: every one) and converge"},
		{workflows.RolloutUndoUpdate, u.onRolloutUndo, u.validateRolloutUndo, "Make a new revision equal to {toRevision} (default: the one before) and roll it out to the members that moved"},
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

func (u *updates) onResize(ctx workflow.Context, req workflows.ResizeRequest) (workflows.ChangeResult, error) {
	if len(req.Remove) > 0 && workflow.GetVersion(ctx, change.RemoveNamed, workflow.DefaultVersion, 1) >= 1 {
		markLeaving(u.w.state.Roles, req.Remove)
	}
	next := resized(u.w.spec, req)
	next.Signature = req.Signature
	result := u.change(ctx, next)
	u.growActive(ctx)
	return result, nil
}

// markLeaving marks the named members leaving: a shrink takes them first (SplitMembers).
func markLeaving(roles []plan.RoleState, names []string) {
	for i := range roles {
		for _, name := range names {
			if m := roles[i].Member(name); m != nil {
				m.Leaving = true
			}
		}
	}
}

// resized is the current spec with the resize's member counts.
func resized(current spec.Cluster, req workflows.ResizeRequest) spec.Cluster {
	next := current
	next.Roles = slices.Clone(current.Roles)
	for _, count := range req.Counts {
		for i := range next.Roles {
			if next.Roles[i].Name == count.Role {
				next.Roles[i].Members = count.Members
			}
		}
	}
	return next
}

func (u *updates) onApply(ctx workflow.Context, req workflows.ApplyRequest) (workflows.ChangeResult, error) {
	return u.applySpec(ctx, req.Spec, req.By, ""), nil
}

// applySpec makes next the desired spec, as an apply or a rollout's undo (why says which)
// asks: membership changes as a resize, and a new revision to roll out when what members
// run changed.
func (u *updates) applySpec(ctx workflow.Context, next spec.Cluster, by, why string) workflows.ChangeResult {
	for _, old := range u.w.spec.Roles {
		if _, kept := next.Role(old.Name); !kept && hasMembers(&u.w.state, old.Name) {
			u.w.retiring = append(u.w.retiring, old)
		}
	}
	// Retiring roles keep their scripts: a delete reinstalls scripts from the spec before
	// it tears members down.
	next.Scripts = maps.Clone(next.Scripts)
	for _, r := range u.w.retiring {
		if content, ok := u.w.spec.Scripts[r.ScriptHash]; ok {
			next.Scripts[r.ScriptHash] = content
		}
	}
	previous := u.w.spec
	result := u.change(ctx, next)
	if result.Changed && rollout.NoteRevision(&u.w.state, u.w.spec, previous, by, why, workflow.Now(ctx)) {
		result.Revision = u.w.state.Revision
	}
	u.growActive(ctx)
	if result.Changed && next.Origin != u.w.state.Origin {
		u.w.state.Origin = next.Origin
		if err := workflow.UpsertMemo(ctx, map[string]any{"origin": next.Origin}); err != nil {
			u.w.logger.Warn("Could not update the origin in the memo", "Error", err)
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
func (u *updates) change(ctx workflow.Context, next spec.Cluster) workflows.ChangeResult {
	summary := describeChange(u.w.spec, next)
	if summary == "" {
		return workflows.ChangeResult{Generation: u.w.state.Generation, Summary: "no change"}
	}
	u.w.spec = next
	u.w.NewGeneration(summary)
	u.w.state.SpecGeneration = u.w.state.Generation
	u.w.noteSignature()
	u.w.syncDesired()
	u.w.Touch(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		workflows.ClusterRolesKey.ValueSet(u.w.spec.RoleNames()), workflows.ClusterMembersKey.ValueSet(int64(u.w.spec.TotalMembers()))); err != nil {
		u.w.logger.Warn("Could not upsert the ClusterRoles and ClusterMembers search attributes", "Error", err)
	}
	if workflow.GetVersion(ctx, change.ChildrenOutsideHandlers, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		u.w.runner.StopUnwanted(ctx, u.w, u.w.spec) // runs from before: the handler tells them itself
	} else {
		u.w.childrenDue = true
	}
	u.w.logger.Info("Desired state changed", "Generation", u.w.state.Generation, "Change", summary)
	return workflows.ChangeResult{Generation: u.w.state.Generation, Changed: true, Summary: summary}
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

// growActive has the members a change adds to a role that is configuring now handed to
// its child (executor.grow) by the children's follower, which it wakes; runs from before
// change.ChildrenOutsideHandlers did it here, in the update's handler.
func (u *updates) growActive(ctx workflow.Context) {
	if workflow.GetVersion(ctx, change.ChildrenOutsideHandlers, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		u.w.exec.grow(ctx)
		return
	}
	u.w.childrenDue = true
}

// onCancel stops the operation in progress. Its running scripts are killed, and the
// cluster settles in phase canceled.
func (u *updates) onCancel(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if u.w.cancelOperation != nil { // the validator ran in this same workflow task
		u.w.cancelRequested = true
		u.w.cancelOperation()
	}
	return u.w.snapshot(), nil
}

// onDelete accepts a delete in any phase. A second delete while one runs changes nothing.
func (u *updates) onDelete(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if !u.w.deleteRequested {
		u.w.deleteRequested = true
		if u.w.cancelOperation != nil {
			u.w.cancelOperation()
		}
	}
	return u.w.snapshot(), nil
}

// hasMembers says whether a role still has members that are not gone.
func hasMembers(s *workflows.ClusterState, role string) bool {
	rs := s.Role(role)
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

// syncDesired shows a change's desired counts in status at once, before any operation.
func (c *cluster) syncDesired() {
	for i := range c.state.Roles {
		c.state.Roles[i].Desired = plan.DesiredMembers(c.spec, c.state.Roles[i].Name)
	}
}
