package cluster

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// reconcile compares the members with what the backend has. A member the backend no
// longer has is gone; a backend member the cluster never knew (a rogue, or an orphan a
// lost removal left) is torn down and removed by the next pass. It costs one short
// activity, and the history it adds is bounded by continue-as-new.
func (rx *reactor) reconcile(ctx workflow.Context) workflows.ReconcileReport {
	epoch := rx.w.membershipEpoch
	// Only members set up before the listing can be missing from it. Taken after it, as
	// runs before this version did, the members set up meanwhile counted too: at 10,000
	// members a deploy outlasts a listing, and 519 members that became ready during one
	// were taken for gone.
	before := workflow.GetVersion(ctx, change.ReconcileSetUpBefore, workflow.DefaultVersion, 1) >= 1
	var setUpBefore map[string]string
	if before {
		setUpBefore = rx.setUpMembers()
	}
	listed, listedHosts, err := rx.listMembers(ctx)
	if !before {
		setUpBefore = rx.setUpMembers()
	}
	// A member an operation is acting on may have lost its sandbox to that operation (a
	// shrink's teardown) before the cluster hears of it: the operation, not reconcile,
	// says what became of it.
	skipActive := workflow.GetVersion(ctx, change.ReconcileSkipsActive, workflow.DefaultVersion, 1) >= 1
	present := rx.expectedOnBackend(setUpBefore, listedHosts, skipActive)
	if err != nil {
		rx.w.logger.Warn("Reconcile could not list the backend's members", "Error", err)
		return workflows.ReconcileReport{Deferred: "could not list the backend's members: " + flow.ErrorMessage(err)}
	}
	report := workflows.ReconcileReport{Listed: len(listed)}
	if rx.w.deleteRequested {
		report.Deferred = "the cluster is being deleted"
		return report
	}
	// Where a member may be set up elsewhere, a sandbox counts only on the member's host.
	where := func(name, host string) string {
		if rx.w.setUpElsewhere {
			return name + "@" + host
		}
		return name
	}
	onBackend := map[string]bool{}
	for _, ref := range listed {
		onBackend[where(ref.Name, ref.Host)] = true
	}
	for _, name := range present {
		rs, m := rx.w.state.FindMember(name)
		if m == nil || onBackend[where(name, m.Host)] {
			continue
		}
		res := rx.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: name, Event: plan.HealthGone, Reason: "its sandbox is gone from the backend", Source: "reconcile"})
		if res.Ignored == "" {
			report.Gone = append(report.Gone, name)
		}
	}
	if epoch != rx.w.membershipEpoch {
		report.Deferred = "members were added or removed while listing; rogues are looked for next time"
		return report
	}
	var stale int
	report.Rogues, stale = rx.noteUnknown(listed)
	if stale > 0 {
		rx.w.NewGeneration(fmt.Sprintf("remove %d sandboxes of members set up elsewhere", stale))
		rx.w.Touch(ctx)
	}
	if len(report.Rogues) > 0 {
		rx.w.NewGeneration("remove " + spec.Some(report.Rogues, flow.RefusalNames)) // a membership change like any other
		rx.w.logger.Info("Found rogue members; removing them", "Rogues", spec.Some(report.Rogues, workflows.ReportNames), "Generation", rx.w.state.Generation)
		rx.w.Touch(ctx)
	}
	report.Rogues, report.MoreRogues = workflows.CapNames(report.Rogues)
	report.Gone, report.MoreGone = workflows.CapNames(report.Gone)
	return report
}

