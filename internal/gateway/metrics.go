package gateway

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	events   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clusterflow_gateway_requests_total", Help: "HTTP requests, by route and status code.",
		}, []string{"route", "code"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clusterflow_gateway_events_total", Help: "Member events, by outcome: changed, ignored (no transition), refused (bad or unknown), unavailable (Temporal did not take it).",
		}, []string{"outcome"}),
	}
	m.registry.MustRegister(m.requests, m.events)
	return m
}
