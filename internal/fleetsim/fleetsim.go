// Package fleetsim runs a fleet of light hosts in one process, so that the registry can be
// tried at thousands of hosts on one machine. Each simulated host is what the registry and
// the clusters see of a real one: a worker polling the host's own task queue, with its own
// registration, check-ins and lease, running the real activities. What the hosts do not
// have of their own is the machine: they share one backend (one agent, one data folder),
// and each sees in it only the members placed on it (hostView).
package fleetsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/activities"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
)

// Options describe a simulated fleet.
type Options struct {
	// Prefix starts each host's name, which ends with its number: sim-00042.
	Prefix string
	Hosts  int
	// Timeout is each host's --host-timeout.
	Timeout time.Duration
	// Polls is how many long polls each host keeps open on its queue (default 1; a real
	// host keeps 8).
	Polls int
	// UnansweredWrites is how many writes of cluster files each host takes first and never
	// runs nor answers, as a host does whose poll's answer never reached it: the
	// server's side of an overloaded server, on purpose.
	UnansweredWrites int
	// SlowWrites is how long each write of cluster files waits on its host before it runs,
	// as on a busy host: the activity heartbeats meanwhile, as a real host's does.
	SlowWrites time.Duration
	TaskQueue  string
	// Backend runs every host's members.
	Backend backend.Backend
	Logger  *zap.Logger
}

// Fleet is a running simulated fleet.
type Fleet struct {
	workers []sdkworker.Worker
}

// registerAtOnce bounds the registrations in flight, which the server takes in parallel.
const registerAtOnce = 32

// Start starts every host's worker, then registers the hosts, returning once each is
// registered (not yet ready: each is once its worker takes its check-in).
func Start(ctx context.Context, c client.Client, opts Options) (*Fleet, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = workflows.DefaultTaskQueue
	}
	shared := &sharedBackend{Backend: opts.Backend, hostOf: map[memberKey]string{}}
	f := &Fleet{}
	var regs []workflows.HostRegistration
	for i := range opts.Hosts {
		name := fmt.Sprintf("%s%05d", opts.Prefix, i)
		reg := workflows.HostRegistration{Name: name, Address: "127.0.0.1", Timeout: opts.Timeout, BootID: "simulated"}
		w := sdkworker.New(c, workflows.HostTaskQueue(opts.TaskQueue, name), sdkworker.Options{
			// One poll each by default: thousands of hosts share one server and one process.
			MaxConcurrentActivityTaskPollers: max(opts.Polls, 1),
			DisableWorkflowWorker:            true, // as a real host's queue worker
			Identity:                         fmt.Sprintf("fleetsim%s%s", workflows.HostWorkerIdentity, name),
		})
		acts := &activities.Activities{Backend: hostView{sharedBackend: shared, host: name, slowWrites: opts.SlowWrites}, Host: &reg}
		if opts.UnansweredWrites > 0 {
			w.RegisterActivity(&unansweredWrites{Activities: acts, left: opts.UnansweredWrites})
		} else {
			w.RegisterActivity(acts)
		}
		if err := w.Start(); err != nil {
			f.Stop()
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		f.workers = append(f.workers, w)
		regs = append(regs, reg)
	}
	registrar := &worker.Registrar{Client: c, TaskQueue: opts.TaskQueue}
	work := make(chan workflows.HostRegistration)
	errs := make(chan error, registerAtOnce)
	var wg sync.WaitGroup
	for range registerAtOnce {
		wg.Go(func() {
			for reg := range work {
				// A server busy with thousands of hosts starting may time a call out: the
				// host tries again, as a worker's registration does.
				for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
					_, err := registrar.Register(ctx, reg)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("register %s: %w", reg.Name, err)
						return
					}
					opts.Logger.Warn("Could not register a simulated host; retrying", zap.String("host", reg.Name), zap.Error(err), zap.Duration("in", delay))
					select {
					case <-ctx.Done():
					case <-time.After(delay):
					}
				}
			}
		})
	}
	var err error
feed:
	for _, reg := range regs {
		select {
		case work <- reg:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	if err != nil {
		f.Stop()
		return nil, err
	}
	opts.Logger.Info("Simulated hosts registered", zap.Int("hosts", opts.Hosts), zap.String("prefix", opts.Prefix))
	return f, nil
}

// Stop stops every host's worker, as the machines dying would: their leases break.
func (f *Fleet) Stop() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, w := range f.workers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w.Stop()
		})
	}
	wg.Wait()
}

// unansweredWrites are a host's activities but for its first writes of cluster files,
// which it takes and leaves: no heartbeat, no answer, until the server times them out.
type unansweredWrites struct {
	*activities.Activities
	mu   sync.Mutex
	left int
}

func (u *unansweredWrites) WriteClusterFiles(ctx context.Context, files backend.ClusterFiles) error {
	u.mu.Lock()
	unanswered := u.left > 0
	if unanswered {
		u.left--
	}
	u.mu.Unlock()
	if unanswered {
		<-ctx.Done() // the task's own deadline: its answer would be refused by then
		return ctx.Err()
	}
	return u.Activities.WriteClusterFiles(ctx, files)
}
