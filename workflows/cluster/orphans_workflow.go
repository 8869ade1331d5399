package cluster

import (
	"github.com/clusterflow/clusterflow/workflows"
	"go.temporal.io/sdk/workflow"
)

// OrphansWorkflow removes the clusters asked on the host, stopping whatever their members
// left running, and lists what is left there.
func OrphansWorkflow(ctx workflow.Context, in workflows.OrphansInput) ([]workflows.HostCluster, error) {
	ctx = onHost(withQuickActivity(ctx, "orphans on "+in.Host), in.Host, clientTaskWait)
	for _, cluster := range in.Remove {
		if err := workflow.ExecuteActivity(ctx, actRemoveCluster, cluster).Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	var found []workflows.HostCluster
	err := workflow.ExecuteActivity(ctx, actListHostClusters).Get(ctx, &found)
	return found, err
}
