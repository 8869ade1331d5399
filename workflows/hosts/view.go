package hosts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// A cluster deployed while hosts were registered places every member on a host and routes
// the member's activities to that host's task queue. The registry pushes it the view of
// all hosts (HostsChangedSignal); it tells the registry how many members it has where
// (ClusterHostsSignal). A cluster deployed in single-host mode never does either. What
// follows reads and updates a cluster's view of the hosts, which its state holds.

// Of finds a host in the cluster's view.
func Of(s *workflows.ClusterState, name string) *plan.Host {
	return plan.HostNamed(s.Hosts, name)
}

// Reachable reports whether activities can run on a host: it is in the view and not lost.
func Reachable(s *workflows.ClusterState, host string) bool {
	h := Of(s, host)
	return h != nil && !h.Lost
}

// Draining reports whether a host is being drained (and is not lost).
func Draining(s *workflows.ClusterState, host string) bool {
	h := Of(s, host)
	return h != nil && h.Draining && !h.Lost
}

// Placement counts the cluster's members on each host.
func Placement(s *workflows.ClusterState) map[string]int {
	counts := map[string]int{}
	for _, rs := range s.Roles {
		for _, m := range rs.Members {
			if m.Host != "" && m.State != plan.MemberDeleted {
				counts[m.Host]++
			}
		}
	}
	return counts
}

