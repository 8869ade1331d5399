// Package metrics exposes the Temporal SDK's worker and client metrics to Prometheus.
package metrics

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Serve listens on address and serves the SDK's metrics at /metrics until ctx ends. The
// returned handler goes into the client's options, so the client and every worker built
// on it report through it.
func Serve(ctx context.Context, address string) (client.MetricsHandler, error) {
	registry := prometheus.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: registry,
		// Histograms, unlike summaries, can be aggregated across worker replicas.
		DefaultTimerType: tallyprom.HistogramTimerType,
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
	mux.Handle("/metrics", reporter.HTTPHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends with ErrServerClosed on shutdown
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		closer.Close()
	}()
	return sdktally.NewMetricsHandler(scope), nil
}
