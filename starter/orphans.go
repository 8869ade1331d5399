package starter

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/workflows"
)

// Orphan is a cluster's files on a host while the cluster has no running workflow: it was
// terminated (from the Web UI, say), or deleted while the host was away; or files of an
// earlier cluster of the same name. Files another server or namespace owns (they share
// the host's data folder, as a migration's source and target do), and those of a cluster
// exported from here, are never orphans.
type Orphan struct {
	Host    string `json:"host"`
	Cluster string `json:"cluster"`
	// Home is the folder's (see ClusterStatus.Home): the folder is Cluster@Home.
	Home    string   `json:"home,omitempty"`
	Members []string `json:"members"`
	// MoreMembers counts the members a host found beyond those it names.
	MoreMembers int `json:"moreMembers,omitempty"`
	// Workflow says what became of the cluster's workflow: "none", "terminated" ….
	Workflow string `json:"workflow"`
	Removed  bool   `json:"removed,omitempty"`
}

// Orphans looks on every host that is not lost (the one shared queue in single-host mode)
// for files of clusters without a running workflow, and removes them when asked, stopping
// whatever their members left running. Nothing is removed unless asked, and nothing that
// another server or namespace owns, or that was exported from here.
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
			if c.Elsewhere {
				continue
			}
			how, err := s.workflowState(ctx, c.Cluster, c.Home)
			if err != nil {
				return orphans, err
			}
			if how != "running" && how != "exported" {
				here = append(here, Orphan{Host: hostName(host), Cluster: c.Cluster, Home: c.Home, Members: c.Members, MoreMembers: c.MoreMembers, Workflow: how})
			}
		}
		if remove && len(here) > 0 {
			var clusters []string
			for _, o := range here {
				clusters = append(clusters, workflows.HostCluster{Cluster: o.Cluster, Home: o.Home}.Key())
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

func (s *Starter) hostClusters(ctx context.Context, host string, remove []string) ([]workflows.HostCluster, error) {
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.OrphansWorkflowID(hostName(host), uuid.NewString()), TaskQueue: s.taskQueue,
	}, workflows.OrphansWorkflowName, workflows.OrphansInput{Host: host, Remove: remove})
	var found []workflows.HostCluster
	if err == nil {
		err = run.Get(ctx, &found)
	}
	if err != nil {
		return nil, fmt.Errorf("look for orphans on host %s: %w", hostName(host), err)
	}
	return found, nil
}

// workflowState says what became of the cluster whose folder has that home: "running"
// when its workflow runs with that home, "exported" when it closed after a move, "none"
// when there never was one (or it is past retention), "replaced" when the one running has
// another home (the folder is an earlier cluster's of the same name), or how it closed.
func (s *Starter) workflowState(ctx context.Context, cluster, home string) (string, error) {
	desc, err := s.client.DescribeWorkflowExecution(ctx, workflows.ClusterWorkflowID(cluster), "")
	switch {
	case isNotFound(err):
		return "none", nil
	case err != nil:
		return "", fmt.Errorf("describe the workflow of cluster %s: %w", cluster, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if phase, ok := info.GetSearchAttributes().GetIndexedFields()[workflows.ClusterPhaseKey.GetName()]; ok {
			var p string
			if converter.GetDefaultDataConverter().FromPayload(phase, &p) == nil && workflows.Phase(p) == workflows.PhaseExported {
				return "exported", nil
			}
		}
		return closedHow(info.GetStatus()), nil
	}
	status, err := s.query(ctx, cluster, false)
	if err != nil {
		return "", err
	}
	if status.Home != home {
		return "replaced", nil
	}
	return "running", nil
}