// MemberHosts lists, sorted, the reachable hosts holding any of the cluster's members.
func MemberHosts(s *workflows.ClusterState) []string {
	var hosts []string
	for _, h := range slices.Sorted(maps.Keys(Placement(s))) {
		if Reachable(s, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// ReachableHosts lists, sorted, every host in the view that is not lost.
func ReachableHosts(s *workflows.ClusterState) []string {
	var hosts []string
	for _, h := range s.Hosts {
		if !h.Lost {
			hosts = append(hosts, h.Name)
		}
	}
	return hosts
}

// Wait bounds how long a cluster-wide activity (configmeta, listing, removal) waits for a
// host's worker. A live worker takes it within milliseconds; a host that died since the
// last view must not hold up the cluster, whose health timers wait on these.
func Wait(s *workflows.ClusterState, host string) time.Duration {
	wait := minHostWait
	if h := Of(s, host); h != nil {
		wait = max(wait, h.Timeout)
	}
	return wait
}

const minHostWait = 10 * time.Second

// Event is what a new view of the hosts means for a member, given whether its host was
// lost before (wasLost): gone when its host was forgotten, lost (set up elsewhere, when
// setUpElsewhere and it is being set up) or down when its host was lost, up when its host
// is back. ok is false when nothing changed for it.
func Event(m *plan.Member, view []plan.Host, wasLost, setUpElsewhere bool) (ev plan.HealthEvent, reason string, ok bool) {
	h := plan.HostNamed(view, m.Host)
	switch {
	case h == nil:
		return plan.HealthGone, fmt.Sprintf("host %s was forgotten", m.Host), true
	case h.Lost && !wasLost && setUpElsewhere && m.State.BeingSetUp():
		return plan.HealthLost, fmt.Sprintf("host %s lost (unheard of since %s)", m.Host, h.LastSeen.UTC().Format(time.RFC3339)), true
	case h.Lost && !wasLost:
		return plan.HealthDown, fmt.Sprintf("host %s lost (unheard of since %s)", m.Host, h.LastSeen.UTC().Format(time.RFC3339)), true
	case !h.Lost && wasLost:
		return plan.HealthUp, fmt.Sprintf("host %s is back", m.Host), true
	}
	return "", "", false
}

// WasLost says whether a host was lost in an earlier view.
func WasLost(before []plan.Host, name string) bool {
	h := plan.HostNamed(before, name)
	return h != nil && h.Lost
}

// Restarted lists the hosts whose boot ID changed between the view before and now.
func Restarted(s *workflows.ClusterState, before []plan.Host) []string {
	var restarted []string
	for _, h := range s.Hosts {
		prev := plan.HostNamed(before, h.Name)
		if prev != nil && prev.BootID != "" && h.BootID != "" && prev.BootID != h.BootID {
			restarted = append(restarted, h.Name)
		}
	}
	return restarted
}

// A member being set up on a host that is lost is set up elsewhere. Its sandbox on the
// lost host, where its script may even still run, is stale: once the host is back, the
// next pass removes it there, stopping what it runs, and tells no one, since the member
// lives elsewhere. Reconcile finds any that were missed: a sandbox of a known member on a
// host that is not the member's.

// StaleHostsBack forgets the stale sandboxes of hosts forgotten, and lists the hosts
// holding stale sandboxes that came back since the view before.
func StaleHostsBack(s *workflows.ClusterState, before []plan.Host) []string {
	if len(s.Stale) == 0 {
		return nil
	}
	s.Stale = slices.DeleteFunc(s.Stale, func(st workflows.StaleMember) bool { return Of(s, st.Host) == nil })
	var back []string
	for _, st := range s.Stale {
		prev := plan.HostNamed(before, st.Host)
		if Reachable(s, st.Host) && (prev == nil || prev.Lost) && !slices.Contains(back, st.Host) {
			back = append(back, st.Host)
		}
	}
	return back
}

// NoteStale records a sandbox reconcile found of a known member on a host not its own.
func NoteStale(s *workflows.ClusterState, ref backend.MemberRef) bool {
	st := workflows.StaleMember{Role: ref.Role, Member: ref.Name, Host: ref.Host}
	if ref.Host == "" || slices.Contains(s.Stale, st) {
		return false
	}
	s.Stale = append(s.Stale, st)
	return true
}

// OnEach runs one cluster-wide activity on each of hosts, or on the shared queue in
// single-host mode (the cluster's state s is not on hosts), and returns the hosts where it
// failed ("" in single-host mode). On a host, the activity gets the host's wait both to
// start and to finish, and one retry: a host partitioned midway may have taken the task
// and never answer, and nothing may wait on it for long. With setUpElsewhere, the hosts
// run at once, and one found lost meanwhile (s changes while they run) is not waited for.
func OnEach(ctx workflow.Context, s *workflows.ClusterState, setUpElsewhere bool, atOnce int, hosts []string, run func(ctx workflow.Context, host string) error) map[string]error {
	if !s.OnHosts {
		failed := map[string]error{}
		if err := run(ctx, ""); err != nil {
			failed[""] = err
		}
		return failed
	}
	wait := func(host string) time.Duration { return Wait(s, host) }
	if !setUpElsewhere {
		failed := map[string]error{}
		for _, host := range hosts { // one host after the other, as runs from before did
			if err := run(onHostCtx(ctx, host, wait(host)), host); err != nil {
				failed[host] = err
			}
		}
		return failed
	}
	return onHosts(ctx, atOnce, hosts, wait, func(host string) bool { return Reachable(s, host) }, run)
}

// onHostCtx is the context of a cluster-wide activity on one host: wait both to start and
// to finish, and one retry. The host reports a run within hostActivityHeartbeat
// (change.HostActivityHeartbeats), so that a task the server handed to a poll whose answer
// never reached the host (an overloaded server) is retried then, not after the whole wait.
func onHostCtx(ctx workflow.Context, host string, wait time.Duration) workflow.Context {
	ctx = flow.OnHost(ctx, host, wait)
	ctx = workflow.WithStartToCloseTimeout(ctx, wait)
	if workflow.GetVersion(ctx, change.HostActivityHeartbeats, workflow.DefaultVersion, 1) >= 1 {
		ctx = workflow.WithHeartbeatTimeout(ctx, hostActivityHeartbeat)
	}
	return workflow.WithRetryPolicy(ctx, temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2})
}

// hostActivityHeartbeat is how long a cluster-wide activity on a host may go without a
// heartbeat: those activities take well under a second, and heartbeat every third of this
// past it (activities.Activities).
const hostActivityHeartbeat = 15 * time.Second

// onHosts runs run on all hosts at once (at most atOnce, when positive, far under
// Temporal's 2,000 pending activities) and returns the hosts where it failed. A host no
// longer reachable meanwhile is not waited for: its run is cancelled, so that no step of
// the cluster depends on a dead host past its loss.
func onHosts(ctx workflow.Context, atOnce int, hosts []string, wait func(host string) time.Duration, reachable func(host string) bool, run func(ctx workflow.Context, host string) error) map[string]error {
	failed := map[string]error{}
	left, next := len(hosts), 0
	running := map[string]workflow.CancelFunc{}
	// The runs answer a cancel at once, so waiting for them outlives one.
	waitCtx, _ := workflow.NewDisconnectedContext(ctx)
	lostOne := func() bool {
		for host := range running {
			if !reachable(host) {
				return true
			}
		}
		return false
	}
	room := func() bool { return next < len(hosts) && (atOnce <= 0 || len(running) < atOnce) }
	for left > 0 {
		for room() {
			host := hosts[next]
			next++
			hostCtx, cancel := workflow.WithCancel(ctx)
			running[host] = cancel
			workflow.Go(hostCtx, func(ctx workflow.Context) {
				if err := run(onHostCtx(ctx, host, wait(host)), host); err != nil {
					failed[host] = err
				}
				left--
				delete(running, host)
			})
		}
		_ = workflow.Await(waitCtx, func() bool { return left == 0 || lostOne() || room() })
		for _, host := range slices.Sorted(maps.Keys(running)) {
			if !reachable(host) {
				running[host]()
				delete(running, host)
			}
		}
	}
	return failed
}

// DescribeFailures writes the hosts an activity failed on, with why, or "" for none.
func DescribeFailures(failed map[string]error) string {
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
