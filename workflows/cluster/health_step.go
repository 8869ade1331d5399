package cluster

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// healthMachine is member health: it feeds the events reported of members, and those it
// raises itself, to each member's state machine (health_table.go), keeps their timers and
// history, reconciles the members against what the hosts hold, and has a member that is
// gone replaced. What it needs of the workflow it is given: showing changes (touch,
// setPhase), the role runner (to stop a member being set up), and reaching every host.
type healthMachine struct {
	*cluster
	runner     *roleRunner
	touch      func(workflow.Context)
	setPhase   func(ctx workflow.Context, phase workflows.Phase, message string)
	onEachHost func(ctx workflow.Context, hosts []string, run func(ctx workflow.Context, host string) error) map[string]error
}

// stepHealth feeds one event to a member's state machine and carries out the transition:
// the member's state, timer and history, and a replacement when it enters replacing.
func (hm *healthMachine) stepHealth(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult {
	result := workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State}
	hm.noteHealthReport(m.Name, ev)
	if hm.deleteRequested {
		result.Ignored = fmt.Sprintf("cluster %s is being deleted", hm.state.Name)
		return result
	}
	now := workflow.Now(ctx)
	if hm.inMaintenance() {
		return hm.recordHeldEvent(ctx, m, ev, now)
	}
	r, _ := hm.roleSpec(rs.Name)
	policy := r.Health.WithDefaults()
	h := m.Health
	if h == nil {
		h = &plan.MemberHealth{}
	}
	recent := slices.DeleteFunc(slices.Clone(h.Recoveries), func(t time.Time) bool { return now.Sub(t) > policy.FlapWindow })
	facts := healthFacts{
		paused:         hm.replacementPaused(rs, m),
		flapping:       len(recent)+1 > policy.FlapLimit,
		up:             h.LastReport == plan.HealthUp,
		replaceable:    policy.ReplaceOnConfigError && m.Replacements < policy.MaxReplacements,
		setUpElsewhere: hm.setUpElsewhere,
		// Asked only of a watch-only report, which no history of before it holds.
		watchOnly: ev.WatchOnly && workflow.GetVersion(ctx, change.WatchOnlyReports, workflow.DefaultVersion, 1) >= 1,
	}
	t, ok := nextTransition(m.State, ev.Event, facts)
	if !ok {
		result.Ignored = fmt.Sprintf("no transition from %s on %s", m.State, ev.Event)
		hm.logger.Info("Member health event ignored", "Member", m.Name, "State", m.State, "Event", ev.Event, "Source", ev.Source)
		return result
	}
	if m.State == plan.MemberDown && ev.Event == plan.HealthUp {
		recent = append(recent, now)
	}
	h.Recoveries = recent
	if slices.Contains(workflows.ReportedEvents, ev.Event) {
		h.LastReport = ev.Event
	}
	switch t.timer {
	case timerStop:
		h.Due = time.Time{}
	case timerReplace:
		h.Due = now.Add(policy.ReplaceAfter)
	case timerNow:
		h.Due = now
	case timerSettle:
		h.Due = now.Add(policy.FlapWindow)
	}
	h.Record(plan.HealthTransition{At: now, From: m.State, To: t.to, Event: ev.Event, Reason: ev.Reason, Source: ev.Source, ReportedAt: ev.At})
	m.Health = h
	if m.State != t.to {
		m.Since = now
	}
	m.State = t.to
	m.Detail = healthDetail(*m, ev, policy.FlapLimit, policy.FlapWindow, len(recent))
	result.To = t.to
	hm.logger.Info("Member health", "Member", m.Name, "From", result.From, "To", t.to, "Event", ev.Event, "Reason", ev.Reason, "Source", ev.Source)
	switch t.to {
	case plan.MemberReplacing:
		hm.replace(rs, m, ev)
	case plan.MemberPending:
		hm.rehome(ctx, rs, m, result.From, ev)
	}
	hm.healthChanged(ctx)
	return result
}

// recordHeldEvent keeps an event that came while maintenance is on in the member's
// history, as a step that changed nothing: maintenance holds every reaction to health.
func (hm *healthMachine) recordHeldEvent(ctx workflow.Context, m *plan.Member, ev workflows.MemberEvent, now time.Time) workflows.MemberEventResult {
	if m.Health == nil {
		m.Health = &plan.MemberHealth{}
	}
	note := "not acted on: " + hm.state.Maintenance.Describe()
	if ev.Reason != "" {
		note = ev.Reason + "; " + note
	}
	m.Health.Record(plan.HealthTransition{At: now, From: m.State, To: m.State, Event: ev.Event, Reason: note, Source: ev.Source, ReportedAt: ev.At})
	hm.logger.Info("Member health event held for maintenance", "Member", m.Name, "Event", ev.Event, "Source", ev.Source)
	hm.touch(ctx)
	return workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State, Ignored: hm.state.Maintenance.Describe()}
}

// healthDetail says, in the member's status line, what its health state means.
func healthDetail(m plan.Member, ev workflows.MemberEvent, flapLimit int, flapWindow time.Duration, recoveries int) string {
	why := string(ev.Event)
	if ev.Reason != "" {
		why += ": " + ev.Reason
	}
	if ev.Source != "" {
		why += " (from " + ev.Source + ")"
	}
	switch m.State {
	case plan.MemberDown:
		if m.Health.LastReport == plan.HealthGone {
			return why + "; replaced once the role's replacement is no longer paused"
		}
		return fmt.Sprintf("%s; replaced at %s unless it comes back up", why, m.Health.Due.UTC().Format(time.TimeOnly))
	case plan.MemberFlapping:
		return fmt.Sprintf("flapping: came back up %d times within %s (flapLimit %d), so it is not replaced automatically; latest %s", recoveries, flapWindow, flapLimit, why)
	case plan.MemberReplacing:
		return "being replaced: " + why
	case plan.MemberReady:
		return "healthy again: " + why
	}
	return why
}

// healthChanged wakes the health watcher, which rearms its timer, and re-evaluates the
// meltdown guard and the phase.
func (hm *healthMachine) healthChanged(ctx workflow.Context) {
	hm.healthVersion++
	hm.refreshMeltdown()
	hm.showHealth(ctx)
	hm.touch(ctx)
}

// findMember locates a member by name in any role.
func (c *cluster) findMember(name string) (*plan.RoleState, *plan.Member) {
	for i := range c.state.Roles {
		if m := c.state.Roles[i].Member(name); m != nil {
			return &c.state.Roles[i], m
		}
	}
	return nil, nil
}

// failedStartsAreDown makes each member whose start failed down, rather than failed: its
// setup stands; only its services are down, and health takes over.
func (hm *healthMachine) failedStartsAreDown(ctx workflow.Context, work []plan.RoleWork) {
	for _, rw := range work {
		for _, m := range rw.Members {
			rs, live := hm.findMember(m.Name)
			if live == nil || live.State != plan.MemberConfigError || live.Event != spec.EventStart {
				continue
			}
			why := live.Detail
			live.State = plan.MemberReady
			hm.stepHealth(ctx, rs, live, workflows.MemberEvent{Member: m.Name, Event: plan.HealthDown, Reason: why, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
}
