package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Start makes ro the rollout in progress. A rolling restart it replaces is dropped:
// a new revision's members restart with it anyway.
func Start(s *workflows.ClusterState, ro *workflows.RolloutRecord) {
	for i := range s.Roles {
		for j := range s.Roles[i].Members {
			s.Roles[i].Members[j].RestartDue = false
		}
	}
	s.Rollout = ro
}

// Running says a rollout is in progress, paused or not.
func Running(s *workflows.ClusterState) bool {
	ro := s.Rollout
	return ro != nil && ro.Ended.IsZero()
}

// GateClosed says whether anything about the watched members halts the rollout, and
// records why: a health report against one, or one no longer ready (its host lost, say:
// reachable says whether a host is).
func GateClosed(s *workflows.ClusterState, names []string, reachable func(host string) bool) bool {
	ro := s.Rollout
	if ro.Tripped != "" {
		return true
	}
	for _, name := range names {
		_, m := s.FindMember(name)
		switch {
		case m == nil || m.State == plan.MemberDeleted:
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("%s left during its watch", name), name
		case m.Host != "" && !reachable(m.Host):
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("the host of %s, %s, was lost during its watch", name, m.Host), name
		case m.State != plan.MemberReady:
			ro.Tripped, ro.TrippedBy = fmt.Sprintf("%s went %s during its watch", name, m.State), name
		}
		if ro.Tripped != "" {
			return true
		}
	}
	return false
}

// NoteHealthReport closes the gate on a down, gone or unhealthy report about a watched
// member, whatever the state machine does with it.
func NoteHealthReport(s *workflows.ClusterState, name string, ev workflows.MemberEvent) {
	ro := s.Rollout
	if ro == nil || ro.Tripped != "" || !slices.Contains(ro.Watching, name) {
		return
	}
	switch ev.Event {
	case plan.HealthDown, plan.HealthGone, plan.HealthUnhealthy:
		why := fmt.Sprintf("%s was reported %s during its watch", name, ev.Event)
		if ev.Source != "" {
			why += " by " + ev.Source
		}
		if ev.Reason != "" {
			why += ": " + ev.Reason
		}
		ro.Tripped, ro.TrippedBy = why, name
	}
}

// AllReportedUp says whether every watched member was reported up since its update.
func AllReportedUp(s *workflows.ClusterState, names []string, since time.Time) bool {
	for _, name := range names {
		_, m := s.FindMember(name)
		if m == nil || m.Health == nil || m.Health.LastReport != plan.HealthUp || len(m.Health.Transitions) == 0 {
			return false
		}
		if last := m.Health.Transitions[len(m.Health.Transitions)-1]; last.At.Before(since) {
			return false
		}
	}
	return true
}

// rolloutPhase is the phase a pass that reached its generation ends in while the rollout
// is paused.
func PausedMessage(s *workflows.ClusterState) string {
	ro := s.Rollout
	if ro.Restart {
		return fmt.Sprintf("%s: %s; `clusterflow rollout resume %s` goes on", ro.What(), ro.Paused, s.Name)
	}
	return fmt.Sprintf("%s: %s; `clusterflow rollout resume %s` goes on, `clusterflow rollout undo %s` goes back", ro.What(), ro.Paused, s.Name, s.Name)
}

// Status is the latest rollout's progress, or nil when there was none.
func Status(s *workflows.ClusterState, desired spec.Cluster) *workflows.RolloutStatus {
	ro := s.Rollout
	if ro == nil {
		return nil
	}
	out := &workflows.RolloutStatus{Revision: ro.Revision, Restart: ro.Restart, State: workflows.RolloutRunning, Started: ro.Started, Ended: ro.Ended, Paused: ro.Paused, PausedAt: ro.PausedAt, Member: ro.Member}
	switch {
	case !ro.Ended.IsZero():
		out.State = workflows.RolloutDone
	case ro.Paused != "":
		out.State = workflows.RolloutPaused
	}
	for _, role := range plan.RolloutRoles(s.Levels, s.Roles) {
		rs := s.Role(role)
		if ro.Moved[role] == 0 && len(ro.Due(*rs)) == 0 && (ro.Restart || rs.Current() != ro.Revision) {
			continue // not part of this rollout
		}
		def, _ := desired.Role(role)
		rst := workflows.RolloutRoleStatus{Role: role, Revision: rs.Current(), Strategy: def.StrategyFor(), Policy: def.Update.String()}
		outdated := ro.Due(*rs)
		if ro.Restart {
			rst.Updated = ro.Moved[role]
		}
		for _, m := range rs.Members {
			isOutdated := slices.ContainsFunc(outdated, func(o plan.Member) bool { return o.Name == m.Name })
			switch {
			case m.State == plan.MemberDeleted:
			case slices.Contains(ro.Watching, m.Name):
				rst.InWatch = append(rst.InWatch, m.Name)
			case slices.Contains(ro.Failed, m.Name):
				if len(rst.Failed) < workflows.ReportNames {
					rst.Failed = append(rst.Failed, m.Name)
				}
			case isOutdated:
				rst.Waiting++
			case m.State.SetUp() && !ro.Restart:
				rst.Updated++
			}
		}
		out.Roles = append(out.Roles, rst)
	}
	return out
}

// Answer is what the rollout updates return: the latest rollout's progress, or an
// empty one when a change made none (an undo that moves no member).
func Answer(s *workflows.ClusterState, desired spec.Cluster) workflows.RolloutStatus {
	if ro := Status(s, desired); ro != nil {
		return *ro
	}
	return workflows.RolloutStatus{Revision: s.Revision, State: workflows.RolloutDone}
}

// List is the revisions as `clusterflow revisions` lists them, oldest first.
func List(s *workflows.ClusterState) []workflows.Revision {
	out := make([]workflows.Revision, len(s.Revisions))
	for i, rec := range s.Revisions {
		out[i] = rec.Revision
		out[i].Kept = rec.Roles != nil || rec.Number == s.Revision
	}
	return out
}
