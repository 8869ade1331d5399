// Package metrics serves a worker's Prometheus metrics: the Temporal SDK's, what the
// workflows count as they go (workflows/internal/metric), and, when asked, the state of
// every cluster and host read from Temporal at each scrape (state.go).
package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Endpoint is a running /metrics server.
type Endpoint struct {
	registry *prometheus.Registry
	sdk      client.MetricsHandler
}

// Serve listens on address and serves the metrics at /metrics until ctx ends. SDK goes
// into the client's options, so the client, every worker built on it and the workflows
// they run report through it.
func Serve(ctx context.Context, address string) (*Endpoint, error) {
	registry := prometheus.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: registry,
		// Histograms, unlike summaries, can be aggregated across worker replicas.
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: buckets,
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)

	ln, err := net.Listen("tcp", address)
	if err != nil {
		closer.Close()
		return nil, fmt.Errorf("metrics address %s: %w", address, err)
	}
	mux := http.NewServeMux()
	// The registry's own handler, not the reporter's: it also serves the collectors added
	// to the registry, the clusters' state among them.
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with ErrServerClosed on shutdown
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		closer.Close()
	}()
	return &Endpoint{registry: registry, sdk: sdktally.NewMetricsHandler(scope)}, nil
}

// SDK is the handler the client reports through.
func (e *Endpoint) SDK() client.MetricsHandler { return e.sdk }

// buckets are every timer's histogram buckets, in seconds: the SDK's latencies (a few
// milliseconds) and clusterflow's operations and scripts (seconds to an hour) alike. The
// reporter's default stops at 10 s, where a deploy or a script has barely begun.
var buckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
