package hosts

import (
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Workflow is the host registry's own workflow (see hosts_api.go): the directory of its
// shards (directory.go) or, in runs from before shards, the registry of every host. A
// registry keeps each host's liveness as a lease: a long activity on the host's own task
// queue that the host's worker heartbeats. A missed heartbeat makes the host lost; the
// next task the host's worker takes from its queue, a check-in, makes it ready again.
// Heartbeats never reach the history, so an idle fleet costs a few events per host every
// leaseTerm.
func Workflow(ctx workflow.Context, in workflows.HostsInput) error {
	if workflow.GetVersion(ctx, change.ShardedRegistry, workflow.DefaultVersion, 1) >= 1 {
		return runDirectory(ctx, in)
	}
	r := newHostsRegistry(ctx, in, unsharded)
	if err := r.setup(ctx); err != nil {
		return err
	}
	return r.run(ctx)
}

// unsharded marks the registry that keeps every host itself.
const unsharded = -1

const (
	// leaseTerm is how long one lease activity runs before the host renews it.
	leaseTerm = 10 * time.Minute
	// hostsEventsPerRun bounds a registry run's history.
	hostsEventsPerRun = 5000
)

type hostsRegistry struct {
	// shard is the shard's number, or unsharded.
	shard int
	// moveOver asks an unsharded registry to continue as new, into shards.
	moveOver bool
	hosts    []plan.Host
	// clusters maps a subscribed cluster to its members per host.
	clusters map[string]map[string]int
	// owed lists clusters that have not been sent the current view.
	owed        map[string]bool
	leases      map[string]workflow.CancelFunc
	maintenance workflows.Maintenance
	logger      log.Logger
}

func newHostsRegistry(ctx workflow.Context, in workflows.HostsInput, shard int) *hostsRegistry {
	r := &hostsRegistry{
		shard: shard, hosts: in.Hosts, clusters: map[string]map[string]int{}, owed: map[string]bool{},
		leases: map[string]workflow.CancelFunc{}, maintenance: in.Maintenance, logger: workflow.GetLogger(ctx),
	}
	for _, c := range in.Clusters {
		r.clusters[c.Cluster] = c.Members
	}
	return r
}

func (r *hostsRegistry) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.HostsQuery, func() ([]plan.Host, error) {
		return r.hosts, nil
	}, workflow.QueryHandlerOptions{Description: "Every host, as `clusterflow hosts -o json` prints them"}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.RegisterHostUpdate, r.register, workflow.UpdateHandlerOptions{
		Validator: r.validateRegistration, Description: "A starting worker registers its host",
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.CordonHostUpdate, r.cordon, workflow.UpdateHandlerOptions{
		Validator: func(m workflows.HostMark) error { return r.refuseUnknown("cordon", m.Host) }, Description: "Cordon or uncordon a host",
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.DrainHostUpdate, r.drain, workflow.UpdateHandlerOptions{
		Validator: r.validateDrain, Description: "Move a host's members to other hosts",
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.ForgetHostUpdate, r.forget, workflow.UpdateHandlerOptions{
		Validator: r.validateForget, Description: "Remove a lost or empty host from the registry",
	}); err != nil {
		return err
	}
	maintenance := workflow.GetSignalChannel(ctx, workflows.MaintenanceSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var m workflows.Maintenance
			maintenance.Receive(ctx, &m)
			r.maintenance = m
		}
	})
	if r.shard == unsharded {
		if err := r.setupUnsharded(ctx); err != nil {
			return err
		}
	} else {
		r.setupShard(ctx)
	}
	placements := workflow.GetSignalChannel(ctx, workflows.ClusterHostsSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p workflows.ClusterPlacement
			placements.Receive(ctx, &p)
			r.place(p)
		}
	})
	for _, h := range r.hosts {
		r.startLease(ctx, h.Name)
	}
	r.countMembers()
	return nil
}

