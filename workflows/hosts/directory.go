package hosts

import (
	"maps"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The sharded registry's own workflow is a directory (see hosts_api.go): it keeps no host.
// What it holds is bounded by the shards and the clusters, never by the fleet, and each
// signal it takes costs a few events: a shard started, a cluster's placement (forwarded to
// the shards holding its members, before and now), maintenance (forwarded to every shard).
type directory struct {
	shards []int
	// subscribers maps each cluster following the hosts to the shards that held its
	// members when it last reported.
	subscribers map[string][]int
	maintenance workflows.Maintenance
	logger      log.Logger
}

func runDirectory(ctx workflow.Context, in workflows.HostsInput) error {
	d := &directory{shards: in.Shards, subscribers: map[string][]int{}, maintenance: in.Maintenance, logger: workflow.GetLogger(ctx)}
	for _, s := range in.Subscribers {
		d.subscribers[s.Cluster] = s.Shards
	}
	if err := d.setup(ctx); err != nil {
		return err
	}
	switch {
	case len(in.Hosts) > 0 || len(in.Clusters) > 0:
		d.moveIn(ctx, in)
	case workflow.GetInfo(ctx).ContinuedExecutionRunID == "":
		d.findShards(ctx)
	}
	return d.run(ctx)
}

// findShards finds the shards already running when the directory starts afresh: none in a
// new fleet, every shard of one whose directory was cancelled or terminated. Each running
// shard is sent an empty setup, which it keeps nothing of, to learn whether it runs.
func (d *directory) findShards(ctx workflow.Context) {
	var setup workflows.ShardSetup
	futures := make([]workflow.Future, workflows.HostShards)
	for shard := range workflows.HostShards {
		futures[shard] = workflow.SignalExternalWorkflow(ctx, workflows.HostShardWorkflowID(shard), "", workflows.ShardSetupSignal, setup)
	}
	for shard, f := range futures {
		if f.Get(ctx, nil) == nil {
			d.shards = append(d.shards, shard)
		}
	}
	if len(d.shards) > 0 {
		d.logger.Info("Found the registry's shards running", "Shards", len(d.shards))
	}
}

func (d *directory) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.RegistryQuery, func() (workflows.RegistryInfo, error) {
		return workflows.RegistryInfo{Sharded: true, Shards: d.shards}, nil
	}, workflow.QueryHandlerOptions{Description: "The shards running, which keep the hosts"}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.HostsQuery, func() ([]plan.Host, error) {
		return nil, apperr.Errorf(apperr.Conflict, "the host registry is sharded: ask its shards (the %s query lists them)", workflows.RegistryQuery)
	}, workflow.QueryHandlerOptions{Description: "Refused: the hosts are kept by the shards"}); err != nil {
		return err
	}
	// A client from before shards sends host updates here; it hears why they are refused.
	for _, update := range []string{workflows.RegisterHostUpdate, workflows.CordonHostUpdate, workflows.DrainHostUpdate, workflows.ForgetHostUpdate} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, update, func(workflow.Context, any) error { return nil }, workflow.UpdateHandlerOptions{
			Validator: func(any) error {
				return flow.Refused(apperr.Conflict, "%s refused: the host registry is sharded, and each host's shard takes it; this client or worker predates shards", update)
			},
			Description: "Refused: each host's shard takes it",
		}); err != nil {
			return err
		}
	}
	return nil
}