// setUpMembers maps the members set up (ready, down or flapping) to their hosts.
func (rx *reactor) setUpMembers() map[string]string {
	hosts := map[string]string{}
	for _, rs := range rx.w.state.Roles {
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
func (rx *reactor) listMembers(ctx workflow.Context) ([]backend.MemberRef, map[string]bool, error) {
	ctx = flow.WithQuickActivity(ctx, "list members of "+rx.w.state.Name)
	if !rx.w.state.OnHosts {
		listed, err := rx.listOn(ctx, "")
		return listed, map[string]bool{"": true}, err
	}
	var all []backend.MemberRef
	listedHosts := map[string]bool{}
	failed := hosts.OnEach(ctx, &rx.w.state, rx.w.setUpElsewhere, hosts.ReachableHosts(&rx.w.state), func(ctx workflow.Context, host string) error {
		listed, err := rx.listOn(ctx, host)
		if err != nil {
			return err
		}
		all = append(all, listed...)
		listedHosts[host] = true
		return nil
	})
	if len(failed) > 0 {
		// Members of a host not listed are neither gone nor rogue: it is looked at next time.
		rx.w.logger.Warn("Reconcile could not list some hosts", "Failures", hosts.DescribeFailures(failed))
	}
	return all, listedHosts, nil
}

// listOn lists the cluster's members on one host ("" for the shared queue). Bounded runs
// ask for the compact listing, by ordinal ranges; a listing the host had to cut counts as
// a failure, since it cannot tell a member gone.
func (rx *reactor) listOn(ctx workflow.Context, host string) ([]backend.MemberRef, error) {
	var listed []backend.MemberRef
	if !rx.w.bounded {
		if err := workflow.ExecuteActivity(ctx, flow.ActListMembers, rx.w.folder().Key()).Get(ctx, &listed); err != nil {
			return nil, err
		}
	} else {
		var listing workflows.MemberListing
		if err := workflow.ExecuteActivity(ctx, flow.ActListMemberOrdinals, rx.w.folder().Key()).Get(ctx, &listing); err != nil {
			return nil, err
		}
		if listing.Truncated {
			return nil, fmt.Errorf("the host has more sandboxes shaped like members of %s than a cluster can have; the listing was cut", rx.w.state.Name)
		}
		for _, r := range listing.Roles {
			for _, rg := range r.Ordinals {
				for o := rg[0]; o <= rg[1] && len(listed) <= 2*spec.MaxClusterMembers; o++ {
					listed = append(listed, rx.w.memberRef(r.Role, spec.MemberName(rx.w.state.Name, r.Role, o)))
				}
			}
		}
	}
	if host != "" {
		for i := range listed {
			listed[i].Host = host
		}
	}
	return listed, nil
}

// adoptRogues records the rogues reconcile found as leaving members, so that this pass
// tears them down and removes them like any member no longer wanted. Only the operation
// changes the roles and members it works on; reconcile just queues them.
func (e *executor) adoptRogues(now time.Time) {
	for _, ref := range e.w.rogues {
		if _, m := e.w.state.FindMember(ref.Name); m == nil {
			e.adoptRogue(ref, now)
		}
	}
	e.w.rogues = nil
}

// adoptRogue records one rogue as a leaving member of its role, adding the role (placed
// last) if the cluster has no such role.
func (e *executor) adoptRogue(ref backend.MemberRef, now time.Time) {
	role, ordinal, ok := spec.ParseMemberName(e.w.state.Name, ref.Name)
	if !ok || role != ref.Role {
		e.w.logger.Warn("Backend listed a member whose name does not match its role; left alone", "Member", ref.Name, "Role", ref.Role)
		return
	}
	rs := e.w.state.Role(role)
	if rs == nil {
		e.w.state.Roles = append(e.w.state.Roles, plan.RoleState{Name: role})
		e.w.state.Levels = e.w.plan()
		rs = e.w.state.Role(role)
		rs.Level = plan.LevelOf(e.w.state.Levels, role)
	}
	rogue := plan.Member{
		Name: ref.Name, Role: role, Ordinal: ordinal, State: plan.MemberRogue, Leaving: true, Since: now, Host: ref.Host,
		Detail: "found on the backend, but never a member of this cluster: being torn down and removed",
	}
	at, _ := slices.BinarySearchFunc(rs.Members, ordinal, func(m plan.Member, ordinal int) int { return m.Ordinal - ordinal })
	rs.Members = slices.Insert(rs.Members, at, rogue)
	e.w.membershipEpoch++
}

// expectedOnBackend names the members the backend must have listed: set up before the
// listing, on the host they are on now, a host the listing reached, and (skipActive) no
// operation acting on them, since it, not reconcile, says what became of them.
func (rx *reactor) expectedOnBackend(setUpBefore map[string]string, listedHosts map[string]bool, skipActive bool) []string {
	var present []string
	for _, rs := range rx.w.state.Roles {
		for _, m := range rs.Members {
			if skipActive && rx.w.runner.ActsOn(rs.Name, m.Name) {
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
func (rx *reactor) noteUnknown(listed []backend.MemberRef) (rogues []string, stale int) {
	for _, ref := range listed {
		_, m := rx.w.state.FindMember(ref.Name)
		switch {
		case m == nil && !slices.Contains(rx.w.rogues, ref):
			rx.w.rogues = append(rx.w.rogues, ref)
			rogues = append(rogues, ref.Name)
		case m != nil && rx.w.setUpElsewhere && ref.Host != m.Host && hosts.NoteStale(&rx.w.state, ref):
			stale++
		}
	}
	return rogues, stale
}
