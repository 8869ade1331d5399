package health

import (
	"time"

	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Members' timers are deadlines in their health (MemberHealth.Due), so one workflow
// timer, set for the nearest of them, serves them all and survives continue-as-new.

// TimerArmed reports whether member m's timer can fire now: a down member's waits while
// its role's replacement is paused.
func TimerArmed(rs *plan.RoleState, m *plan.Member) bool {
	if m.Health == nil || m.Health.Due.IsZero() {
		return false
	}
	switch m.State {
	case plan.MemberDown:
		return rs.Paused == ""
	case plan.MemberFlapping:
		return true
	}
	return false
}

// NextDue is the nearest armed member timer.
func NextDue(roles []plan.RoleState) (time.Time, bool) {
	var next time.Time
	for i := range roles {
		rs := &roles[i]
		for j := range rs.Members {
			if m := &rs.Members[j]; TimerArmed(rs, m) && (next.IsZero() || m.Health.Due.Before(next)) {
				next = m.Health.Due
			}
		}
	}
	return next, !next.IsZero()
}

// TimeoutReason says why member m's timer fired, for its history.
func TimeoutReason(m *plan.Member) string {
	switch {
	case m.State == plan.MemberFlapping:
		return "up a whole flapWindow"
	case m.Health.LastReport == plan.HealthGone:
		return "gone, and replacement no longer paused"
	}
	return "down longer than replaceAfter"
}
