package starter

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// MemberView is one member as `status NAME --member MEMBER` shows it: its state in the
// cluster, and what the host holding it says of it.
type MemberView struct {
	workflows.MemberStatus
	// OnHost is where the member lives and the runs of its scripts, as its host recorded
	// them (its dir, address and runs).
	OnHost backend.MemberDescription `json:"onHost"`
}

// Member asks the cluster for the member's state, and its host, through a short workflow
// on the host's queue, for where it lives and what ran for it.
func (s *Starter) Member(ctx context.Context, cluster, member string) (MemberView, error) {
	status, err := s.Status(ctx, cluster)
	if err != nil {
		return MemberView{}, err
	}
	m := status.Member(member)
	if m == nil {
		return MemberView{}, apperr.Errorf(apperr.NotFound, "cluster %s has no member %q (see `clusterflow status %s`)", cluster, member, cluster)
	}
	in := workflows.MemberDescribeInput{Host: m.Host, Member: backend.MemberRef{Cluster: cluster, Home: status.Home, Role: m.Role, Name: member}}
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.MemberDescribeWorkflowID(cluster, member, uuid.NewString()),
		TaskQueue: s.taskQueue,
	}, workflows.MemberDescribeWorkflowName, in)
	view := MemberView{MemberStatus: *m}
	if err == nil {
		err = run.Get(ctx, &view.OnHost)
	}
	if err != nil {
		return view, fmt.Errorf("ask host %s about %s: %w", hostName(m.Host), member, err)
	}
	return view, nil
}
