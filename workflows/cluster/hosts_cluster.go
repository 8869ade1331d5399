package cluster

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A cluster deployed while hosts were registered places every member on a host
// (workflows/hosts); the registry pushes it the view of all hosts, and it tells the
// registry how many members it has where.

// watchHosts reports the cluster's placement to the registry whenever it changes, and
// applies each view of the hosts the registry sends back.
func (rx *reactor) watchHosts(ctx workflow.Context) {
	views := workflow.GetSignalChannel(ctx, workflows.HostsChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var hosts []plan.Host
			views.Receive(ctx, &hosts)
			rx.onHostsChanged(ctx, hosts)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		// Counting members per host in the wait's condition cost O(members) every time any
		// coroutine yielded, which at 10,000 members kept workflow tasks past the SDK's
		// deadlock detector. Now the count is taken once per change of the state (touch).
		counted := workflow.GetVersion(ctx, change.CheapPlacementReports, workflow.DefaultVersion, 1) >= 1
		var reported map[string]int
		for {
			current := hosts.Placement(&rx.w.state)
			if reported == nil || !maps.Equal(current, reported) {
				rx.reportPlacement(ctx, workflows.ClusterPlacement{Cluster: rx.w.state.Name, Members: current})
				reported = current
			}
			var err error
			if counted {
				seen := rx.w.touches
				err = workflow.Await(ctx, func() bool { return rx.w.touches != seen })
			} else {
				err = workflow.Await(ctx, func() bool { return !maps.Equal(hosts.Placement(&rx.w.state), reported) })
			}
			if err != nil {
				return
			}
		}
	})
}

func (rx *reactor) reportPlacement(ctx workflow.Context, p workflows.ClusterPlacement) {
	err := workflow.SignalExternalWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, p).Get(ctx, nil)
	if err != nil {
		rx.w.logger.Warn("Could not tell the host registry where members are", "Error", err)
	}
}

// onHostsChanged applies a new view of the hosts. Members of a host that was lost go down,
// and those of a host forgotten are gone, so the health machinery replaces them; members
// of a host that came back are up again. Members waiting for a host get one if one fits.
//
// Maintenance holds the view back: the members' histories record what changed, and the
// view is applied when maintenance ends, so that a host lost meanwhile then takes its
// members down.
func (rx *reactor) onHostsChanged(ctx workflow.Context, view []plan.Host) {
	before := rx.w.state.Hosts
	if rx.w.InMaintenance() {
		if rx.w.state.HeldHosts != nil {
			before = rx.w.state.HeldHosts // its changes are recorded already
		}
		rx.w.state.HeldHosts = view
	} else {
		rx.w.state.Hosts = view
	}
	wasLost := func(name string) bool { return hosts.WasLost(before, name) }
	for _, h := range view {
		if h.Lost && !wasLost(h.Name) {
			rx.w.forgetInstalled(h.Name) // it may come back without its files
		}
	}
	for i := range rx.w.state.Roles {
		rs := &rx.w.state.Roles[i]
		for j := range rs.Members {
			m := &rs.Members[j]
			if m.Host == "" {
				continue
			}
			ev, reason, changed := hosts.Event(m, view, wasLost(m.Host), rx.w.setUpElsewhere)
			if !changed {
				continue
			}
			rx.w.health.Step(ctx, rx.w, rs, m, workflows.MemberEvent{Member: m.Name, Event: ev, Reason: reason, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
	if rx.w.InMaintenance() {
		return
	}
	rx.noteRestarts(before)
	if back := hosts.StaleHostsBack(&rx.w.state, before); len(back) > 0 {
		rx.w.NewGeneration(fmt.Sprintf("host %s is back: remove the sandboxes of members set up elsewhere", plan.Abbreviate(back)))
		rx.w.Touch(ctx)
	}
	if rx.placeWaiting() {
		rx.w.NewGeneration("hosts changed: set up members that were waiting for a host")
		rx.w.Touch(ctx)
	}
	rx.drain(ctx)
}

// placeWaiting gives members waiting for a host one, where one now fits, and reports
// whether any got one.
func (rx *reactor) placeWaiting() bool {
	placed := false
	for i := range rx.w.state.Roles {
		rs := &rx.w.state.Roles[i]
		waiting := slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.Unplaced != "" })
		if !waiting {
			continue
		}
		r, _ := rx.w.RoleSpec(rs.Name)
		rs.Members = plan.PlaceMembers(r, rs.Members, rx.w.hostCheck.HostsFor(rx.w.state.Hosts, rx.w.state.Name, r))
		placed = placed || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberPending && m.Host != "" && m.Unplaced == "" })
	}
	return placed
}

// dropUnreachable takes members on hosts that cannot be reached out of the work: nothing
// can run there. They are forgotten as if removed; should the host come back, reconcile
// finds their sandboxes and removes them as rogues.
func (e *executor) dropUnreachable(work []plan.RoleWork, now time.Time) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		var reachable []plan.Member
		var dropped []plan.Member
		for _, m := range rw.Members {
			if m.Host == "" || hosts.Reachable(&e.w.state, m.Host) {
				reachable = append(reachable, m)
				continue
			}
			_, live := e.w.state.FindMember(m.Name)
			live.State, live.Since = plan.MemberDeleted, now
			live.Detail = fmt.Sprintf("left on host %s, which is lost; its sandbox is removed if the host comes back", m.Host)
			dropped = append(dropped, m)
		}
		e.w.noteRemoved(rw.Role, dropped)
		if len(reachable) > 0 {
			rw.Members = reachable
			kept = append(kept, rw)
		}
	}
	return kept
}
