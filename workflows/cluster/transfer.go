package cluster

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// setTransferHandlers registers export and retire, the source's side of moving a cluster to
// another Temporal server. The target's side is a cluster workflow started from the export
// as from a continue-as-new: no script runs to adopt the members.
func (w *clusterWorkflow) setTransferHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.ExportUpdate, w.onExport, workflow.UpdateHandlerOptions{
		Validator: w.validateExport, Description: "Read the whole cluster for `clusterflow export`, once no operation runs",
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, workflows.RetireUpdate, w.onRetire, workflow.UpdateHandlerOptions{
		Validator: w.validateRetire, Description: "Close the cluster as exported, without teardown, after a move",
	})
}

// validateExport refuses while an operation runs or is about to: its members' states are
// changing. The starter asks again until its timeout.
func (c *cluster) validateExport() error {
	if err := c.refuseWhileDeleting("export"); err != nil {
		return err
	}
	if c.operating || c.operationDue() {
		return flow.Refused(apperr.Unavailable, "export refused: cluster %s is running an operation (%s); export reads a cluster between operations", c.state.Name, c.state.Phase)
	}
	return nil
}

func (w *clusterWorkflow) onExport(ctx workflow.Context) (workflows.ClusterExport, error) {
	// The target keeps its own maintenance and export marks.
	state := w.state
	state.Maintenance, state.ExportedIn, state.HeldHosts = nil, time.Time{}, nil
	export := workflows.ClusterExport{
		Name: w.state.Name, Phase: w.state.Phase, Generation: w.state.Generation, Spec: w.spec,
		InMaintenance: w.inMaintenance(),
	}
	if err := export.Pack(workflows.Carried{State: state, Removed: w.removed, Retiring: w.retiring}); err != nil {
		return workflows.ClusterExport{}, fmt.Errorf("export of cluster %s: %w", w.state.Name, err)
	}
	if w.inMaintenance() {
		w.state.ExportedIn = w.state.Maintenance.Since
	}
	return export, nil
}

// validateRetire allows a retire only after an export taken in the maintenance still on:
// nothing can have changed since, so the export holds all of the cluster.
func (c *cluster) validateRetire() error {
	if err := c.refuseWhileDeleting("retire"); err != nil {
		return err
	}
	if m := c.state.Maintenance; m == nil || !c.state.ExportedIn.Equal(m.Since) {
		return flow.Refused(apperr.Conflict, "retire refused: cluster %s was not exported during the maintenance now on; turn maintenance on, export it, import the file on the target, then retire it", c.state.Name)
	}
	if c.operating {
		return flow.Refused(apperr.Conflict, "retire refused: cluster %s is still running an operation", c.state.Name)
	}
	return nil
}

func (w *clusterWorkflow) onRetire(ctx workflow.Context) (workflows.ClusterStatus, error) {
	w.retireRequested = true
	return w.snapshot(), nil
}

// retire closes the workflow as exported. No teardown runs: the members are the imported
// cluster's now, on the other server.
func (w *clusterWorkflow) retire(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if w.state.OnHosts {
		w.reportPlacement(ctx, workflows.ClusterPlacement{Cluster: w.state.Name, Gone: true})
	}
	w.state.Maintenance = nil
	w.SetPhase(ctx, workflows.PhaseExported, "moved to another server; its members were left as they were")
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return w.snapshot(), err
	}
	return w.snapshot(), nil
}
