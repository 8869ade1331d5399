package cluster

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// setTransferHandlers registers export and retire, the source's side of moving a cluster to
// another Temporal server. The target's side is a cluster workflow started from the export
// as from a continue-as-new: no script runs to adopt the members.
func (u *updates) setTransferHandlers(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.ExportUpdate, u.onExport, workflow.UpdateHandlerOptions{
		Validator: u.validateExport, Description: "Read the whole cluster for `clusterflow export`, once no operation runs",
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, workflows.RetireUpdate, u.onRetire, workflow.UpdateHandlerOptions{
		Validator: u.validateRetire, Description: "Close the cluster as exported, without teardown, after a move",
	})
}

// validateExport refuses while an operation runs or is about to: its members' states are
// changing. The starter asks again until its timeout.
func (u *updates) validateExport() error {
	if err := u.refuseWhileDeleting("export"); err != nil {
		return err
	}
	if u.w.operating || u.w.operationDue() {
		return flow.Refused(apperr.Unavailable, "export refused: cluster %s is running an operation (%s); export reads a cluster between operations", u.w.state.Name, u.w.state.Phase)
	}
	return nil
}

func (u *updates) onExport(ctx workflow.Context) (workflows.ClusterExport, error) {
	// The target keeps its own maintenance and export marks.
	state := u.w.state
	state.Maintenance, state.ExportedIn, state.HeldHosts = nil, time.Time{}, nil
	export := workflows.ClusterExport{
		Name: u.w.state.Name, Phase: u.w.state.Phase, Generation: u.w.state.Generation, Spec: u.w.spec,
		InMaintenance: u.w.InMaintenance(),
	}
	if err := export.Pack(workflows.Carried{State: state, Removed: u.w.removed, Retiring: u.w.retiring}); err != nil {
		return workflows.ClusterExport{}, fmt.Errorf("export of cluster %s: %w", u.w.state.Name, err)
	}
	if u.w.InMaintenance() {
		u.w.state.ExportedIn = u.w.state.Maintenance.Since
	}
	return export, nil
}

// validateRetire allows a retire only after an export taken in the maintenance still on:
// nothing can have changed since, so the export holds all of the cluster.
func (u *updates) validateRetire() error {
	if err := u.refuseWhileDeleting("retire"); err != nil {
		return err
	}
	if m := u.w.state.Maintenance; m == nil || !u.w.state.ExportedIn.Equal(m.Since) {
		return flow.Refused(apperr.Conflict, "retire refused: cluster %s was not exported during the maintenance now on; turn maintenance on, export it, import the file on the target, then retire it", u.w.state.Name)
	}
	if u.w.operating {
		return flow.Refused(apperr.Conflict, "retire refused: cluster %s is still running an operation", u.w.state.Name)
	}
	return nil
}

func (u *updates) onRetire(ctx workflow.Context) (workflows.ClusterStatus, error) {
	u.w.retireRequested = true
	return u.w.snapshot(), nil
}

// retire closes the workflow as exported. No teardown runs: the members are the imported
// cluster's now, on the other server.
func (w *clusterWorkflow) retire(ctx workflow.Context) (workflows.ClusterStatus, error) {
	if w.state.OnHosts {
		hosts.ReportPlacement(ctx, w, workflows.ClusterPlacement{Cluster: w.state.Name, Gone: true})
	}
	w.state.Maintenance = nil
	w.SetPhase(ctx, workflows.PhaseExported, "moved to another server; its members were left as they were")
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return w.snapshot(), err
	}
	return w.snapshot(), nil
}
