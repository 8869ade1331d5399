package cli

// dev's workers: in single-host mode, or as --hosts hosts of one process.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/internal/backend/factory"
	"github.com/clusterflow/clusterflow/internal/metrics"
	"github.com/clusterflow/clusterflow/internal/version"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
	"github.com/clusterflow/clusterflow/workflows"
)

// startDevWorkers starts dev's workers (none with --no-worker), in single-host mode or as
// --hosts hosts, once they are registered, and returns the wait for them to end after ctx
// has, which says whose member agents carry on.
func startDevWorkers(ctx context.Context, f devFlags, c client.Client, st *starter.Starter, profile envconfig.ClientConfigProfile, endpoint *metrics.Endpoint, logger *zap.Logger) (wait func() error, err error) {
	conn := agent.Connection{ClientConfigProfile: profile, CodecKeyFile: f.codecKeyFile}
	owner, err := st.NamespaceID(ctx, *f.namespace)
	if err != nil {
		return nil, err
	}
	var workers []devWorker
	if !*f.noWorker {
		settings, err := f.host.settings(logger)
		if err != nil {
			return nil, err
		}
		if workers, err = newDevWorkers(f.host, settings, f.com, agent.Worker{Owner: owner, Namespace: *f.namespace, Connection: conn}, *f.hosts); err != nil {
			return nil, err
		}
	}
	if len(workers) == 1 && endpoint != nil {
		reportAgent(endpoint, workers[0].members, logger) // the agent's metrics have no host label: one agent's
	}
	workerDone := make(chan error, len(workers))
	for _, w := range workers {
		opts := worker.Options{TaskQueue: f.com.taskQueue, Backend: w.members, Host: w.host, Logger: logger}
		go func() { workerDone <- worker.Run(ctx, c, opts) }()
	}
	if *f.hosts > 0 {
		// A deploy before the hosts are registered would place nothing on them.
		if err := waitForHosts(ctx, st, *f.hosts); err != nil {
			return nil, err
		}
	}
	return func() error {
		var err error
		for range workers {
			if werr := <-workerDone; werr != nil && err == nil {
				err = werr
			}
		}
		for _, w := range workers {
			if agent, ok := w.members.(interface{ AgentPID() (int, bool) }); !ok {
				continue
			} else if pid, ok := agent.AgentPID(); ok {
				// Detached on purpose, so that stopping dev never kills a script mid-run.
				fmt.Printf("The member agent (pid %d) carries on with any running scripts; it exits after 10 minutes with nothing to do.\n", pid)
			}
		}
		return err
	}, nil
}

// devDataHome is where a root dev keeps its members when their users could not reach the
// default data folder (below root's home, say): a folder of its own per state folder.
const devDataHome = "/var/lib/clusterflow"

// prepareDevData lets the users of a root dev's clusters reach their sandboxes. The state
// folder lets them through to the data kept in it and shows them nothing (0711: they can
// neither list it nor read what is in it, all of it 0600 or 0700). When a folder above it
// does not let them through (root's home, mode 0700), the members go to a folder of their
// own under /var/lib/clusterflow instead, unless --data was given, which is then refused
// saying why (hostFlags.settings).
func prepareDevData(f devFlags) error {
	s := f.host.scripts
	if os.Geteuid() != 0 || (s.allowRoot && s.user == "" && s.uids == "") {
		return nil
	}
	state, err := filepath.Abs(filepath.Dir(*f.db))
	if err != nil {
		return err
	}
	data, err := filepath.Abs(*f.host.data)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(state, data); err == nil && !strings.HasPrefix(rel, "..") {
		if err := os.Chmod(state, 0o711); err != nil {
			return err
		}
	}
	if f.dataGiven || traversable(data) == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(state))
	home := filepath.Join(devDataHome, "dev-"+hex.EncodeToString(sum[:6]))
	for _, dir := range []string{devDataHome, home} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
	}
	*f.host.data = filepath.Join(home, "data")
	fmt.Printf("Clusters run as users of their own, who cannot pass through a folder above %s: their sandboxes are kept in %s.\n", data, *f.host.data)
	return nil
}

// maxDevHosts keeps dev's hosts to what one machine makes sense of.
const maxDevHosts = 16

// devWorker is one of dev's workers: single-host (host nil) or one host of --hosts.
type devWorker struct {
	members backend.Backend
	host    *workflows.HostRegistration
}

// newDevWorkers makes dev's workers: one in single-host mode, keeping members in the data
// folder, or one per host, each with a data folder (and agent) of its own beside it.
func newDevWorkers(hf hostFlags, base hostSettings, com common, w agent.Worker, hosts int) ([]devWorker, error) {
	open := func(s hostSettings, w agent.Worker) (backend.Backend, error) {
		o, err := hf.agentOptions(s, "", com)
		if err != nil {
			return nil, err
		}
		o.Worker = w
		return factory.Open(s.Backend, o)
	}
	if hosts == 0 {
		members, err := open(base, w)
		if err != nil {
			return nil, err
		}
		fmt.Printf("Member sandboxes: %s\n", base.Data)
		return []devWorker{{members: members}}, nil
	}
	var workers []devWorker
	for i := 1; i <= hosts; i++ {
		name := fmt.Sprintf("host-%d", i)
		s, hw := base, w
		s.Data, hw.Host, hw.Address = filepath.Join(filepath.Dir(base.Data), "hosts", name), name, "127.0.0.1"
		members, err := open(s, hw)
		if err != nil {
			return nil, err
		}
		workers = append(workers, devWorker{members: members, host: &workflows.HostRegistration{
			Name: name, Address: "127.0.0.1", Timeout: workflows.DefaultHostTimeout, BootID: bootID(), Version: version.Get().String(),
		}})
	}
	fmt.Printf("Hosts:            %d, sandboxes in %s\n", hosts, filepath.Join(filepath.Dir(base.Data), "hosts"))
	return workers, nil
}

// waitForHosts waits, up to a minute, until n hosts are ready.
func waitForHosts(ctx context.Context, st *starter.Starter, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		hosts, err := st.Hosts(ctx)
		ready := 0
		for _, h := range hosts {
			if h.State() == workflows.HostReady {
				ready++
			}
		}
		if err == nil && ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev's %d hosts did not all become ready within a minute (%d are): %v", n, ready, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
