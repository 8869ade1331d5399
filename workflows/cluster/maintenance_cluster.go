package cluster

import (
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"go.temporal.io/sdk/workflow"
)

// receiveMaintenance takes the fleet's maintenance flag from the maintenance workflow. Turned
// on, it stops the operation in progress at its next member or level; turned off, what was
// held resumes (run's loop, the health timer).
func (w *clusterWorkflow) receiveMaintenance(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, workflows.MaintenanceSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var m workflows.Maintenance
			ch.Receive(ctx, &m)
			w.setMaintenance(ctx, m)
		}
	})
}

func (w *clusterWorkflow) setMaintenance(ctx workflow.Context, m workflows.Maintenance) {
	if m.On == w.InMaintenance() {
		return
	}
	if m.On {
		w.state.Maintenance = &m
		w.runner.Hold(ctx)
	} else {
		w.state.Maintenance = nil
		if held := w.state.HeldHosts; held != nil {
			w.state.HeldHosts = nil
			hosts.Changed(ctx, w, w.hostOptions, held)
		}
	}
	w.logger.Info("Maintenance", "On", m.On, "Reason", m.Reason)
	w.health.Wake() // wakes the health timer, which pauses or resumes
	w.showPhase(ctx)
}

func (c *cluster) InMaintenance() bool { return c.state.Maintenance != nil }

// showPhase shows the phase where operators look, maintenance included, in the search
// attribute and the current details.
func (w *clusterWorkflow) showPhase(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.ClusterPhaseKey.ValueSet(string(w.state.ShownPhase()))); err != nil {
		w.logger.Warn("Could not upsert the ClusterPhase search attribute", "Error", err)
	}
	w.Touch(ctx)
}
