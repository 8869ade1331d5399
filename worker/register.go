package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/clusterflow/clusterflow/workflows"
)

// Registrar registers hosts with their shard of the host registry (see hosts_api.go),
// starting the registry or the shard when it does not run yet. A registry that kept every
// host itself, as before shards, is first asked to move them into shards, and waited for.
type Registrar struct {
	Client    client.Client
	TaskQueue string
	// sharded remembers the registry was found sharded (it stays so): a fleet registering
	// through one Registrar asks once.
	sharded atomic.Bool
}

// awaitShardsFor bounds how long a registration waits for the registry to answer, or to
// move into shards, before it fails (and the worker tries again, saying why).
const awaitShardsFor = 30 * time.Second

// Register registers the host and returns it as its shard keeps it.
func (r *Registrar) Register(ctx context.Context, reg workflows.HostRegistration) (workflows.Host, error) {
	if err := r.awaitShards(ctx); err != nil {
		return workflows.Host{}, fmt.Errorf("register host %s: %w", reg.Name, err)
	}
	shard := workflows.HostShard(reg.Name)
	start := r.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: workflows.HostShardWorkflowID(shard), TaskQueue: r.TaskQueue, StaticSummary: "clusterflow host registry shard",
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.HostShardWorkflowName, workflows.HostsInput{Shard: shard})
	handle, err := r.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: workflows.RegisterHostUpdate, Args: []any{reg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var host workflows.Host
	if err == nil {
		err = handle.Get(ctx, &host)
	}
	if err != nil {
		return host, fmt.Errorf("register host %s: %w", reg.Name, err)
	}
	return host, nil
}

// awaitShards returns once the registry runs sharded, starting it or asking it to move
// into shards as needed. A registry just started answers its first query a moment later.
func (r *Registrar) awaitShards(ctx context.Context) error {
	giveUp := time.Now().Add(awaitShardsFor)
	for moveAsked := false; !r.sharded.Load(); {
		var info workflows.RegistryInfo
		resp, err := r.Client.QueryWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.RegistryQuery)
		if err == nil {
			err = resp.Get(&info)
		}
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			// The directory must run before the shard, which tells it that it started.
			if _, err := r.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: workflows.HostsWorkflowID, TaskQueue: r.TaskQueue, StaticSummary: "clusterflow host registry",
				WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			}, workflows.HostsWorkflowName, workflows.HostsInput{}); err != nil {
				return fmt.Errorf("start the registry: %w", err)
			}
		case err != nil:
			// Starting, or busy: asked again below.
		case info.Sharded:
			r.sharded.Store(true)
			return nil
		case !moveAsked:
			if err := r.Client.SignalWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.ShardRegistrySignal, nil); err != nil {
				return fmt.Errorf("ask the registry to move into shards: %w", err)
			}
			moveAsked = true
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("the registry did not run sharded within %s (last answer: %v)", awaitShardsFor, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the registry to run sharded: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
