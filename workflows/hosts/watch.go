package hosts

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"
)

// Cluster is what following the hosts needs of a cluster placed on them: its state and
// roles, showing changes, starting a generation, whether it is held or being deleted, and
// feeding a member's state machine what happened to its host.
type Cluster interface {
	State() *workflows.ClusterState
	RoleSpec(name string) (spec.Role, bool)
	Logger() log.Logger
	Touch(ctx workflow.Context)
	// Touches counts the changes of the state (Touch).
	Touches() int
	NewGeneration(reason string)
	Deleting() bool
	InMaintenance() bool
	// ForgetInstalled forgets which files a host holds: it may come back without them.
	ForgetInstalled(host string)
	// HealthEvent feeds an event about a member (its host lost, back, forgotten or
	// draining) to its state machine.
	HealthEvent(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult
}

// Options are what a cluster's run decided when it started.
type Options struct {
	// SetUpElsewhere sets members being set up elsewhere when their host is lost.
	SetUpElsewhere bool
	// HostCheck is what placement asks of hosts' allow-lists.
	HostCheck plan.HostCheck
}

// Watch reports the cluster's placement to the registry whenever it changes, and
// applies each view of the hosts the registry sends back.
func Watch(ctx workflow.Context, c Cluster, opts Options) {
	views := workflow.GetSignalChannel(ctx, workflows.HostsChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var hosts []plan.Host
			views.Receive(ctx, &hosts)
			Changed(ctx, c, opts, hosts)
		}
	})
	// A sharded registry sends each shard's hosts on their own (no history from before
	// shards has this signal).
	shardViews := workflow.GetSignalChannel(ctx, workflows.HostShardViewSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var view workflows.HostShardView
			shardViews.Receive(ctx, &view)
			Changed(ctx, c, opts, MergeShard(LatestView(c.State()), view))
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		// Counting members per host in the wait's condition cost O(members) every time any
		// coroutine yielded, which at 10,000 members kept workflow tasks past the SDK's
		// deadlock detector. Now the count is taken once per change of the state (touch).
		counted := workflow.GetVersion(ctx, change.CheapPlacementReports, workflow.DefaultVersion, 1) >= 1
		var reported map[string]int
		for {
			current := Placement(c.State())
			if reported == nil || !maps.Equal(current, reported) {
				ReportPlacement(ctx, c, workflows.ClusterPlacement{Cluster: c.State().Name, Members: current})
				reported = current
			}
			var err error
			if counted {
				seen := c.Touches()
				err = workflow.Await(ctx, func() bool { return c.Touches() != seen })
			} else {
				err = workflow.Await(ctx, func() bool { return !maps.Equal(Placement(c.State()), reported) })
			}
			if err != nil {
				return
			}
		}
	})
}

func ReportPlacement(ctx workflow.Context, c Cluster, p workflows.ClusterPlacement) {
	err := workflow.SignalExternalWorkflow(ctx, workflows.HostsWorkflowID, "", workflows.ClusterHostsSignal, p).Get(ctx, nil)
	if err != nil {
		c.Logger().Warn("Could not tell the host registry where members are", "Error", err)
	}
}

// LatestView is the newest view of the hosts the cluster got: the one held back during
// maintenance, or the one applied.
func LatestView(s *workflows.ClusterState) []plan.Host {
	if s.HeldHosts != nil {
		return s.HeldHosts
	}
	return s.Hosts
}

// MergeShard replaces the hosts of one shard in a view by the shard's hosts now, keeping
// the view sorted by name.
func MergeShard(view []plan.Host, shard workflows.HostShardView) []plan.Host {
	merged := slices.DeleteFunc(slices.Clone(view), func(h plan.Host) bool { return workflows.HostShard(h.Name) == shard.Shard })
	merged = append(merged, shard.Hosts...)
	slices.SortFunc(merged, func(a, b plan.Host) int { return strings.Compare(a.Name, b.Name) })
	return merged
}

