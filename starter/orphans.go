package starter

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/workflows"
)

// Orphan is a cluster's files on a host while the cluster has no running workflow: it was
// terminated (from the Web UI, say), or deleted while the host was away.
type Orphan struct {
	Host    string   `json:"host"`
	Cluster string   `json:"cluster"`
	Members []string `json:"members"`
	// MoreMembers counts the members a host found beyond those it names.
	MoreMembers int `json:"moreMembers,omitempty"`
	// Workflow says what became of the cluster's workflow: "none", "terminated" ….
	Workflow string `json:"workflow"`
	Removed  bool   `json:"removed,omitempty"`
}

// Orphans looks on every host that is not lost (the one shared queue in single-host mode)
// for files of clusters without a running workflow, and removes them when asked, stopping
// whatever their members left running. Nothing is removed unless asked.
func (s *Starter) Orphans(ctx context.Context, remove bool) ([]Orphan, error) {
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	names := []string{""}
	if len(hosts) > 0 {
		names = nil
		for _, h := range hosts {
			if !h.Lost {
				names = append(names, h.Name)
			}
		}
	}
	var orphans []Orphan
	for _, host := range names {
		found, err := s.hostClusters(ctx, host, nil)
		if err != nil {
			return orphans, err
		}
		var here []Orphan
		for _, c := range found {
			how, err := s.workflowState(ctx, c.Cluster)
			if err != nil {
				return orphans, err
			}
			if how != "running" {
				here = append(here, Orphan{Host: hostName(host), Cluster: c.Cluster, Members: c.Members, MoreMembers: c.MoreMembers, Workflow: how})
			}
		}
		if remove && len(here) > 0 {
			var clusters []string
			for _, o := range here {
				clusters = append(clusters, o.Cluster)
			}
			if _, err := s.hostClusters(ctx, host, clusters); err != nil {
				return append(orphans, here...), err
			}
			for i := range here {
				here[i].Removed = true
			}
		}
		orphans = append(orphans, here...)
	}
	return orphans, nil
}

func (s *Starter) hostClusters(ctx context.Context, host string, remove []string) ([]activities.ClusterSandboxes, error) {
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.OrphansWorkflowID(hostName(host), uuid.NewString()), TaskQueue: s.taskQueue,
	}, workflows.OrphansWorkflowName, workflows.OrphansInput{Host: host, Remove: remove})
	var found []activities.ClusterSandboxes
	if err == nil {
		err = run.Get(ctx, &found)
	}
	if err != nil {
		return nil, fmt.Errorf("look for orphans on host %s: %w", hostName(host), err)
	}
	return found, nil
}

// workflowState says whether a cluster's workflow runs: "running", "none" when there never
// was one (or it is past retention), or how it closed.
func (s *Starter) workflowState(ctx context.Context, cluster string) (string, error) {
	desc, err := s.client.DescribeWorkflowExecution(ctx, workflows.ClusterWorkflowID(cluster), "")
	switch {
	case isNotFound(err):
		return "none", nil
	case err != nil:
		return "", fmt.Errorf("describe the workflow of cluster %s: %w", cluster, err)
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "running", nil
	}
	return closedHow(status), nil
}
