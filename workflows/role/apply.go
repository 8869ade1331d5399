package role

import (
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// ApplyReport takes a role child's report of its members' states. The child owns only
// what happens to a member in its operation; who leaves, who knows whom and health are the
// cluster's to track. Output tails are kept for at most tailsPerRole members of a role.
// It returns the reports it took: none of members set up elsewhere since (Moved).
func ApplyReport(s *workflows.ClusterState, role string, members []plan.Member) []plan.Member {
	rs := s.Role(role)
	if rs == nil {
		return nil
	}
	tailed := -1 // counted when first needed
	var taken []plan.Member
	for _, m := range members {
		current := rs.Member(m.Name)
		if current == nil || current.Moved {
			continue
		}
		if m.Event == spec.EventDecommission {
			// A decommission changes no state: only its outcome, event and output are taken.
			taken = append(taken, m)
			current.Decommission, current.Event, current.Detail = m.Decommission, m.Event, spec.Clip(m.Detail, workflows.MaxDetail)
			current.StdoutTail, current.StderrTail = m.StdoutTail, m.StderrTail
			continue
		}
		if current.State.Unavailable() && m.State != plan.MemberDeleting && m.State != plan.MemberDeleted {
			continue // a health report that came in while a notification ran wins over its outcome
		}
		taken = append(taken, m)
		current.State, current.Event, current.Detail, current.Since = m.State, m.Event, spec.Clip(m.Detail, workflows.MaxDetail), m.Since
		current.LastLine, current.StdoutTail, current.StderrTail = m.LastLine, "", ""
		if m.Revision > 0 {
			current.Revision = m.Revision
		}
		if m.StdoutTail == "" && m.StderrTail == "" {
			continue
		}
		if tailed < 0 {
			tailed = countTailed(rs.Members)
		}
		if tailed < tailsPerRole {
			tailed++
			current.StdoutTail, current.StderrTail = m.StdoutTail, m.StderrTail
		} else if !strings.HasSuffix(current.Detail, workflows.SeeLogs) {
			current.Detail = spec.Clip(current.Detail, workflows.MaxDetail-len(workflows.SeeLogs)) + workflows.SeeLogs
		}
	}
	return taken
}

// tailsPerRole bounds the members of a role whose output tails the state keeps: status shows
// the first 20 members in trouble with their output, and the rest are in `logs`.
const tailsPerRole = 20

func countTailed(members []plan.Member) int {
	n := 0
	for _, m := range members {
		if m.StdoutTail != "" || m.StderrTail != "" {
			n++
		}
	}
	return n
}
