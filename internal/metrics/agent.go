package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

var (
	agentRunningDesc = prometheus.NewDesc("clusterflow_agent_running_scripts",
		"Startscripts the host's agent runs now, the whole host's.", nil, nil)
	agentProbesDesc = prometheus.NewDesc("clusterflow_agent_probes",
		"Members whose checks the host's agent runs.", nil, nil)
	agentUpDesc = prometheus.NewDesc("clusterflow_agent_up",
		"1 when the host's agent answered the scrape, 0 when it did not (its scripts may still run).", nil, nil)
)

// AgentCounts asks the host's agent what it looks after: scripts running, members checked.
type AgentCounts func(ctx context.Context) (running, probes int, err error)

// agentCollector asks the worker's agent at each scrape: one call on its socket.
type agentCollector struct {
	counts AgentCounts
	log    *zap.Logger
	// failing keeps an agent that cannot answer (one of an older release, say) to one
	// warning until it answers again.
	failing atomic.Bool
}

// ReportAgent adds what the host's agent looks after to the metrics.
func (e *Endpoint) ReportAgent(counts AgentCounts, log *zap.Logger) {
	e.registry.MustRegister(&agentCollector{counts: counts, log: log})
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- agentRunningDesc
	ch <- agentProbesDesc
	ch <- agentUpDesc
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	running, probes, err := c.counts(ctx)
	if err != nil {
		if !c.failing.Swap(true) {
			c.log.Warn("Metrics: the agent did not say what it runs", zap.Error(err))
		}
		ch <- prometheus.MustNewConstMetric(agentUpDesc, prometheus.GaugeValue, 0)
		return
	}
	c.failing.Store(false)
	ch <- prometheus.MustNewConstMetric(agentUpDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(agentRunningDesc, prometheus.GaugeValue, float64(running))
	ch <- prometheus.MustNewConstMetric(agentProbesDesc, prometheus.GaugeValue, float64(probes))
}
