package starter

import (
	"context"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// addLastLines fills in running members' latest line of output from the heartbeats of
// their pending script activities, which live in the role child workflows. It is best
// effort: status without last lines is still right.
func (s *Starter) addLastLines(ctx context.Context, status *workflows.ClusterStatus) {
	running := map[string]*workflows.MemberStatus{}
	for i := range status.Roles {
		for j := range status.Roles[i].Members {
			if m := &status.Roles[i].Members[j]; m.State == workflows.MemberConfiguring || m.State == workflows.MemberDeleting {
				running[m.Name] = m
			}
		}
	}
	if len(running) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, queryPatience)
	defer cancel()
	cluster, err := s.client.DescribeWorkflowExecution(ctx, workflows.ClusterWorkflowID(status.Name), "")
	if err != nil {
		return
	}
	for _, child := range cluster.GetPendingChildren() {
		role, err := s.client.DescribeWorkflowExecution(ctx, child.GetWorkflowId(), child.GetRunId())
		if err != nil {
			continue
		}
		for _, act := range role.GetPendingActivities() {
			var p backend.Progress
			if act.GetHeartbeatDetails() == nil || s.dataConverter.FromPayloads(act.GetHeartbeatDetails(), &p) != nil {
				continue
			}
			if m := running[p.Member]; m != nil && string(m.Event) == p.Event {
				m.LastLine = p.LastLine
			}
		}
	}
}
