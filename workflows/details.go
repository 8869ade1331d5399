package workflows

import (
	"fmt"
	"strings"
)

// details is the workflow's current details: what is happening right now, in one line.
func (w *clusterWorkflow) details() string {
	if w.state.shownPhase() == PhaseMaintenance {
		return "maintenance: " + w.state.maintenanceDetail()
	}
	switch w.state.Phase {
	case PhaseDeploying, PhaseUpdating:
		for i, level := range w.state.Levels {
			var parts []string
			done := true
			for _, name := range level {
				rs := w.state.Role(name)
				ready := CountReady(rs.Members)
				done = done && ready == len(rs.Members)
				parts = append(parts, fmt.Sprintf("%s %d/%d ready", name, ready, len(rs.Members)))
			}
			if !done {
				return fmt.Sprintf("level %d/%d: %s", i+1, len(w.state.Levels), strings.Join(parts, ", "))
			}
		}
	case PhaseDeleting:
		deleted, total := countMembers(w.state.Roles, MemberDeleted)
		return fmt.Sprintf("deleting: %d/%d members removed", deleted, total)
	}
	if w.state.Message == "" {
		return string(w.state.Phase)
	}
	return fmt.Sprintf("%s: %s", w.state.Phase, w.state.Message)
}
