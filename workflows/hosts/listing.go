package hosts

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
)

// A reconcile lists the cluster's members on every reachable host, an activity a host.
// Past ListingInline hosts, groups of up to workflows.HostsPerListing hosts are listed by
// child workflows, so that the cluster's history takes a few events a group rather than
// three a host, whatever the fleet (change.ListingInChildren).
const ListingInline = 100

// ListingWorkflow lists a cluster's members on each of its input's hosts, all at once,
// each with its wait to start and finish and one retry, and reports each host's listing or
// why it has none. It fails only when its input is not one it can run.
func ListingWorkflow(ctx workflow.Context, in workflows.HostsListingInput) (workflows.HostsListing, error) {
	if len(in.Hosts) > workflows.HostsPerListing {
		return workflows.HostsListing{}, fmt.Errorf("a listing takes at most %d hosts, not %d", workflows.HostsPerListing, len(in.Hosts))
	}
	waits := make(map[string]time.Duration, len(in.Hosts))
	names := make([]string, len(in.Hosts))
	for i, h := range in.Hosts {
		waits[h.Name], names[i] = h.Wait, h.Name
	}
	listed := map[string]workflows.MemberListing{}
	ctx = flow.WithQuickActivity(ctx, "list members of "+in.Cluster)
	failed := onHosts(ctx, workflows.HostsPerListing, names,
		func(host string) time.Duration { return waits[host] },
		func(string) bool { return true }, // the cluster's view, not the child's, says a host is lost
		func(ctx workflow.Context, host string) error {
			var listing workflows.MemberListing
			if err := workflow.ExecuteActivity(ctx, flow.ActListMemberOrdinals, in.FolderKey).Get(ctx, &listing); err != nil {
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
// group of hosts each, all at once. It returns each host's listing, and the hosts it could
// not list, with why: a group whose child failed counts all its hosts as failed.
func ListInChildren(ctx workflow.Context, s *workflows.ClusterState, folderKey string, hosts []string, pass int) (map[string]workflows.MemberListing, map[string]error) {
	listed := map[string]workflows.MemberListing{}
	failed := map[string]error{}
	var groups [][]string
	for group := range slices.Chunk(hosts, workflows.HostsPerListing) {
		groups = append(groups, group)
	}
	futures := make([]workflow.ChildWorkflowFuture, len(groups))
	info := workflow.GetInfo(ctx)
	for i, group := range groups {
		in := workflows.HostsListingInput{Cluster: s.Name, FolderKey: folderKey, Hosts: make([]workflows.ListingHost, len(group))}
		for j, host := range group {
			in.Hosts[j] = workflows.ListingHost{Name: host, Wait: Wait(s, host)}
		}
		childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			// Named by the cluster's operations so far (carried from run to run), the run's
			// pass and the group, as role children are; not by the run ID, which a replayer
			// makes up. A run continued as new counts its passes from one again, and the
			// children of the run before are closed with it.
			WorkflowID: fmt.Sprintf("%s/listing-%d-%d-%d", info.WorkflowExecution.ID, s.Operations, pass, i),
			// A listing is worth nothing to anyone but the run that asked for it.
			ParentClosePolicy: enums.PARENT_CLOSE_POLICY_TERMINATE,
			StaticSummary:     fmt.Sprintf("list members of %s on %d hosts (%s … %s)", s.Name, len(group), group[0], group[len(group)-1]),
		})
		futures[i] = workflow.ExecuteChildWorkflow(childCtx, workflows.HostsListingWorkflowName, in)
	}
	for i, f := range futures {
		var res workflows.HostsListing
		if err := f.Get(ctx, &res); err != nil {
			for _, host := range groups[i] {
				failed[host] = err
			}
			continue
		}
		for _, l := range res.Hosts {
			if l.Error != "" {
				failed[l.Host] = fmt.Errorf("%s", l.Error)
				continue
			}
			listed[l.Host] = l.Members
		}
	}
	return listed, failed
}
