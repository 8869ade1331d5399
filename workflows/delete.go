package workflows

import (
	"fmt"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/spec"
)

// delete tears the cluster down in reverse dependency order and removes every member. It
// runs on a disconnected context: once started, nothing can stop it halfway and leave debris.
func (w *clusterWorkflow) delete(parent workflow.Context) {
	ctx, _ := workflow.NewDisconnectedContext(parent)
	w.state.Operations++
	w.setPhase(ctx, PhaseDeleting, "")
	w.state.Installed = nil // teardown scripts must be there, whatever became of the hosts' files
	if err := w.writeClusterFiles(ctx, true); err != nil {
		w.logger.Warn("Could not reinstall startscripts; teardown scripts may fail", "Error", err)
	}
	// A delete is the removal toward the empty spec: every member, whatever its state.
	w.runPass(ctx, spec.Cluster{}, plan.Removal(w.state.Levels, true), passHooks{})
	// Any reachable host may hold the folder of a member that has left.
	failed := w.hosts.onEachHost(withQuickActivity(ctx, "remove "+w.state.Name), w.reachableHosts(), func(ctx workflow.Context, _ string) error {
		return workflow.ExecuteActivity(ctx, actRemoveCluster, w.folder().Key()).Get(ctx, nil)
	})
	if w.onHosts() {
		w.hosts.reportPlacement(ctx, ClusterPlacement{Cluster: w.state.Name, Gone: true})
	}
	w.setPhase(ctx, PhaseDeleted, w.leftovers(describeFailures(failed)))
}

// leftovers says what could not be removed, so a user knows what to clean by hand.
func (c *cluster) leftovers(removeClusterFailures string) string {
	var notes []string
	var left []string
	for _, r := range c.state.Roles {
		for _, m := range r.Members {
			if m.State != MemberDeleted {
				left = append(left, m.Name)
			}
		}
	}
	if len(left) > 0 {
		notes = append(notes, fmt.Sprintf("could not remove %s; see their details", spec.Some(left, refusalNames)))
	}
	if removeClusterFailures != "" {
		notes = append(notes, "could not remove the cluster's folder: "+removeClusterFailures)
	}
	return strings.Join(notes, "; ")
}