// Changed applies a new view of the hosts. Members of a host that was lost go down,
// and those of a host forgotten are gone, so the health machinery replaces them; members
// of a host that came back are up again. Members waiting for a host get one if one fits.
//
// Maintenance holds the view back: the members' histories record what changed, and the
// view is applied when maintenance ends, so that a host lost meanwhile then takes its
// members down.
func Changed(ctx workflow.Context, c Cluster, opts Options, view []plan.Host) {
	view = plan.SortHosts(view)
	before := c.State().Hosts
	if c.InMaintenance() {
		if c.State().HeldHosts != nil {
			before = c.State().HeldHosts // its changes are recorded already
		}
		c.State().HeldHosts = view
	} else {
		c.State().Hosts = view
	}
	wasLost := func(name string) bool { return WasLost(before, name) }
	for _, h := range view {
		if h.Lost && !wasLost(h.Name) {
			c.ForgetInstalled(h.Name) // it may come back without its files
		}
	}
	for i := range c.State().Roles {
		rs := &c.State().Roles[i]
		for j := range rs.Members {
			m := &rs.Members[j]
			if m.Host == "" {
				continue
			}
			ev, reason, changed := Event(m, view, wasLost(m.Host), opts.SetUpElsewhere)
			if !changed {
				continue
			}
			c.HealthEvent(ctx, rs, m, workflows.MemberEvent{Member: m.Name, Event: ev, Reason: reason, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
	if c.InMaintenance() {
		return
	}
	noteRestarts(c, before)
	if back := StaleHostsBack(c.State(), before); len(back) > 0 {
		c.NewGeneration(fmt.Sprintf("host %s is back: remove the sandboxes of members set up elsewhere", plan.Abbreviate(back)))
		c.Touch(ctx)
	}
	if placeWaiting(c, opts) {
		c.NewGeneration("hosts changed: set up members that were waiting for a host")
		c.Touch(ctx)
	}
	Drain(ctx, c)
}

// placeWaiting gives members waiting for a host one, where one now fits, and reports
// whether any got one.
func placeWaiting(c Cluster, opts Options) bool {
	placed := false
	for i := range c.State().Roles {
		rs := &c.State().Roles[i]
		waiting := slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.Unplaced != "" })
		if !waiting {
			continue
		}
		r, _ := c.RoleSpec(rs.Name)
		rs.Members = plan.PlaceMembers(r, rs.Members, opts.HostCheck.HostsFor(c.State().Hosts, c.State().Name, r))
		placed = placed || slices.ContainsFunc(rs.Members, func(m plan.Member) bool { return m.State == plan.MemberPending && m.Host != "" && m.Unplaced == "" })
	}
	return placed
}

// Draining a host replaces each of its members by one on another host, like a member
// reported gone, but paced: in dependency order (a level's members only once the levels
// before it are off the host) and within each role's maxUnavailable. Each step is a
// replacement generation; the next step starts when a view of the hosts arrives or an
// operation ends.

// Drain takes the next step of draining any draining host.
func Drain(ctx workflow.Context, c Cluster) {
	if !c.State().OnHosts || c.Deleting() {
		return
	}
	draining := func(host string) bool { return Draining(c.State(), host) }
	names := plan.Drain(c.State().Roles, c.State().Levels, draining, func(rs plan.RoleState) int {
		def, _ := c.RoleSpec(rs.Name)
		return def.Health.UnavailableLimit(rs.Desired)
	})
	for _, name := range names {
		rs, m := c.State().FindMember(name)
		c.HealthEvent(ctx, rs, m, workflows.MemberEvent{Member: name, Event: plan.HealthDrain, Reason: fmt.Sprintf("host %s is draining", m.Host), Source: "hosts", At: workflow.Now(ctx)})
	}
}

// A host that restarts (its worker checks in with a new boot ID) has lost its members'
// processes but kept their sandboxes. Its members that subscribe to the start event get
// it, in the cluster's dependency order, so their services come back without a re-setup;
// a failed start makes the member down, and health takes over.

// noteRestarts records the hosts whose boot ID changed between two views, and starts a
// generation to bring their members back.
func noteRestarts(c Cluster, before []plan.Host) {
	restarted := Restarted(c.State(), before)
	if len(restarted) == 0 {
		return
	}
	for _, h := range restarted {
		c.ForgetInstalled(h)
		if !slices.Contains(c.State().Restarted, h) {
			c.State().Restarted = append(c.State().Restarted, h)
		}
	}
	slices.Sort(c.State().Restarted)
	c.NewGeneration(fmt.Sprintf("host %s restarted: start its members", strings.Join(restarted, ", ")))
}