// run sends the view to clusters owed it, until the history is long enough to start afresh.
func (r *hostsRegistry) run(ctx workflow.Context) error {
	for {
		if err := workflow.Await(ctx, func() bool { return len(r.owed) > 0 || continueAsNewDue(ctx) || r.moveOver }); err != nil {
			return err
		}
		if len(r.owed) == 0 {
			break
		}
		for _, cluster := range slices.Sorted(maps.Keys(r.owed)) {
			delete(r.owed, cluster)
			err := r.tell(ctx, cluster)
			if err != nil {
				// The cluster's workflow is gone (deleted or terminated): stop telling it.
				r.logger.Info("Dropping a cluster that cannot be told of hosts", "Cluster", cluster, "Error", err)
				delete(r.clusters, cluster)
				r.countMembers()
			}
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	var carried []workflows.ClusterPlacement
	for _, name := range slices.Sorted(maps.Keys(r.clusters)) {
		carried = append(carried, workflows.ClusterPlacement{Cluster: name, Members: r.clusters[name]})
	}
	next := workflows.HostsInput{Hosts: r.hosts, Clusters: carried, Maintenance: r.maintenance}
	if r.shard != unsharded {
		next.Shard = r.shard
		return workflow.NewContinueAsNewError(ctx, workflows.HostShardWorkflowName, next)
	}
	return workflow.NewContinueAsNewError(ctx, workflows.HostsWorkflowName, next)
}

func continueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > hostsEventsPerRun
}

func validateRegistration(reg plan.HostRegistration) error {
	if err := spec.CheckName(reg.Name); err != nil {
		return flow.Refused(apperr.Invalid, "host name: %v", err)
	}
	for k, v := range reg.Labels {
		if err := spec.CheckLabel(k, v); err != nil {
			return flow.Refused(apperr.Invalid, "host %s labels: %v", reg.Name, err)
		}
	}
	if reg.Timeout < time.Second {
		return flow.Refused(apperr.Invalid, "host %s timeout: is %s; it must be at least 1s", reg.Name, reg.Timeout)
	}
	if len(reg.Version) > maxVersionBytes {
		return flow.Refused(apperr.Invalid, "host %s version: is %d bytes; it may be at most %d", reg.Name, len(reg.Version), maxVersionBytes)
	}
	if len(reg.AgentVersion) > maxVersionBytes {
		return flow.Refused(apperr.Invalid, "host %s agentVersion: is %d bytes; it may be at most %d", reg.Name, len(reg.AgentVersion), maxVersionBytes)
	}
	return nil
}

// maxVersionBytes bounds what a host's worker may say its version is, which every host's
// entry in the registry's state carries ("0.1.0 (commit 1a2b3c4d5e6f-dirty)" is 34).
const maxVersionBytes = 100

// register adds a host, or refreshes what its worker says about it. The host is ready once
// its worker takes the check-in from its queue, which a starting worker does at once.
func (r *hostsRegistry) register(ctx workflow.Context, reg plan.HostRegistration) (plan.Host, error) {
	h := r.host(reg.Name)
	if h == nil {
		r.hosts = append(r.hosts, plan.Host{HostRegistration: reg, Lost: true})
		slices.SortFunc(r.hosts, func(a, b plan.Host) int { return strings.Compare(a.Name, b.Name) })
		h = r.host(reg.Name)
		r.logger.Info("Host registered", "Host", reg.Name, "Address", reg.Address)
	} else if workflow.GetVersion(ctx, change.FreshLeaseOnRegister, workflow.DefaultVersion, 1) >= 1 {
		// A worker registers as it starts, so the lease held now is its predecessor's, which
		// may have died with its machine: left alone, it broke a host timeout later and took
		// the host that had just come back for lost, its members down and up again.
		r.stopLease(reg.Name)
	}
	h.HostRegistration = reg
	r.startLease(ctx, reg.Name)
	r.changed()
	return *h, nil
}

func (r *hostsRegistry) refuseUnknown(action, name string) error {
	if r.host(name) == nil {
		var names []string
		for _, h := range r.hosts {
			names = append(names, h.Name)
		}
		return flow.Refused(apperr.NotFound, "%s refused: no host %q (hosts: %s)", action, name, plan.Abbreviate(names))
	}
	return nil
}

func (r *hostsRegistry) cordon(ctx workflow.Context, m workflows.HostMark) (plan.Host, error) {
	h := r.host(m.Host)
	h.Cordoned = m.Cordon
	if !m.Cordon {
		h.Draining = false
	}
	r.changed()
	return *h, nil
}

// validateDrain refuses to drain a lost host (its members are replaced by health already)
// or one whose members have nowhere to go. Whether the other hosts fit each role's
// placement is for each cluster to find: a member with no room waits, saying why.
func (r *hostsRegistry) validateDrain(name string) error {
	if err := r.refuseUnknown("drain", name); err != nil {
		return err
	}
	if r.maintenance.On {
		return flow.RefusedInMaintenance(r.maintenance, "drain")
	}
	h := r.host(name)
	if h.Lost {
		return flow.Refused(apperr.Conflict, "drain refused: host %s is lost; its members are replaced after their replaceAfter", name)
	}
	if r.shard != unsharded {
		// A shard knows only its own hosts; the client checks that the clusters with
		// members on the host fit the others (starter.DrainHost).
		return nil
	}
	var others []string
	for _, other := range r.hosts {
		if other.Name != name && other.Schedulable() {
			others = append(others, other.Name)
		}
	}
	if len(others) == 0 && h.Members > 0 {
		return flow.Refused(apperr.Conflict, "drain refused: no other host is ready to take the %d members of %s", h.Members, name)
	}
	return nil
}

func (r *hostsRegistry) drain(ctx workflow.Context, name string) (plan.Host, error) {
	h := r.host(name)
	h.Draining, h.Cordoned = true, true
	r.logger.Info("Host draining", "Host", name, "Members", h.Members)
	r.changed()
	return *h, nil
}

func (r *hostsRegistry) validateForget(name string) error {
	if err := r.refuseUnknown("forget", name); err != nil {
		return err
	}
	if h := r.host(name); !h.Lost && h.Members > 0 {
		return flow.Refused(apperr.Conflict, "forget refused: host %s is %s and holds %d members; drain it first", name, h.State(), h.Members)
	}
	return nil
}

func (r *hostsRegistry) forget(ctx workflow.Context, name string) (plan.Host, error) {
	h := *r.host(name)
	r.stopLease(name)
	r.hosts = slices.DeleteFunc(r.hosts, func(h plan.Host) bool { return h.Name == name })
	r.logger.Info("Host forgotten", "Host", name)
	r.changed()
	return h, nil
}

// place records a cluster's members per host; a cluster seen for the first time is owed
// the view.
func (r *hostsRegistry) place(p workflows.ClusterPlacement) {
	_, known := r.clusters[p.Cluster]
	switch {
	case p.Gone:
		delete(r.clusters, p.Cluster)
	default:
		r.clusters[p.Cluster] = p.Members
		if !known {
			r.owed[p.Cluster] = true
		}
	}
	if r.countMembers() {
		r.changed()
	}
}

// countMembers totals each host's members, reporting whether any count changed.
func (r *hostsRegistry) countMembers() bool {
	moved := false
	for i := range r.hosts {
		n := 0
		for _, perHost := range r.clusters {
			n += perHost[r.hosts[i].Name]
		}
		moved = moved || r.hosts[i].Members != n
		r.hosts[i].Members = n
	}
	return moved
}

// changed owes every subscribed cluster the new view.
func (r *hostsRegistry) changed() {
	for cluster := range r.clusters {
		r.owed[cluster] = true
	}
}

func (r *hostsRegistry) host(name string) *plan.Host {
	return plan.HostNamed(r.hosts, name)
}
