package cluster

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// MemberLogWorkflow runs ReadMemberLog on the member's host.
func MemberLogWorkflow(ctx workflow.Context, in workflows.MemberLogInput) (backend.LogChunk, error) {
	ctx = onHost(withQuickActivity(ctx, "read output of "+in.Request.Member.Name), in.Host, clientTaskWait)
	var chunk backend.LogChunk
	err := workflow.ExecuteActivity(ctx, actReadMemberLog, in.Request).Get(ctx, &chunk)
	return chunk, err
}
