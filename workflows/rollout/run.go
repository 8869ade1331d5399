package rollout

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// Cluster is what a rollout needs of the cluster it runs in: its state and desired spec,
// showing changes, starting a generation, and running a pass
// (through the cluster's executor, whose passes alone start role children).
type Cluster interface {
	State() *workflows.ClusterState
	Desired() spec.Cluster
	Touch(ctx workflow.Context)
	SetPhase(ctx workflow.Context, phase workflows.Phase, message string)
	NewGeneration(reason string)
	RunPass(ctx workflow.Context, pass plan.Pass)
	Logger() log.Logger
}

// A rollout's course is the planner's (plan.Decide: which batch, a pause when a role has
// no room, its end); what follows carries its stages out, for the executor.

// Begin begins the pass's share of the rollout in progress: it says whether batches are
// due. A rollout whose last batch was replaced first checks that batch's successors.
func Begin(ctx workflow.Context, c Cluster) plan.RolloutProgress {
	st := c.State()
	ro := st.Rollout
	if ro == nil || !ro.Ended.IsZero() || ro.Paused != "" {
		return plan.RolloutIdle
	}
	roles := plan.RolloutRoles(st.Levels, st.Roles)
	pending := len(ro.Replacing) > 0 || slices.ContainsFunc(roles, func(role string) bool { return len(ro.Due(*st.Role(role))) > 0 })
	if !pending {
		ro.Ended, ro.Failed, ro.Watching = workflow.Now(ctx), nil, nil
		return plan.RolloutIdle
	}
	if workflow.GetVersion(ctx, change.Rollouts, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return plan.RolloutIdle
	}
	c.SetPhase(ctx, workflows.PhaseRollingOut, ro.What())
	if len(ro.Replacing) > 0 && !replacedBatchDone(ctx, c) {
		return plan.RolloutStopped
	}
	return plan.RolloutGoesOn
}

// View is what the planner reads of the cluster's rollout.
func View(st *workflows.ClusterState) plan.RolloutView {
	ro := st.Rollout
	if !Running(st) {
		return plan.RolloutView{}
	}
	v := plan.RolloutView{Paused: ro.Paused != "", Restart: ro.Restart, Due: map[string][]plan.Member{}, Moved: ro.Moved}
	for _, role := range plan.RolloutRoles(st.Levels, st.Roles) {
		v.Due[role] = ro.Due(*st.Role(role))
	}
	return v
}

// Done ends the rollout: every member it was to move moved.
func Done(ctx workflow.Context, c Cluster) {
	ro := c.State().Rollout
	ro.Ended, ro.Watching = workflow.Now(ctx), nil
}

// ReplaceBatch starts replacing a batch's members with members set up with the new
// revision: each is marked as being replaced, as the health machine marks one, and a new
// generation's pass does the rest.
func ReplaceBatch(ctx workflow.Context, c Cluster, b plan.RoleBatch) {
	def, batch := b.Role, b.RolloutBatch
	st := c.State()
	ro := st.Rollout
	rs := st.Role(def.Name)
	ro.Replacing, ro.ReplacingRole = nil, def.Name
	for _, old := range batch.Members {
		m := rs.Member(old.Name)
		m.State, m.Leaving, m.Since = plan.MemberReplacing, true, workflow.Now(ctx)
		m.Detail = fmt.Sprintf("being replaced by the %s", ro.What())
		ro.Replacing = append(ro.Replacing, old.Name)
	}
	c.NewGeneration(fmt.Sprintf("%s: replace %s", ro.What(), spec.Some(ro.Replacing, flow.RefusalNames)))
	c.Touch(ctx)
}

// KeepReplacedOnFailure is what a replace rollout does when a successor it set up failed:
// the rollout pauses, and the member the successor was to replace stays, ready again,
// while the failed successor leaves. It reports whether there was such a successor.
func KeepReplacedOnFailure(ctx workflow.Context, c Cluster) bool {
	st := c.State()
	ro := st.Rollout
	if ro == nil || len(ro.Replacing) == 0 {
		return false
	}
	rs := st.Role(ro.ReplacingRole)
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
	Pause(ctx, c, failed[0], fmt.Sprintf("the replacement %s (revision %d) failed to set up, and the members it was to replace stay: %s", spec.Some(failed, flow.RefusalNames), ro.Revision, detail))
	return true
}

