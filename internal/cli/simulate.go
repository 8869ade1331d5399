package cli

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend/factory"
	"github.com/clusterflow/clusterflow/internal/fleetsim"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
)

// runSimulate runs a fleet of simulated hosts (internal/fleetsim) until interrupted: the
// registry and clusters at thousands of hosts, on one machine.
func runSimulate(ctx context.Context, args []string) error {
	fs := newFlagSet("simulate", "--hosts N [--prefix P] [--host-timeout D] [--polls N] [--unanswered-writes N] [--slow-writes D] [--data DIR]")
	var conn connection
	conn.register(fs, "info")
	var hf hostFlags
	hf.register(fs, false)
	hosts := fs.Int("hosts", 0, "how many hosts to simulate")
	prefix := fs.String("prefix", "sim-", "the hosts' names are this and a number (sim-00042)")
	timeout := fs.Duration("host-timeout", workflows.DefaultHostTimeout, "each host's timeout")
	polls := fs.Int("polls", 1, "long polls each host keeps open on its task queue (a real host keeps 8)")
	unanswered := fs.Int("unanswered-writes", 0, "writes of cluster files each host takes first and never answers, as when an overloaded server's answer to a poll never reaches the host")
	slow := fs.Duration("slow-writes", 0, "how long each write of cluster files waits on its host before it runs, as on a busy host")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	switch {
	case *hosts < 1:
		return apperr.Errorf(apperr.Invalid, "--hosts: is %d; it must be at least 1", *hosts)
	case *timeout < time.Second:
		return apperr.Errorf(apperr.Invalid, "--host-timeout: is %s; it must be at least 1s", *timeout)
	case *polls < 1:
		return apperr.Errorf(apperr.Invalid, "--polls: is %d; it must be at least 1", *polls)
	case *unanswered < 0:
		return apperr.Errorf(apperr.Invalid, "--unanswered-writes: is %d; it must be at least 0", *unanswered)
	case *slow < 0:
		return apperr.Errorf(apperr.Invalid, "--slow-writes: is %s; it must be at least 0", *slow)
	}
	if err := spec.CheckName(*prefix + "00000"); err != nil {
		return apperr.Errorf(apperr.Invalid, "--prefix: %v", err)
	}
	logger, err := conn.logger()
	if err != nil {
		return err
	}
	settings, err := hf.settings(logger)
	if err != nil {
		return err
	}
	backendOpts, err := hf.agentOptions(settings, "", conn.common)
	if err != nil {
		return err
	}
	c, co, err := conn.connect(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	backendOpts.Worker.Namespace = co.Namespace
	backendOpts.Worker.Connection = agent.Connection{ClientConfigProfile: co, CodecKeyFile: conn.codecKeyFile}
	members, err := factory.Open(settings.Backend, backendOpts)
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err)
	}
	if keeper, ok := members.(interface{ KeepAgentAlive(context.Context) }); ok {
		go keeper.KeepAgentAlive(ctx)
	}
	start := time.Now()
	fleet, err := fleetsim.Start(ctx, c, fleetsim.Options{
		Prefix: *prefix, Hosts: *hosts, Timeout: *timeout, Polls: *polls, UnansweredWrites: *unanswered, SlowWrites: *slow, TaskQueue: conn.taskQueue, Backend: members, Logger: logger,
	})
	if err != nil {
		return err
	}
	logger.Info("Simulating hosts", zap.Int("hosts", *hosts), zap.Duration("registered in", time.Since(start)))
	<-ctx.Done()
	fleet.Stop()
	return nil
}
