// Package worker wires clusterflow's workflows and activities into a Temporal worker.
package worker

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/signing"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/cluster"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/maintenance"
	"github.com/clusterflow/clusterflow/workflows/role"
)

// Options configure a worker.
type Options struct {
	// TaskQueue defaults to workflows.DefaultTaskQueue.
	TaskQueue string
	// Backend is where members live.
	Backend backend.Backend
	// StopTimeout is how long in-flight activity tasks may take to finish once ctx ends
	// and polling stops (default: the SDK's, none). Script activities return at once, so
	// this covers the quick backend calls.
	StopTimeout time.Duration
	// Host is the host this worker serves: it also polls the host's own task queue, where
	// its members' activities go, and registers the host. Nil is single-host mode.
	Host *workflows.HostRegistration
	// Admission is what this worker's host runs (worker --allow-clusters, …), enforced on
	// every task; a host advertises it in its registration too.
	Admission workflows.Admission
	// Trusted, when set, are the keys whose signed specs alone the host runs scripts of
	// (worker --trusted-keys).
	Trusted signing.Trusted
	// NamespaceID is the ID of the namespace the worker serves, which a signed spec names.
	NamespaceID string
	// Logger reports the host's registration.
	Logger *zap.Logger
}

// agentKeeper is a backend whose agent the worker keeps running while runs need it.
type agentKeeper interface {
	KeepAgentAlive(ctx context.Context)
}

// Run polls the task queue until ctx ends, then stops gracefully: it stops polling and lets
// in-flight activity tasks finish within StopTimeout.
func Run(ctx context.Context, c client.Client, opts Options) error {
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	w, err := New(c, opts)
	if err != nil {
		return err
	}
	if keeper, ok := opts.Backend.(agentKeeper); ok {
		go keeper.KeepAgentAlive(ctx)
	}
	if opts.Host != nil {
		hostWorker := newHostWorker(c, opts)
		if err := hostWorker.Start(); err != nil {
			return fmt.Errorf("worker on task queue %q: %w", workflows.HostTaskQueue(opts.TaskQueue, opts.Host.Name), err)
		}
		defer hostWorker.Stop()
		go register(ctx, c, opts)
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

// newHostWorker polls the host's own task queue, which carries its members' activities and
// its lease.
func newHostWorker(c client.Client, opts Options) sdkworker.Worker {
	w := sdkworker.New(c, workflows.HostTaskQueue(opts.TaskQueue, opts.Host.Name), sdkworker.Options{
		MaxConcurrentActivityTaskPollers: 8,
		// Only activities come to a host's queue. The SDK polls for workflow tasks even with
		// no workflow registered: two long polls a host that the server counts against its
		// limit of polls per frontend, for nothing.
		DisableWorkflowWorker: true,
		BuildID:               buildID(),
		WorkerStopTimeout:     opts.StopTimeout,
	})
	w.RegisterActivity(newActivities(opts))
	return w
}

// register adds the host to the registry, retrying until it is there or ctx ends: the
// server may still be starting.
func register(ctx context.Context, c client.Client, opts Options) {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		err := registerOnce(ctx, c, opts)
		if err == nil {
			logger.Info("Host registered", zap.String("host", opts.Host.Name), zap.String("address", opts.Host.Address))
			return
		}
		logger.Warn("Could not register the host; retrying", zap.String("host", opts.Host.Name), zap.Error(err), zap.Duration("in", delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// registerOnce registers the host with its shard of the registry, starting what is not
// running yet.
func registerOnce(ctx context.Context, c client.Client, opts Options) error {
	_, err := (&Registrar{Client: c, TaskQueue: opts.TaskQueue}).Register(ctx, activities.WithAgentVersion(ctx, *opts.Host, opts.Backend))
	return err
}

// The activities are the workflows' contract, and nothing else.
var _ workflows.ActivityContract = (*activities.Activities)(nil)

func newActivities(opts Options) *activities.Activities {
	return &activities.Activities{Backend: opts.Backend, Host: opts.Host, Admission: opts.Admission, Trusted: opts.Trusted, NamespaceID: opts.NamespaceID}
}

// deadlockDetection is how long one step of workflow code may run, by the wall clock,
// before the SDK fails the task as deadlocked. The SDK's 1 s fired on a busy 2-core machine
// when a worker replayed a cluster of 2,000 members: a step of a few milliseconds of CPU
// waited that long for the CPU. Workflow code never blocks outside workflow.*, and the
// server gives up on a workflow task after 10 s anyway (its default task timeout), so the
// detector waits as long as the server does.
const deadlockDetection = 10 * time.Second

// New returns a worker with every workflow and activity registered, not yet started.
func New(c client.Client, opts Options) (sdkworker.Worker, error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("worker needs a member backend")
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	identity := ""
	if opts.Host != nil {
		// Deploys look for host workers among the pollers: in a fleet, no member is placed
		// without a host, even before the first host registers.
		hostname, _ := os.Hostname()
		identity = fmt.Sprintf("%d@%s%s%s", os.Getpid(), hostname, workflows.HostWorkerIdentity, opts.Host.Name)
	}
	w := sdkworker.New(c, opts.TaskQueue, sdkworker.Options{
		Identity: identity,
		// A wide role schedules hundreds of short activities at once; more pollers take
		// them off the queue in parallel instead of two at a time.
		MaxConcurrentActivityTaskPollers: 8,
		MaxConcurrentWorkflowTaskPollers: 4,
		// When a worker dies, work waiting on its sticky queue moves to any worker after
		// this long, once per workflow (a role child, then its cluster), so the SDK's 5s
		// made a replacement worker resume 10s late. A live worker picks sticky tasks up
		// within milliseconds; one that is slower replays from history instead.
		StickyScheduleToStartTimeout: time.Second,
		DeadlockDetectionTimeout:     deadlockDetection,
		BuildID:                      buildID(),
		WorkerStopTimeout:            opts.StopTimeout,
	})
	RegisterWorkflows(w)
	w.RegisterActivity(newActivities(opts))
	return w, nil
}

// RegisterWorkflows adds clusterflow's workflows to a worker or a replayer.
func RegisterWorkflows(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(cluster.Workflow, workflow.RegisterOptions{Name: workflows.ClusterWorkflowName})
	r.RegisterWorkflowWithOptions(role.Workflow, workflow.RegisterOptions{Name: workflows.RoleWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.Workflow, workflow.RegisterOptions{Name: workflows.HostsWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.ShardWorkflow, workflow.RegisterOptions{Name: workflows.HostShardWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.MemberLogWorkflow, workflow.RegisterOptions{Name: workflows.MemberLogWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.MemberDescribeWorkflow, workflow.RegisterOptions{Name: workflows.MemberDescribeWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.OrphansWorkflow, workflow.RegisterOptions{Name: workflows.OrphansWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.ListingWorkflow, workflow.RegisterOptions{Name: workflows.HostsListingWorkflowName})
	r.RegisterWorkflowWithOptions(hosts.WritingWorkflow, workflow.RegisterOptions{Name: workflows.HostsWritingWorkflowName})
	r.RegisterWorkflowWithOptions(maintenance.Workflow, workflow.RegisterOptions{Name: workflows.MaintenanceWorkflowName})
}
