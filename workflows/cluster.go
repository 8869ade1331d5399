package workflows

import (
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// ClusterWorkflow is the entity workflow of one cluster, with ID cluster/<name>. It holds
// the desired spec and every member's observed state, deploys the roles level by level, and
// answers the status query until it is deleted.
func ClusterWorkflow(ctx workflow.Context, in ClusterInput) (ClusterStatus, error) {
	w, err := newClusterWorkflow(ctx, in)
	if err != nil {
		return ClusterStatus{}, err
	}
	if err := w.setup(ctx); err != nil {
		return ClusterStatus{}, err
	}
	return w.run(ctx)
}

type clusterWorkflow struct {
	spec   spec.Cluster
	state  ClusterStatus
	logger log.Logger

	deleteRequested bool
	// cancelOperation stops the operation in progress, so a delete need not wait for it.
	cancelOperation workflow.CancelFunc
	// activeOps maps a role to the child workflow whose progress reports are current.
	activeOps map[string]string
}

func newClusterWorkflow(ctx workflow.Context, in ClusterInput) (*clusterWorkflow, error) {
	w := &clusterWorkflow{spec: in.Spec, logger: workflow.GetLogger(ctx), activeOps: map[string]string{}}
	levels, err := spec.Levels(in.Spec.Roles)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid spec: "+err.Error(), "InvalidSpec", nil)
	}
	now := workflow.Now(ctx)
	w.state = ClusterStatus{
		Name: in.Spec.Name, Phase: PhaseDeploying, Origin: in.Spec.Origin,
		Levels: levels, CreatedAt: now, UpdatedAt: now,
	}
	for _, r := range in.Spec.Roles {
		rs := RoleStatus{Name: r.Name, Level: levelOf(levels, r.Name), DependsOn: r.DependsOn, Desired: r.Members}
		for ordinal := 0; ordinal < r.Members; ordinal++ {
			rs.Members = append(rs.Members, Member{
				Name: spec.MemberName(in.Spec.Name, r.Name, ordinal), Role: r.Name, Ordinal: ordinal,
				State: MemberPending, Since: now,
			})
		}
		w.state.Roles = append(w.state.Roles, rs)
	}
	return w, nil
}

func (w *clusterWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, StatusQuery, func() (ClusterStatus, error) {
		return w.snapshot(), nil
	}, workflow.QueryHandlerOptions{Description: "The cluster's phase, roles and members, as `clusterflow status -o json` prints them"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, DeleteUpdate, w.onDelete, workflow.UpdateHandlerOptions{
		Description: "Delete the cluster: stop what runs, tear members down and remove them",
	}); err != nil {
		return err
	}
	progress := workflow.GetSignalChannel(ctx, RoleProgressSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p RoleProgress
			progress.Receive(ctx, &p)
			w.applyProgress(ctx, p)
		}
	})
	return workflow.UpsertTypedSearchAttributes(ctx,
		ClusterNameKey.ValueSet(w.state.Name), ClusterPhaseKey.ValueSet(string(w.state.Phase)))
}

func (w *clusterWorkflow) run(ctx workflow.Context) (ClusterStatus, error) {
	opCtx, cancel := workflow.WithCancel(ctx)
	w.cancelOperation = cancel
	w.deploy(opCtx)
	w.cancelOperation = nil
	if err := workflow.Await(ctx, func() bool { return w.deleteRequested }); err != nil {
		// The workflow itself was cancelled (say from the Web UI): leave nothing behind.
		w.logger.Info("Cluster workflow cancelled; deleting the cluster")
	}
	w.delete(ctx)
	if ctx.Err() != nil {
		return w.snapshot(), ctx.Err()
	}
	// Let the delete update that got us here return before the workflow closes.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return w.snapshot(), nil
}

// onDelete accepts a delete in any phase. A second delete while one runs changes nothing.
func (w *clusterWorkflow) onDelete(ctx workflow.Context) (ClusterStatus, error) {
	if !w.deleteRequested {
		w.deleteRequested = true
		if w.cancelOperation != nil {
			w.cancelOperation()
		}
	}
	return w.snapshot(), nil
}

// setPhase records a phase change where operators look: status, search attributes, details.
func (w *clusterWorkflow) setPhase(ctx workflow.Context, phase Phase, message string) {
	changed := w.state.Phase != phase
	w.state.Phase, w.state.Message = phase, message
	w.touch(ctx)
	if changed {
		if err := workflow.UpsertTypedSearchAttributes(ctx, ClusterPhaseKey.ValueSet(string(phase))); err != nil {
			w.logger.Warn("Could not upsert the ClusterPhase search attribute", "Error", err)
		}
	}
	w.logger.Info("Cluster phase", "Phase", phase, "Message", message)
}

// touch notes that the state changed and refreshes the workflow's current details.
func (w *clusterWorkflow) touch(ctx workflow.Context) {
	w.state.UpdatedAt = workflow.Now(ctx)
	workflow.SetCurrentDetails(ctx, w.details())
}

func (w *clusterWorkflow) applyProgress(ctx workflow.Context, p RoleProgress) {
	if w.activeOps[p.Role] != p.Operation {
		return // the operation already finished and its result is applied
	}
	w.applyMembers(p.Role, p.Members)
	w.touch(ctx)
}

// applyMembers overwrites members of a role by name.
func (w *clusterWorkflow) applyMembers(role string, members []Member) {
	rs := w.state.Role(role)
	if rs == nil {
		return
	}
	for _, m := range members {
		for i := range rs.Members {
			if rs.Members[i].Name == m.Name {
				rs.Members[i] = m
			}
		}
	}
}

// snapshot is the status as users see it, with derived counts filled in.
func (w *clusterWorkflow) snapshot() ClusterStatus {
	s := w.state
	s.Roles = make([]RoleStatus, len(w.state.Roles))
	for i, r := range w.state.Roles {
		r.Ready = CountReady(r.Members)
		s.Roles[i] = r
	}
	return s
}

func levelOf(levels [][]string, role string) int {
	for i, level := range levels {
		for _, name := range level {
			if name == role {
				return i
			}
		}
	}
	return -1
}

func countMembers(roles []RoleStatus, states ...MemberState) (matching, total int) {
	for _, r := range roles {
		for _, m := range r.Members {
			total++
			for _, s := range states {
				if m.State == s {
					matching++
					break
				}
			}
		}
	}
	return matching, total
}
