package hosts

import (
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"go.temporal.io/sdk/workflow"
)

// OrphansWorkflow removes the clusters asked on the host, stopping whatever their members
// left running, and lists what is left there.
func OrphansWorkflow(ctx workflow.Context, in workflows.OrphansInput) ([]workflows.HostCluster, error) {
	ctx = flow.OnHost(flow.WithQuickActivity(ctx, "orphans on "+in.Host), in.Host, flow.ClientTaskWait)
	for _, cluster := range in.Remove {
		if err := workflow.ExecuteActivity(ctx, flow.ActRemoveCluster, cluster).Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	var found []workflows.HostCluster
	err := workflow.ExecuteActivity(ctx, flow.ActListHostClusters).Get(ctx, &found)
	return found, err
}
