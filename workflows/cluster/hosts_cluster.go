package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A cluster deployed while hosts were registered places every member on a host and routes
// the member's activities to that host's task queue. The registry pushes it the view of
// all hosts (HostsChangedSignal); it tells the registry how many members it has where
// (ClusterHostsSignal). A cluster deployed in single-host mode never does either.

// onHosts reports whether the cluster places its members on hosts.
func (c *cluster) onHosts() bool { return c.state.OnHosts }

// hostOf finds a host in the cluster's view.
func (c *cluster) hostOf(name string) *plan.Host {
	return plan.Named(c.state.Hosts, name, func(h *plan.Host) string { return h.Name })
}

// reachable reports whether activities can run on a host: it is in the view and not lost.
func (c *cluster) reachable(host string) bool {
	h := c.hostOf(host)
	return h != nil && !h.Lost
}

// placement counts the cluster's members on each host.
func (c *cluster) placement() map[string]int {
	counts := map[string]int{}
	for _, rs := range c.state.Roles {
		for _, m := range rs.Members {
			if m.Host != "" && m.State != plan.MemberDeleted {
				counts[m.Host]++
			}
		}
	}
	return counts
}

// memberHosts lists, sorted, the reachable hosts holding any of the cluster's members.
func (c *cluster) memberHosts() []string {
	var hosts []string
	for _, h := range slices.Sorted(maps.Keys(c.placement())) {
		if c.reachable(h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// hostWait bounds how long a cluster-wide activity (configmeta, listing, removal) waits
// for a host's worker. A live worker takes it within milliseconds; a host that died since
// the last view must not hold up the cluster, whose health timers wait on these.
func (c *cluster) hostWait(host string) time.Duration {
	wait := minHostWait
	if h := c.hostOf(host); h != nil {
		wait = max(wait, h.Timeout)
	}
	return wait
}

const minHostWait = 10 * time.Second

// hostWatcher keeps the cluster in step with the host registry's views: it applies each
// view (members of lost hosts go down, stale sandboxes are noted and removed, drains
// advance), reports the cluster's placement back, and runs cluster-wide activities on
// every host.
type hostWatcher struct {
	*cluster
	health *healthMachine
	touch  func(workflow.Context)
}

// watchHosts reports the cluster's placement to the registry whenever it changes, and
// applies each view of the hosts the registry sends back.
func (hw *hostWatcher) watchHosts(ctx workflow.Context) {
	views := workflow.GetSignalChannel(ctx, workflows.HostsChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var hosts []plan.Host
			views.Receive(ctx, &hosts)
			hw.onHostsChanged(ctx, hosts)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		// Counting members per host in the wait's condition cost O(members) every time any
		// coroutine yielded, which at 10,000 members kept workflow tasks past the SDK's
		// deadlock detector. Now the count is taken once per change of the state (touch).
		counted := workflow.GetVersion(ctx, change.CheapPlacementReports, workflow.DefaultVersion, 1) >= 1
		var reported map[string]int
		for {
			current := hw.placement()
			if reported == nil || !maps.Equal(current, reported) {
				hw.reportPlacement(ctx, workflows.ClusterPlacement{Cluster: hw.state.Name, Members: current})
				reported = current
			}
			var err error
			if counted {
				seen := hw.touches
				err = workflow.Await(ctx, func() bool { return hw.touches != seen })
			} else {
				err = workflow.Await(ctx, func() bool { return !maps.Equal(hw.placement(), reported) })
			}
			if err != nil {
				return
			}
		}
	})
}

func (hw *hostWatcher) reportPlacement(ctx workflow.Context, p workflows.ClusterPlacement) {
	err := workflow.SignalExternalWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, p).Get(ctx, nil)
	if err != nil {
		hw.logger.Warn("Could not tell the host registry where members are", "Error", err)
	}
}

// onHostsChanged applies a new view of the hosts. Members of a host that was lost go down,
// and those of a host forgotten are gone, so the health machinery replaces them; members
// of a host that came back are up again. Members waiting for a host get one if one fits.
//
// Maintenance holds the view back: the members' histories record what changed, and the
// view is applied when maintenance ends, so that a host lost meanwhile then takes its
// members down.
func (hw *hostWatcher) onHostsChanged(ctx workflow.Context, hosts []plan.Host) {
	before := hw.state.Hosts
	if hw.inMaintenance() {
		if hw.state.HeldHosts != nil {
			before = hw.state.HeldHosts // its changes are recorded already
		}
		hw.state.HeldHosts = hosts
	} else {
		hw.state.Hosts = hosts
	}
	wasLost := func(name string) bool {
		h := plan.Named(before, name, func(h *plan.Host) string { return h.Name })
		return h != nil && h.Lost
	}
	for _, h := range hosts {
		if h.Lost && !wasLost(h.Name) {
			hw.forgetInstalled(h.Name) // it may come back without its files
		}
	}
	for i := range hw.state.Roles {
		rs := &hw.state.Roles[i]
		for j := range rs.Members {
			m := &rs.Members[j]
			if m.Host == "" {
				continue
			}
			h := plan.Named(hosts, m.Host, func(h *plan.Host) string { return h.Name })
			var ev plan.HealthEvent
			var reason string
			switch {
			case h == nil:
				ev, reason = plan.HealthGone, fmt.Sprintf("host %s was forgotten", m.Host)
			case h.Lost && !wasLost(m.Host) && hw.setUpElsewhere && m.State.BeingSetUp():
				ev, reason = plan.HealthLost, fmt.Sprintf("host %s lost (unheard of since %s)", m.Host, h.LastSeen.UTC().Format(time.RFC3339))
			case h.Lost && !wasLost(m.Host):
				ev, reason = plan.HealthDown, fmt.Sprintf("host %s lost (unheard of since %s)", m.Host, h.LastSeen.UTC().Format(time.RFC3339))
			case !h.Lost && wasLost(m.Host):
				ev, reason = plan.HealthUp, fmt.Sprintf("host %s is back", m.Host)
			default:
				continue
			}
			hw.health.stepHealth(ctx, rs, m, workflows.MemberEvent{Member: m.Name, Event: ev, Reason: reason, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
	if hw.inMaintenance() {
		return
	}
	hw.noteRestarts(before)
	hw.noteStaleHostsBack(ctx, before)
	if hw.placeWaiting() {
		hw.newGeneration("hosts changed: set up members that were waiting for a host")
		hw.touch(ctx)
	}
	hw.drain(ctx)
}

// placeWaiting gives members waiting for a host one, where one now fits, and reports
// whether any got one.
func (c *cluster) placeWaiting() bool {
	placed := false
	for i := range c.state.Roles {
		rs := &c.state.Roles[i]
		waiting := slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.Unplaced != "" })
		if !waiting {
			continue
		}
		r, _ := c.RoleSpec(rs.Name)
		rs.Members = plan.PlaceMembers(r, rs.Members, c.hostCheck.HostsFor(c.state.Hosts, c.state.Name, r))
		placed = placed || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberPending && m.Host != "" && m.Unplaced == "" })
	}
	return placed
}

// dropUnreachable takes members on hosts that cannot be reached out of the work: nothing
// can run there. They are forgotten as if removed; should the host come back, reconcile
// finds their sandboxes and removes them as rogues.
func (c *cluster) dropUnreachable(work []plan.RoleWork, now time.Time) []plan.RoleWork {
	var kept []plan.RoleWork
	for _, rw := range work {
		var reachable []plan.Member
		var dropped []plan.Member
		for _, m := range rw.Members {
			if m.Host == "" || c.reachable(m.Host) {
				reachable = append(reachable, m)
				continue
			}
			_, live := c.state.FindMember(m.Name)
			live.State, live.Since = plan.MemberDeleted, now
			live.Detail = fmt.Sprintf("left on host %s, which is lost; its sandbox is removed if the host comes back", m.Host)
			dropped = append(dropped, m)
		}
		c.noteRemoved(rw.Role, dropped)
		if len(reachable) > 0 {
			rw.Members = reachable
			kept = append(kept, rw)
		}
	}
	return kept
}

// reachableHosts lists, sorted, every host in the view that is not lost.
func (c *cluster) reachableHosts() []string {
	var hosts []string
	for _, h := range c.state.Hosts {
		if !h.Lost {
			hosts = append(hosts, h.Name)
		}
	}
	return hosts
}

// onEachHost runs one cluster-wide activity on each of hosts, or on the shared queue in
// single-host mode, and returns the hosts where it failed ("" in single-host mode). On a
// host, the activity gets the host's wait both to start and to finish, and one retry: a
// host partitioned midway may have taken the task and never answer, and nothing may wait
// on it for long.
func (hw *hostWatcher) onEachHost(ctx workflow.Context, hosts []string, run func(ctx workflow.Context, host string) error) map[string]error {
	failed := map[string]error{}
	if !hw.onHosts() {
		if err := run(ctx, ""); err != nil {
			failed[""] = err
		}
		return failed
	}
	onOne := func(ctx workflow.Context, host string) {
		wait := hw.hostWait(host)
		hostCtx := flow.OnHost(ctx, host, wait)
		hostCtx = workflow.WithStartToCloseTimeout(hostCtx, wait)
		hostCtx = workflow.WithRetryPolicy(hostCtx, temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2})
		if err := run(hostCtx, host); err != nil {
			failed[host] = err
		}
	}
	if !hw.setUpElsewhere {
		for _, host := range hosts { // one host after the other, as runs from before did
			onOne(ctx, host)
		}
		return failed
	}
	// All hosts at once, and a host found lost meanwhile is not waited for: its run is
	// cancelled, so that no step of the cluster depends on a dead host past its loss.
	left := len(hosts)
	cancels := map[string]workflow.CancelFunc{}
	for _, host := range hosts {
		hostCtx, cancel := workflow.WithCancel(ctx)
		cancels[host] = cancel
		workflow.Go(hostCtx, func(ctx workflow.Context) {
			onOne(ctx, host)
			left--
		})
	}
	// The runs answer a cancel at once, so waiting for them outlives one.
	waitCtx, _ := workflow.NewDisconnectedContext(ctx)
	lostOne := func() bool {
		for host := range cancels {
			if !hw.reachable(host) {
				return true
			}
		}
		return false
	}
	for left > 0 {
		_ = workflow.Await(waitCtx, func() bool { return left == 0 || lostOne() })
		for _, host := range slices.Sorted(maps.Keys(cancels)) {
			if !hw.reachable(host) {
				cancels[host]()
				delete(cancels, host)
			}
		}
	}
	return failed
}

// describeFailures writes the hosts an activity failed on, with why, or "" for none.
func describeFailures(failed map[string]error) string {
	var parts []string
	for _, host := range slices.Sorted(maps.Keys(failed)) {
		if host == "" {
			parts = append(parts, flow.ErrorMessage(failed[host]))
			continue
		}
		parts = append(parts, fmt.Sprintf("on host %s: %s", host, flow.ErrorMessage(failed[host])))
	}
	return strings.Join(parts, "; ")
}
