package starter

import (
	"context"

	"github.com/clusterflow/clusterflow/workflows"
)

// ReportMemberEvent reports a member's health and returns the transition it caused. An
// unknown member (not_found) or event (invalid) is refused by name before anything changes.
func (s *Starter) ReportMemberEvent(ctx context.Context, cluster string, ev workflows.MemberEvent) (workflows.MemberEventResult, error) {
	var res workflows.MemberEventResult
	if err := workflows.CheckMemberEventText(ev); err != nil {
		return res, err
	}
	err := s.update(ctx, cluster, workflows.MemberEventUpdate, &res, ev)
	return res, err
}

// SignalMemberEvent sends the member-event signal, as any health checker would from any
// Temporal SDK: nothing comes back, and an unknown member is only logged by the workflow.
func (s *Starter) SignalMemberEvent(ctx context.Context, cluster string, ev workflows.MemberEvent) error {
	if err := workflows.CheckMemberEventText(ev); err != nil {
		return err
	}
	err := s.client.SignalWorkflow(ctx, workflows.ClusterWorkflowID(cluster), "", workflows.MemberEventSignal, ev)
	return s.clusterError(ctx, cluster, "signal", err)
}

// Resume lifts the meltdown guard's pause on the cluster's roles, and flapping marks.
func (s *Starter) Resume(ctx context.Context, cluster string) (workflows.ResumeResult, error) {
	var res workflows.ResumeResult
	err := s.update(ctx, cluster, workflows.ResumeUpdate, &res)
	return res, err
}

// Reconcile compares the cluster's members with what the backend has, now.
func (s *Starter) Reconcile(ctx context.Context, cluster string) (workflows.ReconcileReport, error) {
	var res workflows.ReconcileReport
	err := s.update(ctx, cluster, workflows.ReconcileUpdate, &res)
	return res, err
}
