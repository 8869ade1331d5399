package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/metrics"
	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/worker"
)

func runWorker(ctx context.Context, args []string) error {
	fs := newFlagSet("worker", "[--data DIR] [flags]")
	var conn connection
	conn.register(fs, "info")
	data := fs.String("data", ".clusterflow/data", "folder for member sandboxes")
	metricsAddress := fs.String("metrics-address", "", "serve Prometheus metrics at http://ADDRESS/metrics (default off)")
	stopTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long in-flight activity tasks may take to finish")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	logger, err := conn.logger()
	if err != nil {
		return err
	}
	if *metricsAddress != "" {
		// Served until the process exits, so that the worker's shutdown is reported too.
		if conn.metrics, err = metrics.Serve(context.WithoutCancel(ctx), *metricsAddress); err != nil {
			return apperr.Wrap(apperr.Invalid, err)
		}
		logger.Info("Serving metrics", zap.String("url", "http://"+*metricsAddress+"/metrics"))
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
	err = worker.Run(ctx, c, worker.Options{TaskQueue: conn.taskQueue, Backend: local, Connection: co, StopTimeout: *stopTimeout})
	logger.Info("Worker stopped")
	return err
}
