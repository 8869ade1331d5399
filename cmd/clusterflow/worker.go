package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
)

func runWorker(ctx context.Context, args []string) error {
	fs := newFlagSet("worker", "[--data DIR] [flags]")
	var conn connection
	conn.register(fs, "info")
	data := fs.String("data", ".clusterflow/data", "folder for member sandboxes")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	logger, err := conn.logger()
	if err != nil {
		return err
	}
	c, co, err := conn.connect(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	missing, err := starter.New(c, conn.taskQueue).MissingSearchAttributes(ctx, co.Namespace)
	switch {
	case err != nil:
		logger.Warn("Could not check clusterflow's search attributes; continuing", zap.Error(err))
	case len(missing) > 0:
		names := make([]string, 0, len(missing))
		for name := range missing {
			names = append(names, name)
		}
		slices.Sort(names)
		return fmt.Errorf("namespace %q lacks the search attributes %s: run `clusterflow setup` once against it", co.Namespace, strings.Join(names, ", "))
	}
	local, err := localBackend(*data, conn.common)
	if err != nil {
		return err
	}
	logger.Info("Worker starting", zap.String("address", co.Address), zap.String("namespace", co.Namespace),
		zap.String("taskQueue", conn.taskQueue), zap.String("data", *data))
	return worker.Run(ctx, c, worker.Options{TaskQueue: conn.taskQueue, Backend: local, Connection: co})
}
