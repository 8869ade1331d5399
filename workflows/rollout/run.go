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
// showing changes, starting a generation, maintenance's hold, and running a pass
// (through the cluster's executor, whose passes alone start role children).
type Cluster interface {
	State() *workflows.ClusterState
	Desired() spec.Cluster
	Touch(ctx workflow.Context)
	SetPhase(ctx workflow.Context, phase workflows.Phase, message string)
	NewGeneration(reason string)
	HeldByMaintenance(ctx workflow.Context) bool
	RunPass(ctx workflow.Context, pass plan.Pass)
	Logger() log.Logger
}

// Run moves the outdated members of each role to its current revision, role by role in
// dependency order. It returns whether the desired generation changed meanwhile, which
// starts the pass again; a pause, a cancel or a delete ends it.
func Run(ctx workflow.Context, c Cluster, changed func() bool) (again bool) {
	st := c.State()
	ro := st.Rollout
	if ro == nil || !ro.Ended.IsZero() || ro.Paused != "" {
		return false
	}
	roles := plan.RolloutRoles(st.Levels, st.Roles)
	pending := len(ro.Replacing) > 0 || slices.ContainsFunc(roles, func(role string) bool { return len(ro.Due(*st.Role(role))) > 0 })
	if !pending {
		ro.Ended, ro.Failed, ro.Watching = workflow.Now(ctx), nil, nil
		return false
	}
	if workflow.GetVersion(ctx, change.Rollouts, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	c.SetPhase(ctx, workflows.PhaseRollingOut, ro.What())
	if len(ro.Replacing) > 0 && !replacedBatchDone(ctx, c) {
		return changed()
	}
	batches := 0
	for _, group := range plan.RolloutGroups(st.Levels, st.Roles, c.Desired(), ro.Restart) {
		for {
			switch {
			case ctx.Err() != nil || c.HeldByMaintenance(ctx):
				return false
			case changed():
				return true
			case ro.Paused != "":
				return false
			}
			var work []rolloutStep
			for _, role := range group {
				def, ok := c.Desired().Role(role)
				rs := st.Role(role)
				due := ro.Due(*rs)
				if !ok || len(due) == 0 {
					continue
				}
				batch, why := plan.NextBatch(def, *rs, due, ro.Moved[role])
				if len(batch.Members) == 0 {
					pause(ctx, c, "", fmt.Sprintf("role %s: %s", role, why))
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
				replaceBatch(ctx, c, def, work[0].batch)
				return true
			}
			if !updateBatches(ctx, c, work, batches) {
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
func replaceBatch(ctx workflow.Context, c Cluster, def spec.Role, batch plan.RolloutBatch) {
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
	pause(ctx, c, failed[0], fmt.Sprintf("the replacement %s (revision %d) failed to set up, and the members it was to replace stay: %s", spec.Some(failed, flow.RefusalNames), ro.Revision, detail))
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
		pause(ctx, c, failed[0], fmt.Sprintf("the replacement %s (revision %d) is %s: %s", spec.Some(failed, flow.RefusalNames), ro.Revision, m.State, m.Detail))
		return false
	case len(successors) < len(ro.Replacing):
		pause(ctx, c, "", fmt.Sprintf("%d of the members replacing %s are missing", len(ro.Replacing)-len(successors), spec.Some(ro.Replacing, flow.RefusalNames)))
		return false
	}
	if why := watch(ctx, c, []spec.Update{def.Update}, successors); why != "" {
		pause(ctx, c, ro.TrippedBy, why)
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
func updateBatches(ctx workflow.Context, c Cluster, batches []rolloutStep, n int) bool {
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
		if b.batch.Canary {
			label = fmt.Sprintf("canary%d", n)
		}
		// The role's own maxInFlight, when it has one, still bounds the scripts run at once.
		work = append(work, plan.RoleWork{Role: b.def.Name, Members: b.batch.Members, Batch: label})
		for _, m := range b.batch.Members {
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
		return false
	}
	if len(failed) > 0 {
		_, m := st.FindMember(failed[0])
		what := fmt.Sprintf("the upgrade of %s to revision %d", spec.Some(failed, flow.RefusalNames), ro.Revision)
		if ro.Restart {
			what = "the restart of " + spec.Some(failed, flow.RefusalNames)
		}
		pause(ctx, c, failed[0], fmt.Sprintf("%s failed: %s", what, m.Detail))
		return false
	}
	policies := make([]spec.Update, len(batches))
	for i, b := range batches {
		policies[i] = b.def.Update
	}
	if why := watch(ctx, c, policies, names); why != "" {
		pause(ctx, c, ro.TrippedBy, why)
		return false
	}
	return ctx.Err() == nil
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

// pause stops the rollout where it stands, naming why.
func pause(ctx workflow.Context, c Cluster, member, why string) {
	ro := c.State().Rollout
	ro.Paused, ro.Member, ro.PausedAt = spec.Clip(why, workflows.MaxDetail), member, workflow.Now(ctx)
	c.Logger().Warn("Rollout paused", "Rollout", ro.What(), "Member", member, "Reason", why)
	c.Touch(ctx)
}
