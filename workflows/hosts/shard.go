package hosts

import (
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// ShardWorkflow keeps the hosts of one shard of the fleet (see hosts_api.go), as Workflow
// kept every host before shards.
func ShardWorkflow(ctx workflow.Context, in workflows.HostsInput) error {
	r := newHostsRegistry(ctx, in, in.Shard)
	if err := r.setup(ctx); err != nil {
		return err
	}
	if workflow.GetInfo(ctx).ContinuedExecutionRunID == "" && len(in.Hosts) == 0 {
		// Started by a host registering: the directory lists it and sets it up.
		err := workflow.SignalExternalWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.ShardStartedSignal, in.Shard).Get(ctx, nil)
		if err != nil {
			r.logger.Error("Could not tell the host registry this shard started", "Shard", in.Shard, "Error", err)
		}
	}
	return r.run(ctx)
}

// setupUnsharded lets a registry from before shards say it is one, and be asked to move
// into shards.
func (r *hostsRegistry) setupUnsharded(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.RegistryQuery, func() (workflows.RegistryInfo, error) {
		return workflows.RegistryInfo{}, nil
	}, workflow.QueryHandlerOptions{Description: "Whether the registry is sharded: not this one"}); err != nil {
		return err
	}
	moveOver := workflow.GetSignalChannel(ctx, workflows.ShardRegistrySignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		moveOver.Receive(ctx, nil)
		r.moveOver = true
	})
	return nil
}

// setupShard takes the directory's setup of a shard: the clusters that follow the hosts.
func (r *hostsRegistry) setupShard(ctx workflow.Context) {
	setups := workflow.GetSignalChannel(ctx, workflows.ShardSetupSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var setup workflows.ShardSetup
			setups.Receive(ctx, &setup)
			if setup.Maintenance != nil {
				r.maintenance = *setup.Maintenance
			}
			for _, cluster := range setup.Clusters {
				if _, known := r.clusters[cluster]; !known {
					r.place(workflows.ClusterPlacement{Cluster: cluster, Members: map[string]int{}})
				}
			}
		}
	})
}

// tell sends a cluster the current view: every host, or the shard's.
func (r *hostsRegistry) tell(ctx workflow.Context, cluster string) error {
	if r.shard == unsharded {
		return workflow.SignalExternalWorkflow(ctx, workflows.ClusterWorkflowID(cluster), "", workflows.HostsChangedSignal, slices.Clone(r.hosts)).Get(ctx, nil)
	}
	view := workflows.HostShardView{Shard: r.shard, Hosts: slices.Clone(r.hosts)}
	return workflow.SignalExternalWorkflow(ctx, workflows.ClusterWorkflowID(cluster), "", workflows.HostShardViewSignal, view).Get(ctx, nil)
}

// validateRegistration refuses a registration that is invalid, or a new host of a shard
// that holds all it may.
func (r *hostsRegistry) validateRegistration(reg plan.HostRegistration) error {
	if err := validateRegistration(reg); err != nil {
		return err
	}
	if r.shard != unsharded && r.host(reg.Name) == nil && len(r.hosts) >= workflows.MaxHostsPerShard {
		return flow.Refused(apperr.Conflict, "host %s registration refused: its registry shard %d holds %d hosts, its most (a fleet holds at most %d)",
			reg.Name, r.shard, len(r.hosts), workflows.MaxHostsPerShard*workflows.HostShards)
	}
	return nil
}
