// Package health is the member health state machine and the rules around it: the
// transition table, one step of a member on an event, the meltdown guard that pauses a
// role's automatic replacement, the phase a settled cluster shows, and the members'
// timers. It is pure: the cluster workflow gives it the state and carries out what a step
// asks (a replacement, a member set up elsewhere).
package health

import "github.com/clusterflow/clusterflow/workflows/plan"

// The member health state machine. External services report events about members; each
// state may arm a timer (a TTL) whose expiry raises HealthTimeout. The table below is the
// whole machine: a state and an event lead to the first row whose guard holds, and a state
// and event with no row are ignored (and logged by the caller). Members being set up
// (pending, creating, configuring) take only their host's loss and gone, which set them up
// elsewhere; members being removed take nothing.

// facts are what guards look at: Step works out the member's own, and is given the
// cluster's (Given).
type facts struct {
	// paused: the role's automatic replacement is paused by the meltdown guard, counting
	// this member as unavailable.
	paused bool
	// flapping: recovering now makes more than flapLimit recoveries within flapWindow.
	flapping bool
	// up: the member's latest report says it is up.
	up bool
	// replaceable: the role replaces failed setups and this member slot has replacements
	// left.
	replaceable bool
	// setUpElsewhere: members being set up are placed afresh when their host is lost or
	// they are gone (runs from before that ignored such events).
	setUpElsewhere bool
	// watchOnly: the report comes from a reporter that may not cause a replacement.
	watchOnly bool
}

type guard func(facts) bool

func paused(f facts) bool      { return f.paused }
func notPaused(f facts) bool   { return !f.paused }
func flapping(f facts) bool    { return f.flapping }
func isUp(f facts) bool        { return f.up }
func replaceable(f facts) bool { return f.replaceable }
func elsewhere(f facts) bool   { return f.setUpElsewhere }
func watchOnly(f facts) bool   { return f.watchOnly }

// healthTimer is what a transition does to the member's timer.
type healthTimer int

const (
	// timerStop cancels the timer.
	timerStop healthTimer = iota
	// timerReplace fires after the role's replaceAfter.
	timerReplace
	// timerNow fires at once, once nothing pauses it: a member gone while replacement is
	// paused is replaced as soon as the pause lifts.
	timerNow
	// timerSettle fires after the role's flapWindow: a flapping member up that long is
	// steady again.
	timerSettle
)

type transition struct {
	from  plan.MemberState
	on    plan.HealthEvent
	when  guard // nil: always
	to    plan.MemberState
	timer healthTimer
}

var transitions = []transition{
	// A reporter that may only watch takes a member down with no timer: it stays down
	// until it is up again, or a reporter that may replace, or an operator, decides.
	{plan.MemberReady, plan.HealthDown, watchOnly, plan.MemberDown, timerStop},
	{plan.MemberReady, plan.HealthUnhealthy, watchOnly, plan.MemberDown, timerStop},
	{plan.MemberReady, plan.HealthDown, nil, plan.MemberDown, timerReplace},
	{plan.MemberReady, plan.HealthUnhealthy, nil, plan.MemberDown, timerReplace},
	{plan.MemberReady, plan.HealthGone, paused, plan.MemberDown, timerNow},
	{plan.MemberReady, plan.HealthGone, nil, plan.MemberReplacing, timerStop},

	{plan.MemberDown, plan.HealthUp, flapping, plan.MemberFlapping, timerSettle},
	{plan.MemberDown, plan.HealthUp, nil, plan.MemberReady, timerStop},
	{plan.MemberDown, plan.HealthGone, paused, plan.MemberDown, timerNow},
	{plan.MemberDown, plan.HealthGone, nil, plan.MemberReplacing, timerStop},
	{plan.MemberDown, plan.HealthTimeout, notPaused, plan.MemberReplacing, timerStop},

	// A flapping member is watched, never replaced automatically: its reports only move its
	// timer, until it stays up a whole flapWindow, is gone, or an operator resumes it.
	{plan.MemberFlapping, plan.HealthDown, nil, plan.MemberFlapping, timerStop},
	{plan.MemberFlapping, plan.HealthUnhealthy, nil, plan.MemberFlapping, timerStop},
	{plan.MemberFlapping, plan.HealthUp, nil, plan.MemberFlapping, timerSettle},
	{plan.MemberFlapping, plan.HealthTimeout, isUp, plan.MemberReady, timerStop},
	{plan.MemberFlapping, plan.HealthGone, paused, plan.MemberDown, timerNow},
	{plan.MemberFlapping, plan.HealthGone, nil, plan.MemberReplacing, timerStop},
	{plan.MemberFlapping, plan.HealthResume, isUp, plan.MemberReady, timerStop},
	{plan.MemberFlapping, plan.HealthResume, nil, plan.MemberDown, timerReplace},

	{plan.MemberConfigError, plan.HealthConfigError, replaceable, plan.MemberReplacing, timerStop},

	// A member being set up whose host is lost, or that is gone, has nothing to wait for:
	// it is placed afresh, with the same name, and set up elsewhere (rehome). A down or
	// unhealthy report about it means nothing yet: its script ends one way or the other.
	{plan.MemberPending, plan.HealthLost, elsewhere, plan.MemberPending, timerStop},
	{plan.MemberCreating, plan.HealthLost, elsewhere, plan.MemberPending, timerStop},
	{plan.MemberConfiguring, plan.HealthLost, elsewhere, plan.MemberPending, timerStop},
	{plan.MemberPending, plan.HealthGone, elsewhere, plan.MemberPending, timerStop},
	{plan.MemberCreating, plan.HealthGone, elsewhere, plan.MemberPending, timerStop},
	{plan.MemberConfiguring, plan.HealthGone, elsewhere, plan.MemberPending, timerStop},

	// A drain paces itself within maxUnavailable (plan.Drain), so the guard does not apply.
	{plan.MemberReady, plan.HealthDrain, nil, plan.MemberReplacing, timerStop},
}

// next finds the row for a member in state from receiving event on, if any.
func next(from plan.MemberState, on plan.HealthEvent, facts facts) (transition, bool) {
	for _, t := range transitions {
		if t.from == from && t.on == on && (t.when == nil || t.when(facts)) {
			return t, true
		}
	}
	return transition{}, false
}

// Takes says whether some row moves a member in state from on event on, whatever the guards.
func Takes(from plan.MemberState, on plan.HealthEvent) bool {
	for _, t := range transitions {
		if t.from == from && t.on == on {
			return true
		}
	}
	return false
}
