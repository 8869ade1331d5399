package workflows

// The member health state machine. External services report events about members; each
// state may arm a timer (a TTL) whose expiry raises HealthTimeout. The table below is the
// whole machine: a state and an event lead to the first row whose guard holds, and a state
// and event with no row are ignored (and logged by the caller). Members being set up
// (pending, creating, configuring) take only their host's loss and gone, which set them up
// elsewhere; members being removed take nothing.

// healthFacts are what guards look at, worked out by the cluster before a step.
type healthFacts struct {
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

type guard func(healthFacts) bool

func paused(f healthFacts) bool      { return f.paused }
func notPaused(f healthFacts) bool   { return !f.paused }
func flapping(f healthFacts) bool    { return f.flapping }
func isUp(f healthFacts) bool        { return f.up }
func replaceable(f healthFacts) bool { return f.replaceable }
func elsewhere(f healthFacts) bool   { return f.setUpElsewhere }
func watchOnly(f healthFacts) bool   { return f.watchOnly }

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
	from  MemberState
	on    HealthEvent
	when  guard // nil: always
	to    MemberState
	timer healthTimer
}

var transitions = []transition{
	// A reporter that may only watch takes a member down with no timer: it stays down
	// until it is up again, or a reporter that may replace, or an operator, decides.
	{MemberReady, HealthDown, watchOnly, MemberDown, timerStop},
	{MemberReady, HealthUnhealthy, watchOnly, MemberDown, timerStop},
	{MemberReady, HealthDown, nil, MemberDown, timerReplace},
	{MemberReady, HealthUnhealthy, nil, MemberDown, timerReplace},
	{MemberReady, HealthGone, paused, MemberDown, timerNow},
	{MemberReady, HealthGone, nil, MemberReplacing, timerStop},

	{MemberDown, HealthUp, flapping, MemberFlapping, timerSettle},
	{MemberDown, HealthUp, nil, MemberReady, timerStop},
	{MemberDown, HealthGone, paused, MemberDown, timerNow},
	{MemberDown, HealthGone, nil, MemberReplacing, timerStop},
	{MemberDown, HealthTimeout, notPaused, MemberReplacing, timerStop},

	// A flapping member is watched, never replaced automatically: its reports only move its
	// timer, until it stays up a whole flapWindow, is gone, or an operator resumes it.
	{MemberFlapping, HealthDown, nil, MemberFlapping, timerStop},
	{MemberFlapping, HealthUnhealthy, nil, MemberFlapping, timerStop},
	{MemberFlapping, HealthUp, nil, MemberFlapping, timerSettle},
	{MemberFlapping, HealthTimeout, isUp, MemberReady, timerStop},
	{MemberFlapping, HealthGone, paused, MemberDown, timerNow},
	{MemberFlapping, HealthGone, nil, MemberReplacing, timerStop},
	{MemberFlapping, HealthResume, isUp, MemberReady, timerStop},
	{MemberFlapping, HealthResume, nil, MemberDown, timerReplace},

	{MemberConfigError, HealthConfigError, replaceable, MemberReplacing, timerStop},

	// A member being set up whose host is lost, or that is gone, has nothing to wait for:
	// it is placed afresh, with the same name, and set up elsewhere (rehome). A down or
	// unhealthy report about it means nothing yet: its script ends one way or the other.
	{MemberPending, HealthLost, elsewhere, MemberPending, timerStop},
	{MemberCreating, HealthLost, elsewhere, MemberPending, timerStop},
	{MemberConfiguring, HealthLost, elsewhere, MemberPending, timerStop},
	{MemberPending, HealthGone, elsewhere, MemberPending, timerStop},
	{MemberCreating, HealthGone, elsewhere, MemberPending, timerStop},
	{MemberConfiguring, HealthGone, elsewhere, MemberPending, timerStop},

	// A drain paces itself within maxUnavailable (plan.Drain), so the guard does not apply.
	{MemberReady, HealthDrain, nil, MemberReplacing, timerStop},
}

// nextTransition finds the row for a member in state from receiving event on, if any.
func nextTransition(from MemberState, on HealthEvent, facts healthFacts) (transition, bool) {
	for _, t := range transitions {
		if t.from == from && t.on == on && (t.when == nil || t.when(facts)) {
			return t, true
		}
	}
	return transition{}, false
}
