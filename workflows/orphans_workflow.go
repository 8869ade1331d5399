package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// OrphansWorkflowName lists the clusters with files on one host, after removing the ones
// asked: the starter decides which are orphans (no running workflow), since that takes a
// client. A short workflow is how a client runs work on another host.
const OrphansWorkflowName = "OrphansWorkflow"

// OrphansInput names the host ("" in single-host mode) and the clusters to remove there.
type OrphansInput struct {
	Host   string   `json:"host,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// OrphansWorkflowID names one look at a host's clusters; id makes it unique.
func OrphansWorkflowID(host, id string) string { return "orphans/" + host + "/" + id }

// OrphansWorkflow removes the clusters asked on the host, stopping whatever their members
// left running, and lists what is left there.
func OrphansWorkflow(ctx workflow.Context, in OrphansInput) ([]HostCluster, error) {
	ctx = onHost(withQuickActivity(ctx, "orphans on "+in.Host), in.Host, clientTaskWait)
	for _, cluster := range in.Remove {
		if err := workflow.ExecuteActivity(ctx, actRemoveCluster, cluster).Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	var found []HostCluster
	err := workflow.ExecuteActivity(ctx, actListHostClusters).Get(ctx, &found)
	return found, err
}