// run forwards what arrives, one signal after another, until the history is long enough
// to start afresh.
func (d *directory) run(ctx workflow.Context) error {
	started := workflow.GetSignalChannel(ctx, workflows.ShardStartedSignal)
	placements := workflow.GetSignalChannel(ctx, workflows.ClusterHostsSignal)
	maintenance := workflow.GetSignalChannel(ctx, workflows.MaintenanceSignal)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(started, func(c workflow.ReceiveChannel, _ bool) {
		var shard int
		c.Receive(ctx, &shard)
		d.shardStarted(ctx, shard)
	})
	sel.AddReceive(placements, func(c workflow.ReceiveChannel, _ bool) {
		var p workflows.ClusterPlacement
		c.Receive(ctx, &p)
		d.place(ctx, p)
	})
	sel.AddReceive(maintenance, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &d.maintenance)
		d.signalShards(ctx, d.shards, func(int) (string, any) { return workflows.MaintenanceSignal, d.maintenance })
	})
	// Cancelled (from the Web UI, say), the directory ends; the shards keep the hosts, and
	// the next registration starts it afresh.
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	for ctx.Err() == nil {
		sel.Select(ctx)
		for sel.HasPending() && ctx.Err() == nil {
			sel.Select(ctx)
		}
		if continueAsNewDue(ctx) {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	next := workflows.HostsInput{Shards: d.shards, Maintenance: d.maintenance}
	for _, cluster := range slices.Sorted(maps.Keys(d.subscribers)) {
		next.Subscribers = append(next.Subscribers, workflows.ShardSubscriber{Cluster: cluster, Shards: d.subscribers[cluster]})
	}
	return workflow.NewContinueAsNewError(ctx, workflows.HostsWorkflowName, next)
}

// shardStarted lists a shard that started afresh, and tells it of the clusters following
// the hosts and of maintenance.
func (d *directory) shardStarted(ctx workflow.Context, shard int) {
	if !slices.Contains(d.shards, shard) {
		d.shards = append(d.shards, shard)
		slices.Sort(d.shards)
	}
	setup := workflows.ShardSetup{Clusters: slices.Sorted(maps.Keys(d.subscribers)), Maintenance: &d.maintenance}
	d.signalShards(ctx, []int{shard}, func(int) (string, any) { return workflows.ShardSetupSignal, setup })
}

// place forwards a cluster's placement, split by shard: to every shard when the cluster is
// new (each owes it its view) or gone, else to the shards holding its members now or when
// it last reported.
func (d *directory) place(ctx workflow.Context, p workflows.ClusterPlacement) {
	before, known := d.subscribers[p.Cluster]
	if p.Gone {
		delete(d.subscribers, p.Cluster)
		d.signalShards(ctx, d.shards, func(int) (string, any) { return workflows.ClusterHostsSignal, p })
		return
	}
	parts := map[int]map[string]int{}
	for _, host := range slices.Sorted(maps.Keys(p.Members)) {
		shard := workflows.HostShard(host)
		if parts[shard] == nil {
			parts[shard] = map[string]int{}
		}
		parts[shard][host] = p.Members[host]
	}
	now := slices.Sorted(maps.Keys(parts))
	d.subscribers[p.Cluster] = now
	targets := d.shards
	if known {
		targets = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(before), now...))))
	}
	d.signalShards(ctx, targets, func(shard int) (string, any) {
		part := parts[shard]
		if part == nil {
			part = map[string]int{}
		}
		return workflows.ClusterHostsSignal, workflows.ClusterPlacement{Cluster: p.Cluster, Members: part}
	})
}

// signalShards sends each shard its signal, all at once, and waits for them; a shard that
// is gone (terminated by hand) is logged, and starts afresh with its next host.
func (d *directory) signalShards(ctx workflow.Context, shards []int, signal func(shard int) (string, any)) {
	futures := make([]workflow.Future, len(shards))
	for i, shard := range shards {
		name, arg := signal(shard)
		futures[i] = workflow.SignalExternalWorkflow(ctx, workflows.HostShardWorkflowID(shard), "", name, arg)
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			d.logger.Warn("Could not signal a registry shard", "Shard", shards[i], "Error", err)
		}
	}
}

// moveIn moves the hosts of a registry that kept them all into shards: each shard that
// gets hosts starts with them, their marks, their members per cluster and the clusters
// following the hosts, and takes their leases over.
func (d *directory) moveIn(ctx workflow.Context, in workflows.HostsInput) {
	groups := map[int][]plan.Host{}
	for _, h := range in.Hosts {
		shard := workflows.HostShard(h.Name)
		groups[shard] = append(groups[shard], h)
	}
	var futures []workflow.ChildWorkflowFuture
	shards := slices.Sorted(maps.Keys(groups))
	for _, shard := range shards {
		var clusters []workflows.ClusterPlacement
		for _, c := range in.Clusters {
			part := map[string]int{}
			for host, n := range c.Members {
				if workflows.HostShard(host) == shard {
					part[host] = n
				}
			}
			clusters = append(clusters, workflows.ClusterPlacement{Cluster: c.Cluster, Members: part})
		}
		childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        workflows.HostShardWorkflowID(shard),
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
			StaticSummary:     "clusterflow host registry shard",
		})
		input := workflows.HostsInput{Shard: shard, Hosts: groups[shard], Clusters: clusters, Maintenance: in.Maintenance}
		futures = append(futures, workflow.ExecuteChildWorkflow(childCtx, workflows.HostShardWorkflowName, input))
	}
	for i, f := range futures {
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			d.logger.Error("Could not start a registry shard with its hosts", "Shard", shards[i], "Error", err)
			continue
		}
		d.shards = append(d.shards, shards[i])
	}
	slices.Sort(d.shards)
	d.shards = slices.Compact(d.shards)
	for _, c := range in.Clusters {
		var held []int
		for host := range c.Members {
			held = append(held, workflows.HostShard(host))
		}
		d.subscribers[c.Cluster] = slices.Compact(slices.Sorted(slices.Values(held)))
	}
	d.logger.Info("Hosts moved into shards", "Hosts", len(in.Hosts), "Shards", len(shards))
}
