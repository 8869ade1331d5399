package cluster

import (
	"fmt"
	"strings"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

// rolloutDetails is a rollout's progress, role by role, and the revisions before it.
func (c *cluster) rolloutDetails() string {
	ro := rollout.Status(&c.state, c.spec)
	text := fmt.Sprintf("%s: %s", c.state.Phase, c.state.Rollout.What())
	if ro.Paused != "" {
		text += " paused: " + ro.Paused
	}
	for _, r := range ro.Roles {
		text += fmt.Sprintf("; %s %d updated, %d in watch, %d waiting, %d failed", r.Role, r.Updated, len(r.InWatch), r.Waiting, len(r.Failed))
	}
	if n := len(c.state.Revisions); n > 1 {
		prev := c.state.Revisions[n-2]
		text += fmt.Sprintf("; revision %d was %s", prev.Number, prev.Change)
	}
	return text
}

// details is the workflow's current details: what is happening right now, in one line.
func (c *cluster) details() string {
	if c.state.ShownPhase() == workflows.PhaseMaintenance {
		return "maintenance: " + c.state.MaintenanceDetail()
	}
	switch c.state.Phase {
	case workflows.PhaseDeploying, workflows.PhaseUpdating:
		for i, level := range c.state.Levels {
			var parts []string
			done := true
			for _, name := range level {
				rs := c.state.Role(name)
				ready := plan.CountReady(rs.Members)
				done = done && ready == len(rs.Members)
				parts = append(parts, fmt.Sprintf("%s %d/%d ready", name, ready, len(rs.Members)))
			}
			if !done {
				return fmt.Sprintf("level %d/%d: %s", i+1, len(c.state.Levels), strings.Join(parts, ", "))
			}
		}
	case workflows.PhaseDeleting:
		deleted, total := plan.CountAll(c.state.Roles, plan.MemberDeleted)
		return fmt.Sprintf("deleting: %d/%d members removed", deleted, total)
	case workflows.PhaseRollingOut, workflows.PhaseRolloutPaused:
		return c.rolloutDetails()
	}
	if c.state.Message == "" {
		return string(c.state.Phase)
	}
	return fmt.Sprintf("%s: %s", c.state.Phase, c.state.Message)
}
