package health

import (
	"fmt"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Given are the facts of the cluster a step needs besides the member's own.
type Given struct {
	// Paused: the role's automatic replacement is paused, counting this member as
	// unavailable (ReplacementPaused).
	Paused bool
	// SetUpElsewhere: members being set up are placed afresh when their host is lost or
	// they are gone (change.SetUpElsewhere).
	SetUpElsewhere bool
	// WatchOnly: the report comes from a reporter that may not cause a replacement
	// (change.WatchOnlyReports).
	WatchOnly bool
}

// Transition feeds one event to member m's state machine and carries the transition out on it:
// its state, timer, history and detail. policy is its role's, with defaults. The result
// says what changed, or why nothing did (Ignored). A member that enters replacing is to be
// replaced, and one that goes back to pending is to be set up elsewhere: the cluster does
// both.
func Transition(m *plan.Member, ev workflows.MemberEvent, policy spec.Health, given Given, now time.Time) workflows.MemberEventResult {
	result := workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State}
	h := m.Health
	if h == nil {
		h = &plan.MemberHealth{}
	}
	recent := slices.DeleteFunc(slices.Clone(h.Recoveries), func(t time.Time) bool { return now.Sub(t) > policy.FlapWindow })
	f := facts{
		paused:         given.Paused,
		flapping:       len(recent)+1 > policy.FlapLimit,
		up:             h.LastReport == plan.HealthUp,
		replaceable:    policy.ReplaceOnConfigError && m.Replacements < policy.MaxReplacements,
		setUpElsewhere: given.SetUpElsewhere,
		watchOnly:      given.WatchOnly,
	}
	t, ok := next(m.State, ev.Event, f)
	if !ok {
		result.Ignored = fmt.Sprintf("no transition from %s on %s", m.State, ev.Event)
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
	if ev.Check != nil {
		h.LastCheck = ev.Check
	}
	m.Health = h
	if m.State != t.to {
		m.Since = now
	}
	m.State = t.to
	m.Detail = detail(*m, ev, policy.FlapLimit, policy.FlapWindow, len(recent))
	result.To = t.to
	return result
}

// Hold keeps an event that came while maintenance holds the cluster in the member's
// history, as a step that changed nothing: maintenance holds every reaction to health.
func Hold(m *plan.Member, ev workflows.MemberEvent, maintenance string, now time.Time) workflows.MemberEventResult {
	if m.Health == nil {
		m.Health = &plan.MemberHealth{}
	}
	note := "not acted on: " + maintenance
	if ev.Reason != "" {
		note = ev.Reason + "; " + note
	}
	m.Health.Record(plan.HealthTransition{At: now, From: m.State, To: m.State, Event: ev.Event, Reason: note, Source: ev.Source, ReportedAt: ev.At})
	return workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State, Ignored: maintenance}
}

// detail says, in the member's status line, what its health state means.
func detail(m plan.Member, ev workflows.MemberEvent, flapLimit int, flapWindow time.Duration, recoveries int) string {
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
