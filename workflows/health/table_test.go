package health

import (
	"fmt"
	"testing"

	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The member state machine, state by state and event by event. Every pair not listed as a
// transition must be ignored, including the impossible ones (an up for a ready member, any
// report about a member being set up or removed).
func TestHealthTransitionTable(t *testing.T) {
	states := []plan.MemberState{
		plan.MemberPending, plan.MemberCreating, plan.MemberConfiguring, plan.MemberReady, plan.MemberConfigError, plan.MemberDeleting, plan.MemberDeleted,
		plan.MemberDown, plan.MemberFlapping, plan.MemberReplacing, plan.MemberRogue,
	}
	events := []plan.HealthEvent{plan.HealthDown, plan.HealthUp, plan.HealthGone, plan.HealthUnhealthy, plan.HealthTimeout, plan.HealthResume, plan.HealthConfigError}
	none := facts{}
	all := facts{paused: true, flapping: true, up: true, replaceable: true, watchOnly: true}

	type want struct {
		to    plan.MemberState
		timer healthTimer
	}
	// What each pair does with no guard holding (none) and with every guard holding (all).
	expected := map[string][2]*want{
		"ready/down":                {{plan.MemberDown, timerReplace}, {plan.MemberDown, timerStop}},
		"ready/unhealthy":           {{plan.MemberDown, timerReplace}, {plan.MemberDown, timerStop}},
		"ready/gone":                {{plan.MemberReplacing, timerStop}, {plan.MemberDown, timerNow}},
		"down/up":                   {{plan.MemberReady, timerStop}, {plan.MemberFlapping, timerSettle}},
		"down/gone":                 {{plan.MemberReplacing, timerStop}, {plan.MemberDown, timerNow}},
		"down/timeout":              {{plan.MemberReplacing, timerStop}, nil},
		"flapping/down":             {{plan.MemberFlapping, timerStop}, {plan.MemberFlapping, timerStop}},
		"flapping/unhealthy":        {{plan.MemberFlapping, timerStop}, {plan.MemberFlapping, timerStop}},
		"flapping/up":               {{plan.MemberFlapping, timerSettle}, {plan.MemberFlapping, timerSettle}},
		"flapping/timeout":          {nil, {plan.MemberReady, timerStop}},
		"flapping/gone":             {{plan.MemberReplacing, timerStop}, {plan.MemberDown, timerNow}},
		"flapping/resume":           {{plan.MemberDown, timerReplace}, {plan.MemberReady, timerStop}},
		"config_error/config_error": {nil, {plan.MemberReplacing, timerStop}},
	}
	for _, s := range states {
		for _, e := range events {
			key := fmt.Sprintf("%s/%s", s, e)
			for i, facts := range []facts{none, all} {
				got, ok := next(s, e, facts)
				w := expected[key][i]
				switch {
				case w == nil && ok:
					t.Errorf("%s with facts %+v: want it ignored, got → %s", key, facts, got.to)
				case w != nil && !ok:
					t.Errorf("%s with facts %+v: ignored, want → %s", key, facts, w.to)
				case w != nil && (got.to != w.to || got.timer != w.timer):
					t.Errorf("%s with facts %+v: → %s (timer %d), want → %s (timer %d)", key, facts, got.to, got.timer, w.to, w.timer)
				}
			}
		}
	}
	for key := range expected {
		found := false
		for _, tr := range transitions {
			found = found || fmt.Sprintf("%s/%s", tr.from, tr.on) == key
		}
		if !found {
			t.Errorf("expected %s is not a row of the table", key)
		}
	}
}

// Each guard decides on its own fact alone.
func TestHealthGuards(t *testing.T) {
	tests := []struct {
		from  plan.MemberState
		on    plan.HealthEvent
		facts facts
		to    plan.MemberState
		ok    bool
	}{
		{plan.MemberReady, plan.HealthGone, facts{paused: true}, plan.MemberDown, true},
		{plan.MemberDown, plan.HealthTimeout, facts{paused: true}, "", false},
		{plan.MemberDown, plan.HealthTimeout, facts{flapping: true, up: true, replaceable: true}, plan.MemberReplacing, true},
		{plan.MemberDown, plan.HealthUp, facts{flapping: true}, plan.MemberFlapping, true},
		{plan.MemberDown, plan.HealthUp, facts{paused: true, up: true}, plan.MemberReady, true},
		{plan.MemberFlapping, plan.HealthTimeout, facts{up: true}, plan.MemberReady, true},
		{plan.MemberFlapping, plan.HealthTimeout, facts{paused: true, flapping: true}, "", false},
		{plan.MemberConfigError, plan.HealthConfigError, facts{replaceable: true}, plan.MemberReplacing, true},
		{plan.MemberConfigError, plan.HealthConfigError, facts{paused: true, up: true, flapping: true}, "", false},
	}
	for _, tt := range tests {
		got, ok := next(tt.from, tt.on, tt.facts)
		if ok != tt.ok || got.to != tt.to {
			t.Errorf("%s --%s--> with %+v: got %q (%v), want %q (%v)", tt.from, tt.on, tt.facts, got.to, ok, tt.to, tt.ok)
		}
	}
}