// replacedBatchDone checks the batch being replaced once the passes since set its
// successors up: a successor that failed pauses the rollout, and the others are watched.
// It reports whether the rollout goes on.
func replacedBatchDone(ctx workflow.Context, c Cluster) bool {
	st := c.State()
	ro := st.Rollout
	rs := st.Role(ro.ReplacingRole)
	def, _ := c.Desired().Role(ro.ReplacingRole)
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
		_, m := st.FindMember(failed[0])
		Pause(ctx, c, failed[0], fmt.Sprintf("the replacement %s (revision %d) is %s: %s", spec.Some(failed, flow.RefusalNames), ro.Revision, m.State, m.Detail))
		return false
	case len(successors) < len(ro.Replacing):
		Pause(ctx, c, "", fmt.Sprintf("%d of the members replacing %s are missing", len(ro.Replacing)-len(successors), spec.Some(ro.Replacing, flow.RefusalNames)))
		return false
	}
	if why := watch(ctx, c, []spec.Update{def.Update}, successors); why != "" {
		Pause(ctx, c, ro.TrippedBy, why)
		return false
	}
	if ro.Moved == nil {
		ro.Moved = map[string]int{}
	}
	ro.Moved[ro.ReplacingRole] += len(successors)
	ro.Replacing, ro.ReplacingRole = nil, ""
	return ctx.Err() == nil
}

// UpdateBatch updates a batch of members of one role or more at once, and watches them.
// n numbers the batch among the pass's.
func UpdateBatch(ctx workflow.Context, c Cluster, batches []plan.RoleBatch, n int) plan.RolloutProgress {
	st := c.State()
	ro := st.Rollout
	op, event := plan.OpUpgrade, spec.EventUpgrade
	if ro.Restart {
		op, event = plan.OpRestart, spec.EventRestart
	}
	var work []plan.RoleWork
	var names []string
	for _, b := range batches {
		label := fmt.Sprintf("b%d", n)
		if b.Canary {
			label = fmt.Sprintf("canary%d", n)
		}
		// The role's own maxInFlight, when it has one, still bounds the scripts run at once.
		work = append(work, plan.RoleWork{Role: b.Role.Name, Members: b.Members, Batch: label})
		for _, m := range b.Members {
			names = append(names, m.Name)
		}
	}
	c.RunPass(ctx, plan.Given(op, work))
	var failed []string
	for _, name := range names {
		rs, m := st.FindMember(name)
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
	c.Touch(ctx)
	if ctx.Err() != nil {
		return plan.RolloutStopped
	}
	if len(failed) > 0 {
		_, m := st.FindMember(failed[0])
		what := fmt.Sprintf("the upgrade of %s to revision %d", spec.Some(failed, flow.RefusalNames), ro.Revision)
		if ro.Restart {
			what = "the restart of " + spec.Some(failed, flow.RefusalNames)
		}
		Pause(ctx, c, failed[0], fmt.Sprintf("%s failed: %s", what, m.Detail))
		return plan.RolloutStopped
	}
	policies := make([]spec.Update, len(batches))
	for i, b := range batches {
		policies[i] = b.Role.Update
	}
	if why := watch(ctx, c, policies, names); why != "" {
		Pause(ctx, c, ro.TrippedBy, why)
		return plan.RolloutStopped
	}
	if ctx.Err() != nil {
		return plan.RolloutStopped
	}
	return plan.RolloutGoesOn
}

// watch keeps an eye on a batch just updated: it ends after its roles' longest watch (at
// its least, once every member reported up since; at its most otherwise), or at once when
// the health gate closes, with why.
func watch(ctx workflow.Context, c Cluster, policies []spec.Update, names []string) string {
	st := c.State()
	ro := st.Rollout
	ro.Watching, ro.Tripped, ro.TrippedBy = names, "", ""
	defer func() { ro.Watching = nil }()
	started := workflow.Now(ctx)
	closed := func() bool {
		return GateClosed(st, names, func(host string) bool { return hosts.Reachable(st, host) }) || ro.Paused != ""
	}
	var minWatch, maxWatch time.Duration
	for _, p := range policies {
		low, high := p.Watch()
		minWatch, maxWatch = max(minWatch, low), max(maxWatch, high)
	}
	c.Touch(ctx)
	if minWatch > 0 {
		if _, err := workflow.AwaitWithTimeout(ctx, minWatch, closed); err != nil {
			return ""
		}
	}
	if !closed() && maxWatch > minWatch {
		if _, err := workflow.AwaitWithTimeout(ctx, maxWatch-minWatch, func() bool { return closed() || AllReportedUp(st, names, started) }); err != nil {
			return ""
		}
	}
	return ro.Tripped
}

// Pause stops the rollout where it stands, naming why.
func Pause(ctx workflow.Context, c Cluster, member, why string) {
	ro := c.State().Rollout
	ro.Paused, ro.Member, ro.PausedAt = spec.Clip(why, workflows.MaxDetail), member, workflow.Now(ctx)
	c.Logger().Warn("Rollout paused", "Rollout", ro.What(), "Member", member, "Reason", why)
	c.Touch(ctx)
}
