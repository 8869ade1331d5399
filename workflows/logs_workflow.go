package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
)

// MemberLogWorkflowName reads part of a member's script output on the host holding it:
// a short workflow with one activity is how a client reaches a file on another host.
const MemberLogWorkflowName = "MemberLogWorkflow"

// MemberLogInput says which host to read on ("" in single-host mode) and what.
type MemberLogInput struct {
	Host    string             `json:"host,omitempty"`
	Request backend.LogRequest `json:"request"`
}

// MemberLogWorkflowID names one read of a member's output; id makes each read unique.
func MemberLogWorkflowID(cluster, member, id string) string {
	return "logs/" + cluster + "/" + member + "/" + id
}

// MemberLogWorkflow runs ReadMemberLog on the member's host.
func MemberLogWorkflow(ctx workflow.Context, in MemberLogInput) (backend.LogChunk, error) {
	ctx = onHost(withQuickActivity(ctx, "read output of "+in.Request.Member.Name), in.Host, clientTaskWait)
	var chunk backend.LogChunk
	err := workflow.ExecuteActivity(ctx, actReadMemberLog, in.Request).Get(ctx, &chunk)
	return chunk, err
}
