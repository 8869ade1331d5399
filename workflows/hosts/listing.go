package hosts

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// ListingWorkflow lists a cluster's members on each of its input's hosts, all at once,
// each with its wait to start and finish and one retry, and reports each host's listing or
// why it has none. It fails only when its input is not one it can run.
func ListingWorkflow(ctx workflow.Context, in workflows.HostsListingInput) (workflows.HostsListing, error) {
	if len(in.Hosts) > workflows.HostsPerChild {
		return workflows.HostsListing{}, fmt.Errorf("a listing takes at most %d hosts, not %d", workflows.HostsPerChild, len(in.Hosts))
	}
	waits := make(map[string]time.Duration, len(in.Hosts))
	names := make([]string, len(in.Hosts))
	for i, h := range in.Hosts {
		waits[h.Name], names[i] = h.Wait, h.Name
	}
	listed := map[string]workflows.MemberListing{}
	ctx = flow.WithQuickActivity(ctx, "list members of "+in.Cluster)
	failed := onHosts(ctx, workflows.HostsPerChild, names,
		func(host string) time.Duration { return waits[host] },
		lostHosts(ctx), // the cluster's view, not the child's, says a host is lost
		func(ctx workflow.Context, host string) error {
			var listing workflows.MemberListing
			if err := workflow.ExecuteActivity(finishSoon(ctx, waits[host]), flow.ActListMemberOrdinals, in.FolderKey).Get(ctx, &listing); err != nil {
				return err
			}
			listed[host] = listing
			return nil
		})
	out := workflows.HostsListing{Hosts: make([]workflows.HostListing, 0, len(names))}
	for _, host := range slices.Sorted(slices.Values(names)) {
		l := workflows.HostListing{Host: host, Members: listed[host]}
		if err, ok := failed[host]; ok {
			l.Error = flow.ErrorMessage(err)
		}
		out.Hosts = append(out.Hosts, l)
	}
	return out, nil
}

// ListInChildren lists the cluster's members on hosts through ListingWorkflow children, a
// group of hosts each. It returns each host's listing, and the hosts it could not list,
// with why: a group whose child failed counts all its hosts as failed.
func ListInChildren(ctx workflow.Context, s *workflows.ClusterState, folderKey string, hosts []string, pass int) (map[string]workflows.MemberListing, map[string]error) {
	listed := map[string]workflows.MemberListing{}
	failed := map[string]error{}
	inChildren(ctx, s, "listing", "list members of "+s.Name, hosts, pass,
		func(ctx workflow.Context, group []string) workflow.ChildWorkflowFuture {
			in := workflows.HostsListingInput{Cluster: s.Name, FolderKey: folderKey, Hosts: make([]workflows.ListingHost, len(group))}
			for i, host := range group {
				in.Hosts[i] = workflows.ListingHost{Name: host, Wait: Wait(s, host)}
			}
			return workflow.ExecuteChildWorkflow(ctx, workflows.HostsListingWorkflowName, in)
		},
		failed, func(get func(any) error) error {
			var res workflows.HostsListing
			if err := get(&res); err != nil {
				return err
			}
			for _, l := range res.Hosts {
				if l.Error != "" {
					failed[l.Host] = fmt.Errorf("%s", l.Error)
					continue
				}
				listed[l.Host] = l.Members
			}
			return nil
		})
	return listed, failed
}
