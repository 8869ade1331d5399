package starter

import (
	"context"
	"fmt"
	"sort"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/workflows"
)

// ClusterSummary is one line of `clusterflow list`.
type ClusterSummary struct {
	Name      string     `json:"name"`
	Phase     string     `json:"phase"`
	Running   bool       `json:"running"`
	StartedAt time.Time  `json:"startedAt"`
	ClosedAt  *time.Time `json:"closedAt,omitempty"`
}

// List returns the clusters known to the namespace, newest first. Deleted clusters are
// included only when all is set.
func (s *Starter) List(ctx context.Context, all bool) ([]ClusterSummary, error) {
	// A cluster that continued as new has a closed run per operation batch; only its
	// latest run stands for it.
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'ContinuedAsNew'", workflows.ClusterWorkflowName)
	if !all {
		query += " AND ExecutionStatus = 'Running'"
	}
	var out []ClusterSummary
	var token []byte
	for {
		resp, err := s.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list clusters: %w", err)
		}
		for _, e := range resp.Executions {
			name, ok := workflows.ClusterNameFromWorkflowID(e.GetExecution().GetWorkflowId())
			if !ok {
				continue
			}
			c := ClusterSummary{
				Name:      name,
				Running:   e.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING,
				StartedAt: e.GetStartTime().AsTime(),
				Phase:     keyword(e.GetSearchAttributes().GetIndexedFields()[workflows.ClusterPhaseKey.GetName()]),
			}
			if e.GetCloseTime() != nil {
				closed := e.GetCloseTime().AsTime()
				c.ClosedAt = &closed
			}
			if !c.Running && c.Phase != string(workflows.PhaseDeleted) && c.Phase != string(workflows.PhaseExported) {
				// Closed without reaching deleted or exported: terminated or failed from outside.
				c.Phase = "closed (" + enumName(e.GetStatus()) + ")"
			}
			out = append(out, c)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// keyword reads a search attribute, which the SDK never passes through a codec (the
// server must index it), so the default converter reads it.
func keyword(p *commonpb.Payload) string {
	var s string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
	}
	return s
}

func enumName(s enums.WorkflowExecutionStatus) string { return s.String() }
