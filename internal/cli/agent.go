package cli

import (
	"context"
	"errors"
	"time"

	"github.com/clusterflow/clusterflow/internal/agent"
	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/backend/local"
)

func runAgent(ctx context.Context, args []string) error {
	preferSmallHeap()
	fs := newFlagSet("agent", "[--data DIR] [flags]")
	var com common
	com.register(fs, "info")
	fs.Lookup("task-queue").Hidden = true // the agent polls no task queue
	data := fs.String("data", ".clusterflow/data", "the worker's data folder; the agent keeps its state in its agent/ folder")
	dir := fs.String("dir", "", "the agent's own folder (default DATA/agent)")
	idle := fs.Duration("idle-exit", 10*time.Minute, "exit after having nothing to do for this long (0: never)")
	heartbeat := fs.Duration("heartbeat", 2*time.Second, "how often running scripts report progress to Temporal")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *heartbeat <= 0 || *heartbeat > 2*time.Second {
		return apperr.Errorf(apperr.Invalid, "--heartbeat %s: must be more than 0 and at most 2s", *heartbeat)
	}
	if *dir == "" {
		*dir = local.AgentDir(*data)
	}
	logger, err := com.logger()
	if err != nil {
		return err
	}
	err = agent.Serve(ctx, agent.Options{Dir: *dir, Logger: logger, HeartbeatEvery: *heartbeat, IdleExit: *idle})
	if errors.Is(err, agent.ErrAlreadyRunning) {
		logger.Info("An agent already serves this folder; leaving it to that one")
		return nil
	}
	return err
}
