package hosts

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// MemberLogWorkflow runs ReadMemberLog on the member's host.
func MemberLogWorkflow(ctx workflow.Context, in workflows.MemberLogInput) (backend.LogChunk, error) {
	ctx = flow.OnHost(flow.WithQuickActivity(ctx, "read output of "+in.Request.Member.Name), in.Host, flow.ClientTaskWait)
	var chunk backend.LogChunk
	err := workflow.ExecuteActivity(ctx, flow.ActReadMemberLog, in.Request).Get(ctx, &chunk)
	return chunk, err
}

// MemberDescribeWorkflow runs DescribeMember on the member's host.
func MemberDescribeWorkflow(ctx workflow.Context, in workflows.MemberDescribeInput) (backend.MemberDescription, error) {
	ctx = flow.OnHost(flow.WithQuickActivity(ctx, "describe "+in.Member.Name), in.Host, flow.ClientTaskWait)
	var d backend.MemberDescription
	err := workflow.ExecuteActivity(ctx, flow.ActDescribeMember, in.Member).Get(ctx, &d)
	return d, err
}
