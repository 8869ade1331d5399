package health

import (
	"fmt"
	"maps"
	"slices"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/workflow"
)

// Reconcile compares the members with what the backend has. A member the backend no
// longer has is gone; a backend member the cluster never knew (a rogue, or an orphan a
// lost removal left) is torn down and removed by the next pass. It costs one short
// activity, and the history it adds is bounded by continue-as-new.
func (hm *Machine) Reconcile(ctx workflow.Context, c Cluster) workflows.ReconcileReport {
	epoch := c.MembershipEpoch()
	// Only members set up before the listing can be missing from it. Taken after it, as
	// runs before this version did, the members set up meanwhile counted too: at 10,000
	// members a deploy outlasts a listing, and 519 members that became ready during one
	// were taken for gone.
	before := workflow.GetVersion(ctx, change.ReconcileSetUpBefore, workflow.DefaultVersion, 1) >= 1
	var setUpBefore map[string]string
	if before {
		setUpBefore = hm.setUpMembers(c)
	}
	listed, listedHosts, err := hm.listMembers(ctx, c)
	if !before {
		setUpBefore = hm.setUpMembers(c)
	}
	// A member an operation is acting on may have lost its sandbox to that operation (a
	// shrink's teardown) before the cluster hears of it: the operation, not reconcile,
	// says what became of it.
	skipActive := workflow.GetVersion(ctx, change.ReconcileSkipsActive, workflow.DefaultVersion, 1) >= 1
	present := hm.expectedOnBackend(c, setUpBefore, listedHosts, skipActive)
	if err != nil {
		c.Logger().Warn("Reconcile could not list the backend's members", "Error", err)
		return workflows.ReconcileReport{Deferred: "could not list the backend's members: " + flow.ErrorMessage(err)}
	}
	report := workflows.ReconcileReport{Listed: len(listed)}
	if c.Deleting() {
		report.Deferred = "the cluster is being deleted"
		return report
	}
	// Where a member may be set up elsewhere, a sandbox counts only on the member's host.
	where := func(name, host string) string {
		if hm.SetUpElsewhere {
			return name + "@" + host
		}
		return name
	}
	onBackend := map[string]bool{}
	for _, ref := range listed {
		onBackend[where(ref.Name, ref.Host)] = true
	}
	for _, name := range present {
		rs, m := c.State().FindMember(name)
		if m == nil || onBackend[where(name, m.Host)] {
			continue
		}
		res := hm.Step(ctx, c, rs, m, workflows.MemberEvent{Member: name, Event: plan.HealthGone, Reason: "its sandbox is gone from the backend", Source: "reconcile"})
		if res.Ignored == "" {
			report.Gone = append(report.Gone, name)
		}
	}
	if epoch != c.MembershipEpoch() {
		report.Deferred = "members were added or removed while listing; rogues are looked for next time"
		return report
	}
	var stale int
	report.Rogues, stale = hm.noteUnknown(c, listed)
	if stale > 0 {
		c.NewGeneration(fmt.Sprintf("remove %d sandboxes of members set up elsewhere", stale))
		c.Touch(ctx)
	}
	if len(report.Rogues) > 0 {
		c.NewGeneration("remove " + spec.Some(report.Rogues, flow.RefusalNames)) // a membership change like any other
		c.Logger().Info("Found rogue members; removing them", "Rogues", spec.Some(report.Rogues, workflows.ReportNames), "Generation", c.State().Generation)
		c.Touch(ctx)
	}
	report.Rogues, report.MoreRogues = workflows.CapNames(report.Rogues)
	report.Gone, report.MoreGone = workflows.CapNames(report.Gone)
	return report
}

// setUpMembers maps the members set up (ready, down or flapping) to their hosts.
func (hm *Machine) setUpMembers(c Cluster) map[string]string {
	hosts := map[string]string{}
	for _, rs := range c.State().Roles {
		for _, m := range rs.Members {
			if m.State.SetUp() {
				hosts[m.Name] = m.Host
			}
		}
	}
	return hosts
}

// listMembers lists the backend's members of the cluster: on the shared queue in
// single-host mode, else on every reachable host, each member marked with its host. It
// says which hosts it listed ("" in single-host mode).
func (hm *Machine) listMembers(ctx workflow.Context, c Cluster) ([]backend.MemberRef, map[string]bool, error) {
	ctx = flow.WithQuickActivity(ctx, "list members of "+c.State().Name)
	if !c.State().OnHosts {
		listed, err := hm.listOn(ctx, c, "")
		return listed, map[string]bool{"": true}, err
	}
	reachable := hosts.ReachableHosts(c.State())
	if hm.Bounded && hm.SetUpElsewhere && len(reachable) > hosts.InChildren &&
		workflow.GetVersion(ctx, change.ListingInChildren, workflow.DefaultVersion, 1) >= 1 {
		return hm.listInChildren(ctx, c, reachable)
	}
	var all []backend.MemberRef
	listedHosts := map[string]bool{}
	failed := hosts.OnEach(ctx, c.State(), hm.SetUpElsewhere, hm.HostsAtOnce, reachable, func(ctx workflow.Context, host string) error {
		listed, err := hm.listOn(ctx, c, host)
		if err != nil {
			return err
		}
		all = append(all, listed...)
		listedHosts[host] = true
		return nil
	})
	if len(failed) > 0 {
		// Members of a host not listed are neither gone nor rogue: it is looked at next time.
		c.Logger().Warn("Reconcile could not list some hosts", "Failures", hosts.DescribeFailures(failed))
	}
	return all, listedHosts, nil
}

