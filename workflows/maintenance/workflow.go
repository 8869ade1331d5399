package maintenance

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// maintenanceChangesPerRun bounds a run's history: each change is an update and a broadcast.
const maintenanceChangesPerRun = 200

// Workflow keeps the fleet's maintenance flag (see maintenance_api.go). Each
// change is told to every running cluster and to the host registry before the update that
// made it returns, so that `clusterflow maintenance on` returns once the fleet is held.
func Workflow(ctx workflow.Context, in workflows.MaintenanceInput) error {
	m := &maintenanceFlag{current: in.Maintenance, lock: workflow.NewMutex(ctx)}
	if err := m.setup(ctx); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool {
		return m.changes >= maintenanceChangesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
	}); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, workflows.MaintenanceWorkflowName, workflows.MaintenanceInput{Maintenance: m.current})
}

type maintenanceFlag struct {
	current workflows.Maintenance
	changes int
	// lock keeps broadcasts in the order of the changes, so the last one told is the flag.
	lock workflow.Mutex
}

func (m *maintenanceFlag) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.MaintenanceQuery, func() (workflows.Maintenance, error) {
		return m.current, nil
	}, workflow.QueryHandlerOptions{Description: "Whether maintenance is on, since when and why"}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, workflows.SetMaintenanceUpdate, m.set, workflow.UpdateHandlerOptions{
		Validator: validateMaintenance, Description: "Turn maintenance on {on: true, reason} or off {on: false}; returns once every cluster was told",
	})
}

func validateMaintenance(req workflows.MaintenanceRequest) error {
	if req.On && req.Reason == "" {
		return flow.Refused(apperr.Invalid, "maintenance on refused: give a reason (--reason), so that everyone refused knows why")
	}
	return nil
}

// set changes the flag (turning it on again keeps its Since, with the new reason) and tells
// the fleet. Telling again when nothing changed reaches clusters started since.
func (m *maintenanceFlag) set(ctx workflow.Context, req workflows.MaintenanceRequest) (workflows.MaintenanceResult, error) {
	if err := m.lock.Lock(ctx); err != nil {
		return workflows.MaintenanceResult{}, err
	}
	defer m.lock.Unlock()
	switch {
	case req.On && !m.current.On:
		m.current = workflows.Maintenance{On: true, Reason: req.Reason, Since: workflow.Now(ctx)}
	case req.On:
		m.current.Reason = req.Reason
	default:
		m.current = workflows.Maintenance{}
	}
	m.changes++
	workflow.GetLogger(ctx).Info("Maintenance set", "On", m.current.On, "Reason", m.current.Reason)
	told := m.current
	ActCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 10 * time.Second},
		Summary:             "tell every cluster of maintenance",
	})
	var reached int
	err := workflow.ExecuteActivity(ActCtx, flow.ActSignalAll, workflows.Broadcast{
		WorkflowType: workflows.ClusterWorkflowName, Also: []string{workflows.HostsWorkflowID}, Signal: workflows.MaintenanceSignal, Arg: told,
	}).Get(ctx, &reached)
	return workflows.MaintenanceResult{Maintenance: told, Clusters: reached}, err
}
