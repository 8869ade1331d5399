package workflows

import (
	"fmt"
	"testing"
)

// The member state machine, state by state and event by event. Every pair not listed as a
// transition must be ignored, including the impossible ones (an up for a ready member, any
// report about a member being set up or removed).
func TestHealthTransitionTable(t *testing.T) {
	states := []MemberState{
		MemberPending, MemberCreating, MemberConfiguring, MemberReady, MemberConfigError, MemberDeleting, MemberDeleted,
		MemberDown, MemberFlapping, MemberReplacing, MemberRogue,
	}
	events := []HealthEvent{HealthDown, HealthUp, HealthGone, HealthUnhealthy, HealthTimeout, HealthResume, HealthConfigError}
	none := healthFacts{}
	all := healthFacts{paused: true, flapping: true, up: true, replaceable: true, watchOnly: true}

	type want struct {
		to    MemberState
		timer healthTimer
	}
	// What each pair does with no guard holding (none) and with every guard holding (all).
	expected := map[string][2]*want{
		"ready/down":                {{MemberDown, timerReplace}, {MemberDown, timerStop}},
		"ready/unhealthy":           {{MemberDown, timerReplace}, {MemberDown, timerStop}},
		"ready/gone":                {{MemberReplacing, timerStop}, {MemberDown, timerNow}},
		"down/up":                   {{MemberReady, timerStop}, {MemberFlapping, timerSettle}},
		"down/gone":                 {{MemberReplacing, timerStop}, {MemberDown, timerNow}},
		"down/timeout":              {{MemberReplacing, timerStop}, nil},
		"flapping/down":             {{MemberFlapping, timerStop}, {MemberFlapping, timerStop}},
		"flapping/unhealthy":        {{MemberFlapping, timerStop}, {MemberFlapping, timerStop}},
		"flapping/up":               {{MemberFlapping, timerSettle}, {MemberFlapping, timerSettle}},
		"flapping/timeout":          {nil, {MemberReady, timerStop}},
		"flapping/gone":             {{MemberReplacing, timerStop}, {MemberDown, timerNow}},
		"flapping/resume":           {{MemberDown, timerReplace}, {MemberReady, timerStop}},
		"config_error/config_error": {nil, {MemberReplacing, timerStop}},
	}
	for _, s := range states {
		for _, e := range events {
			key := fmt.Sprintf("%s/%s", s, e)
			for i, facts := range []healthFacts{none, all} {
				got, ok := nextTransition(s, e, facts)
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
		from  MemberState
		on    HealthEvent
		facts healthFacts
		to    MemberState
		ok    bool
	}{
		{MemberReady, HealthGone, healthFacts{paused: true}, MemberDown, true},
		{MemberDown, HealthTimeout, healthFacts{paused: true}, "", false},
		{MemberDown, HealthTimeout, healthFacts{flapping: true, up: true, replaceable: true}, MemberReplacing, true},
		{MemberDown, HealthUp, healthFacts{flapping: true}, MemberFlapping, true},
		{MemberDown, HealthUp, healthFacts{paused: true, up: true}, MemberReady, true},
		{MemberFlapping, HealthTimeout, healthFacts{up: true}, MemberReady, true},
		{MemberFlapping, HealthTimeout, healthFacts{paused: true, flapping: true}, "", false},
		{MemberConfigError, HealthConfigError, healthFacts{replaceable: true}, MemberReplacing, true},
		{MemberConfigError, HealthConfigError, healthFacts{paused: true, up: true, flapping: true}, "", false},
	}
	for _, tt := range tests {
		got, ok := nextTransition(tt.from, tt.on, tt.facts)
		if ok != tt.ok || got.to != tt.to {
			t.Errorf("%s --%s--> with %+v: got %q (%v), want %q (%v)", tt.from, tt.on, tt.facts, got.to, ok, tt.to, tt.ok)
		}
	}
}
