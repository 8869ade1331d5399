// Package worker wires clusterflow's workflows and activities into a Temporal worker.
package worker

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
)

// Options configure a worker.
type Options struct {
	// TaskQueue defaults to workflows.DefaultTaskQueue.
	TaskQueue string
	// Backend is where members live.
	Backend backend.Backend
	// Connection is how the agent that completes script activities reaches Temporal: the
	// settings the worker itself connected with.
	Connection agent.Connection
	// StopTimeout is how long in-flight activity tasks may take to finish once ctx ends
	// and polling stops (default: the SDK's, none). Script activities return at once, so
	// this covers the quick backend calls.
	StopTimeout time.Duration
}

// agentKeeper is a backend whose agent the worker keeps running while runs need it.
type agentKeeper interface {
	KeepAgentAlive(ctx context.Context)
}

// Run polls the task queue until ctx ends, then stops gracefully: it stops polling and lets
// in-flight activity tasks finish within StopTimeout.
func Run(ctx context.Context, c client.Client, opts Options) error {
	w, err := New(c, opts)
	if err != nil {
		return err
	}
	if keeper, ok := opts.Backend.(agentKeeper); ok {
		go keeper.KeepAgentAlive(ctx)
	}
	stop := make(chan any)
	go func() {
		<-ctx.Done()
		close(stop)
	}()
	if err := w.Run(stop); err != nil {
		return fmt.Errorf("worker on task queue %q: %w", opts.TaskQueue, err)
	}
	return nil
}

// New returns a worker with every workflow and activity registered, not yet started.
func New(c client.Client, opts Options) (sdkworker.Worker, error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("worker needs a member backend")
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	w := sdkworker.New(c, opts.TaskQueue, sdkworker.Options{
		// A wide role schedules hundreds of short activities at once; more pollers take
		// them off the queue in parallel instead of two at a time.
		MaxConcurrentActivityTaskPollers: 8,
		MaxConcurrentWorkflowTaskPollers: 4,
		// When a worker dies, work waiting on its sticky queue moves to any worker after
		// this long, once per workflow (a role child, then its cluster), so the SDK's 5s
		// made a replacement worker resume 10s late. A live worker picks sticky tasks up
		// within milliseconds; one that is slower replays from history instead.
		StickyScheduleToStartTimeout: time.Second,
		BuildID:                      buildID(),
		WorkerStopTimeout:            opts.StopTimeout,
	})
	RegisterWorkflows(w)
	w.RegisterActivity(&activities.Activities{Backend: opts.Backend, Connection: opts.Connection})
	return w, nil
}

// RegisterWorkflows adds clusterflow's workflows to a worker or a replayer.
func RegisterWorkflows(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(workflows.ClusterWorkflow, workflow.RegisterOptions{Name: workflows.ClusterWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.RoleWorkflow, workflow.RegisterOptions{Name: workflows.RoleWorkflowName})
}
