package starter

// Reading the host registry: its shards, each host, and queries that outlast a host cut off.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/sdk/converter"

	"github.com/clusterflow/clusterflow/workflows"
)

// Hosts lists the registered hosts, sorted by name; none in single-host mode. A sharded
// registry's shards are asked all at once.
func (s *Starter) Hosts(ctx context.Context) ([]workflows.Host, error) {
	info, err := s.registry(ctx)
	if err != nil || !info.Sharded {
		if err != nil || !info.found {
			return nil, err
		}
		return s.queryHosts(ctx, workflows.HostsWorkflowID)
	}
	parts := make([][]workflows.Host, len(info.Shards))
	errs := make([]error, len(info.Shards))
	var wg sync.WaitGroup
	for i, shard := range info.Shards {
		wg.Go(func() { parts[i], errs[i] = s.queryHosts(ctx, workflows.HostShardWorkflowID(shard)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	hosts := slices.Concat(parts...)
	slices.SortFunc(hosts, func(a, b workflows.Host) int { return strings.Compare(a.Name, b.Name) })
	return hosts, nil
}

// host is one registered host, from the registry workflow that keeps it: its shard, or the
// registry itself before shards.
func (s *Starter) host(ctx context.Context, name string) (workflows.Host, bool, error) {
	info, err := s.registry(ctx)
	if err != nil || !info.found {
		return workflows.Host{}, false, err
	}
	keeper := workflows.HostsWorkflowID
	if info.Sharded {
		keeper = workflows.HostShardWorkflowID(workflows.HostShard(name))
	}
	hosts, err := s.queryHosts(ctx, keeper)
	if err != nil {
		return workflows.Host{}, false, err
	}
	i := slices.IndexFunc(hosts, func(h workflows.Host) bool { return h.Name == name })
	if i < 0 {
		return workflows.Host{}, false, nil
	}
	return hosts[i], true, nil
}

// registryInfo is the registry's RegistryInfo, and whether it runs at all.
type registryInfo struct {
	workflows.RegistryInfo
	found bool
}

// registry asks the registry whether it is sharded; none running is no host registered.
func (s *Starter) registry(ctx context.Context) (registryInfo, error) {
	resp, err := s.queryRegistry(ctx, workflows.HostsWorkflowID, workflows.RegistryQuery)
	switch {
	case isNotFound(err):
		return registryInfo{}, nil // no worker ever registered a host
	case err != nil:
		return registryInfo{}, err
	}
	info := registryInfo{found: true}
	if err := resp.Get(&info.RegistryInfo); err != nil {
		return registryInfo{}, fmt.Errorf("list hosts: %w", err)
	}
	return info, nil
}

// queryHosts lists the hosts one registry workflow keeps; a shard that is gone keeps none.
func (s *Starter) queryHosts(ctx context.Context, workflowID string) ([]workflows.Host, error) {
	resp, err := s.queryRegistry(ctx, workflowID, workflows.HostsQuery)
	switch {
	case isNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var hosts []workflows.Host
	if err := resp.Get(&hosts); err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	return hosts, nil
}

// registryPatience is how long a registry workflow that cannot answer for now is asked
// again: on a server busy with a fleet of 10,000 hosts, the worker's polls failed for
// seconds at a time, and a deploy was refused because the server had seen no poller lately.
// It is a cluster query's (queryPatience): attempts of 5, 7.5, 11 and 6 s outlast three
// dead polls, or a loaded server.
const registryPatience = queryPatience

// queryRegistry asks one of the registry's workflows a query, patiently (askPatiently);
// silence to the end is a missing worker.
func (s *Starter) queryRegistry(ctx context.Context, workflowID, query string) (converter.EncodedValue, error) {
	var resp converter.EncodedValue
	err := askPatiently(ctx, registryPatience, func(actx context.Context) (err error) {
		resp, err = s.client.QueryWorkflow(actx, workflowID, "", query)
		return err
	})
	switch {
	case err == nil || isNotFound(err):
		return resp, err
	case noAnswer(err):
		return nil, noWorker(s.taskQueue, fmt.Errorf("list hosts: %w", err))
	}
	return nil, fmt.Errorf("list hosts: %w", err)
}
