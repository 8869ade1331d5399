// Package details is what the Web UI shows as a cluster workflow's current details: what
// the cluster is doing now, and its roles as they are. A pure projection of the state.
package details

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// rolloutDetails is a rollout's progress, role by role, and the revisions before it.
func rolloutDetails(s *workflows.ClusterState, desired spec.Cluster) string {
	ro := rollout.Status(s, desired)
	text := fmt.Sprintf("%s: %s", s.Phase, s.Rollout.What())
	if ro.Paused != "" {
		text += " paused: " + ro.Paused
	}
	for _, r := range ro.Roles {
		text += fmt.Sprintf("; %s %d updated, %d in watch, %d waiting, %d failed", r.Role, r.Updated, len(r.InWatch), r.Waiting, len(r.Failed))
	}
	if n := len(s.Revisions); n > 1 {
		prev := s.Revisions[n-2]
		text += fmt.Sprintf("; revision %d was %s", prev.Number, prev.Change)
	}
	return text
}

// Current is the workflow's current details, which the Web UI shows as Markdown: what is
// happening right now, in one line, then each role as it is now (the workflow's static
// summary and details are the cluster as deployed, and never change).
func Current(s *workflows.ClusterState, desired spec.Cluster) string {
	return doing(s, desired) + "\n\n" + rolesNow(s)
}

// rolesNow is a table of the roles as they are now: members, the desired count where it
// differs, and how many are in each state.
func rolesNow(s *workflows.ClusterState) string {
	var b strings.Builder
	b.WriteString("| role | level | members | states |\n|---|---|---|---|\n")
	for _, rs := range s.Roles {
		count := map[plan.MemberState]int{}
		for _, m := range rs.Members {
			count[m.State]++
		}
		var states []string
		for _, state := range slices.Sorted(maps.Keys(count)) {
			states = append(states, fmt.Sprintf("%s %d", state, count[state]))
		}
		members := fmt.Sprint(len(rs.Members))
		if rs.Desired != len(rs.Members) {
			members += fmt.Sprintf(" (desired %d)", rs.Desired)
		}
		if rs.Paused != "" {
			states = append(states, "replacements paused: "+rs.Paused)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", rs.Name, rs.Level, members, strings.Join(states, ", "))
	}
	return b.String()
}

// doing is what the cluster is doing right now, in one line.
func doing(s *workflows.ClusterState, desired spec.Cluster) string {
	if s.ShownPhase() == workflows.PhaseMaintenance {
		return "maintenance: " + s.MaintenanceDetail()
	}
	switch s.Phase {
	case workflows.PhaseDeploying, workflows.PhaseUpdating:
		for i, level := range s.Levels {
			var parts []string
			done := true
			for _, name := range level {
				rs := s.Role(name)
				ready := plan.CountReady(rs.Members)
				done = done && ready == len(rs.Members)
				parts = append(parts, fmt.Sprintf("%s %d/%d ready", name, ready, len(rs.Members)))
			}
			if !done {
				return fmt.Sprintf("level %d/%d: %s", i+1, len(s.Levels), strings.Join(parts, ", "))
			}
		}
	case workflows.PhaseDeleting:
		deleted, total := plan.CountAll(s.Roles, plan.MemberDeleted)
		return fmt.Sprintf("deleting: %d/%d members removed", deleted, total)
	case workflows.PhaseRollingOut, workflows.PhaseRolloutPaused:
		return rolloutDetails(s, desired)
	}
	text := string(s.Phase)
	if s.Message != "" {
		text += ": " + s.Message
	}
	return text + failingChecks(s)
}

// failingChecksShown is how many members failing their own checks the details name.
const failingChecksShown = 5

// failingChecks names the members whose own checks took them down, with what the last
// check said, for the Web UI.
func failingChecks(s *workflows.ClusterState) string {
	var failing []string
	total := 0
	for _, rs := range s.Roles {
		for _, m := range rs.Members {
			if m.Health == nil || m.Health.LastCheck == nil || m.Health.LastCheck.Passed || (m.State != plan.MemberDown && m.State != plan.MemberFlapping) {
				continue
			}
			total++
			if len(failing) < failingChecksShown {
				c := m.Health.LastCheck
				failing = append(failing, fmt.Sprintf("%s (%s, %d in a row)", m.Name, c.Result, c.InARow))
			}
		}
	}
	if total == 0 {
		return ""
	}
	text := "; failing their checks: " + strings.Join(failing, ", ")
	if total > len(failing) {
		text += fmt.Sprintf(" and %d more", total-len(failing))
	}
	return text
}
