package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/clusterflow/clusterflow/starter"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The state's metrics are read from Temporal when Prometheus scrapes, not counted as
// things happen: a gauge kept by workflow code would vanish with every worker restart (a
// replay records nothing) and linger on a worker a cluster has moved from. Read this way
// they are what `clusterflow status` says, from whichever worker serves them; one worker of
// a fleet is enough (--metrics-clusters), since every one would read the same.

// stateReadEvery bounds how often the state is read, however often it is scraped; a read
// takes one list of the clusters, one small status query each (counts, no members) and
// one query of the host registry. A scrape never waits for a read: it gets the latest one,
// and one that finds it older than this starts the next in the background. A cluster whose
// workflow no worker serves holds its query until its timeout, which a scrape (often
// limited to its interval) would not outlast.
const stateReadEvery = 10 * time.Second

// statusQueryTimeout bounds one cluster's status query, and stateReadTimeout the whole
// read; what did not answer in time is left out, and counted.
const (
	statusQueryTimeout = 5 * time.Second
	stateReadTimeout   = 30 * time.Second
)

// statusQueriesAtOnce bounds the status queries one read has in flight.
const statusQueriesAtOnce = 8

var (
	clustersDesc = prometheus.NewDesc("clusterflow_clusters",
		"Running clusters, by phase.", []string{"phase"}, nil)
	phaseDesc = prometheus.NewDesc("clusterflow_cluster_phase",
		"1 for each running cluster, labelled with its phase.", []string{"cluster", "phase"}, nil)
	membersDesc = prometheus.NewDesc("clusterflow_members",
		"Members of each running cluster, by role and state (as `clusterflow status` counts them).", []string{"cluster", "role", "state"}, nil)
	desiredDesc = prometheus.NewDesc("clusterflow_role_desired_members",
		"Members each role of each running cluster should have.", []string{"cluster", "role"}, nil)
	hostsDesc = prometheus.NewDesc("clusterflow_hosts",
		"Registered hosts, by state: every state, at 0 when none is in it (and all at 0 in single-host mode).", []string{"state"}, nil)
	unreadDesc = prometheus.NewDesc("clusterflow_state_unread",
		"What the latest read of the state could not read: clusters whose status did not answer, or the list of clusters or hosts (what=list, hosts).", []string{"what"}, nil)
)

// stateCollector serves the latest read of the clusters' and hosts' state, and reads it
// again in the background when a scrape finds it older than stateReadEvery.
type stateCollector struct {
	st  *starter.Starter
	log *zap.Logger

	mu      sync.Mutex
	readAt  time.Time
	reading bool
	last    []prometheus.Metric
	// failing are the clusters the latest read could not read (one read at a time uses it).
	failing map[string]bool
}

// ReportState adds the clusters' and hosts' state, read through st, to the metrics; the
// first read starts now.
func (e *Endpoint) ReportState(st *starter.Starter, log *zap.Logger) {
	c := &stateCollector{st: st, log: log, reading: true}
	go c.refresh()
	e.registry.MustRegister(c)
}

// Describe sends nothing: the collector is unchecked, its label values known only when read.
func (c *stateCollector) Describe(chan<- *prometheus.Desc) {}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if !c.reading && time.Since(c.readAt) >= stateReadEvery {
		c.reading = true
		go c.refresh()
	}
	last := c.last
	c.mu.Unlock()
	for _, m := range last {
		ch <- m
	}
}

// refresh reads the state and keeps it for the scrapes to come.
func (c *stateCollector) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), stateReadTimeout)
	defer cancel()
	read := c.read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.readAt, c.reading = read, time.Now(), false
}

// read reads the state once.
func (c *stateCollector) read(ctx context.Context) []prometheus.Metric {
	var out []prometheus.Metric
	gauge := func(desc *prometheus.Desc, v int, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(v), labels...))
	}
	unread := map[string]int{"clusters": 0, "list": 0, "hosts": 0}
	clusters, err := c.st.List(ctx, false)
	if err != nil {
		c.log.Warn("Metrics: could not list the clusters", zap.Error(err))
		unread["list"] = 1
	}
	phases := map[string]int{}
	for _, cl := range clusters {
		phases[cl.Phase]++
		gauge(phaseDesc, 1, cl.Name, cl.Phase)
	}
	for _, phase := range sortedKeys(phases) {
		gauge(clustersDesc, phases[phase], phase)
	}
	statuses := c.counts(ctx, clusters)
	for i, s := range statuses {
		if s == nil {
			unread["clusters"]++
			continue
		}
		for _, r := range s.Roles {
			gauge(desiredDesc, r.Desired, clusters[i].Name, r.Name)
			for _, state := range sortedKeys(r.States) {
				gauge(membersDesc, r.States[state], clusters[i].Name, r.Name, string(state))
			}
		}
	}
	hosts, err := c.st.Hosts(ctx)
	if err != nil {
		c.log.Warn("Metrics: could not read the hosts", zap.Error(err))
		unread["hosts"] = 1
	}
	byState := map[string]int{}
	for _, state := range []plan.HostState{plan.HostReady, plan.HostCordoned, plan.HostDraining, plan.HostLost} {
		byState[string(state)] = 0
	}
	for _, h := range hosts {
		byState[string(h.State())]++
	}
	for _, state := range sortedKeys(byState) {
		gauge(hostsDesc, byState[state], state)
	}
	for _, what := range sortedKeys(unread) {
		gauge(unreadDesc, unread[what], what)
	}
	return out
}

// counts asks each cluster for its counts, a few at a time; nil for one that did not
// answer. A cluster that did not answer is logged when it stops answering, not at every read.
func (c *stateCollector) counts(ctx context.Context, clusters []starter.ClusterSummary) []*workflows.ClusterStatus {
	out := make([]*workflows.ClusterStatus, len(clusters))
	errs := make([]error, len(clusters))
	slots := make(chan struct{}, statusQueriesAtOnce)
	var wg sync.WaitGroup
	for i, cl := range clusters {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(ctx, statusQueryTimeout)
			defer cancel()
			s, err := c.st.Counts(ctx, cl.Name)
			if errs[i] = err; err == nil {
				out[i] = &s
			}
		})
	}
	wg.Wait()
	failing := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			failing[clusters[i].Name] = true
			if !c.failing[clusters[i].Name] {
				c.log.Warn("Metrics: could not read a cluster's status; it is left out until it answers", zap.String("cluster", clusters[i].Name), zap.Error(err))
			}
		}
	}
	c.failing = failing
	return out
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