// listInChildren lists the cluster's members on hosts through listing children
// (change.ListingInChildren), as listMembers does on each host itself.
func (hm *Machine) listInChildren(ctx workflow.Context, c Cluster, on []string) ([]backend.MemberRef, map[string]bool, error) {
	hm.listings++
	listings, failed := hosts.ListInChildren(ctx, c.State(), c.Folder().Key(), on, hm.listings)
	var all []backend.MemberRef
	listedHosts := map[string]bool{}
	for _, host := range slices.Sorted(maps.Keys(listings)) {
		refs, err := hm.refsOf(c, listings[host], host)
		if err != nil {
			failed[host] = err
			continue
		}
		all = append(all, refs...)
		listedHosts[host] = true
	}
	if len(failed) > 0 {
		c.Logger().Warn("Reconcile could not list some hosts", "Failures", hosts.DescribeFailures(failed))
	}
	return all, listedHosts, nil
}

// listOn lists the cluster's members on one host ("" for the shared queue). Bounded runs
// ask for the compact listing, by ordinal ranges; a listing the host had to cut counts as
// a failure, since it cannot tell a member gone.
func (hm *Machine) listOn(ctx workflow.Context, c Cluster, host string) ([]backend.MemberRef, error) {
	var listed []backend.MemberRef
	if !hm.Bounded {
		if err := workflow.ExecuteActivity(ctx, flow.ActListMembers, c.Folder().Key()).Get(ctx, &listed); err != nil {
			return nil, err
		}
	} else {
		var listing workflows.MemberListing
		if err := workflow.ExecuteActivity(ctx, flow.ActListMemberOrdinals, c.Folder().Key()).Get(ctx, &listing); err != nil {
			return nil, err
		}
		return hm.refsOf(c, listing, host)
	}
	if host != "" {
		for i := range listed {
			listed[i].Host = host
		}
	}
	return listed, nil
}

// refsOf is the members a compact listing of one host names.
func (hm *Machine) refsOf(c Cluster, listing workflows.MemberListing, host string) ([]backend.MemberRef, error) {
	if listing.Truncated {
		return nil, fmt.Errorf("the host has more sandboxes shaped like members of %s than a cluster can have; the listing was cut", c.State().Name)
	}
	var listed []backend.MemberRef
	for _, r := range listing.Roles {
		for _, rg := range r.Ordinals {
			for o := rg[0]; o <= rg[1] && len(listed) <= 2*spec.MaxClusterMembers; o++ {
				ref := memberRef(c.Folder(), r.Role, spec.MemberName(c.State().Name, r.Role, o))
				ref.Host = host
				listed = append(listed, ref)
			}
		}
	}
	return listed, nil
}

// expectedOnBackend names the members the backend must have listed: set up before the
// listing, on the host they are on now, a host the listing reached, and (skipActive) no
// operation acting on them, since it, not reconcile, says what became of them.
func (hm *Machine) expectedOnBackend(c Cluster, setUpBefore map[string]string, listedHosts map[string]bool, skipActive bool) []string {
	var present []string
	for _, rs := range c.State().Roles {
		for _, m := range rs.Members {
			if skipActive && hm.runner.ActsOn(rs.Name, m.Name) {
				continue
			}
			if host, ok := setUpBefore[m.Name]; ok && host == m.Host && listedHosts[m.Host] && m.State.SetUp() {
				present = append(present, m.Name)
			}
		}
	}
	return present
}

// noteUnknown records what a listing holds that the cluster does not know of: members it
// never had (rogues, for the next pass to remove) and, where members may be set up
// elsewhere, sandboxes of known members on a host not their own (stale). It returns the
// rogues' names and how many stale sandboxes it noted.
func (hm *Machine) noteUnknown(c Cluster, listed []backend.MemberRef) (rogues []string, stale int) {
	for _, ref := range listed {
		_, m := c.State().FindMember(ref.Name)
		switch {
		case m == nil && !slices.Contains(hm.rogues, ref):
			hm.rogues = append(hm.rogues, ref)
			rogues = append(rogues, ref.Name)
		case m != nil && hm.SetUpElsewhere && ref.Host != m.Host && hosts.NoteStale(c.State(), ref):
			stale++
		}
	}
	return rogues, stale
}
