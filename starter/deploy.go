package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/gzjson"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// hostsQueryLimit bounds the wait for the host registry's answer.
const hostsQueryLimit = 20 * time.Second

// DeployOptions tune a new cluster's workflow.
type DeployOptions struct {
	// ContinueAsNewEvery, when positive, continues the workflow as new after that many
	// operations; tests use it to prove no state is lost.
	ContinueAsNewEvery int
}

// Deploy starts the workflow of a new cluster. The spec must come from spec.Load or
// spec.Parse, which validated it.
//
// When hosts are registered, the cluster's members are placed on them, and a deploy they
// cannot hold is refused before anything starts.
func (s *Starter) Deploy(ctx context.Context, c spec.Cluster, opts DeployOptions) error {
	c, err := s.sign(ctx, c, true)
	if err != nil {
		return err
	}
	if err := s.refuseInMaintenance(ctx, "deploy"); err != nil {
		return err
	}
	// The registry answers through a worker: without one, deploy as before and let the
	// cluster wait for a worker, rather than hang here.
	hostsCtx, cancel := context.WithTimeout(ctx, hostsQueryLimit)
	hosts, err := s.Hosts(hostsCtx)
	timedOut := hostsCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	switch {
	case err != nil && timedOut:
		return noWorker(s.taskQueue, err)
	case err != nil:
		return fmt.Errorf("deploy %s: %w", c.Name, err)
	}
	if hosts, err = s.fleetHosts(ctx, hosts); err != nil {
		return err
	}
	if len(hosts) > 0 {
		if err := workflows.CheckPlacement(c, hosts); err != nil {
			return apperr.Errorf(apperr.Invalid, "deploy refused: %v", err)
		}
	}
	in := workflows.ClusterInput{Spec: c, ContinueAsNewEvery: opts.ContinueAsNewEvery, Hosts: hosts}
	// A fleet of thousands of hosts passes Temporal's payload limits as plain JSON.
	if packed, err := gzjson.PackIfLarge(hosts); err != nil {
		return err
	} else if packed != nil {
		in.Hosts, in.HostsGzip = nil, packed
	}
	return s.startCluster(ctx, c, workflows.PhaseDeploying, in)
}

// startCluster starts a cluster's workflow, as a deploy or an import.
func (s *Starter) startCluster(ctx context.Context, c spec.Cluster, phase workflows.Phase, in workflows.ClusterInput) error {
	_, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        workflows.ClusterWorkflowID(c.Name),
		TaskQueue: s.taskQueue,
		// A deleted cluster's name may be used again; a live one may not.
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK hands back the running workflow as if it had just started.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.ClusterNameKey.ValueSet(c.Name),
			workflows.ClusterPhaseKey.ValueSet(string(phase)),
			workflows.ClusterRolesKey.ValueSet(c.RoleNames()),
			workflows.ClusterMembersKey.ValueSet(int64(c.TotalMembers())),
		),
		Memo: map[string]any{"spec": c.Name, "origin": c.Origin},
		// Static: the cluster as deployed. Its current details say what it is now.
		StaticSummary: workflows.Summary(c) + ", as deployed",
		StaticDetails: details(c),
	}, workflows.ClusterWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		return alreadyExists(c.Name)
	case missingSearchAttribute(err):
		return fmt.Errorf("deploy %s: %w (run `clusterflow setup` once against this Temporal namespace)", c.Name, err)
	case err != nil:
		return fmt.Errorf("deploy %s: %w", c.Name, err)
	}
	return nil
}

// details lists the roles for the workflow's static details in the Web UI.
func details(c spec.Cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster **%s**", c.Name)
	if c.Origin != "" {
		fmt.Fprintf(&b, " from `%s`", c.Origin)
	}
	b.WriteString(", as deployed (its current details show its roles now)")
	b.WriteString("\n\n| role | members | cardinality | depends on | startscript |\n|---|---|---|---|---|\n")
	for _, r := range c.Roles {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | `%s` |\n", r.Name, r.Members, r.Cardinality, strings.Join(r.DependsOn, ", "), r.Startscript)
	}
	return b.String()
}
