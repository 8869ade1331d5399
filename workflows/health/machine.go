package health

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/change"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/internal/metric"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/role"
	"go.temporal.io/sdk/workflow"
)

// RechecksAtOnce bounds the rechecks (change.RecheckDown) one run has asked of hosts and
// not heard back from: an alert that takes a whole large role down must not pass the
// 2,000 activities Temporal lets a workflow have pending. A member past the bound stays
// down, as before rechecks, until its checks change or replaceAfter.
const RechecksAtOnce = 200

// Machine is member health as the cluster workflow runs it: it feeds the events reported
// of members, and those it raises itself (timers, reconciles, hosts lost), to each
// member's state machine, and carries out what a transition asks: a replacement, a member
// set up elsewhere, a new phase. It reaches its cluster through Cluster, given to each
// call.
type Machine struct {
	// Options are the cluster run's, fixed when it starts.
	Options
	runner *role.Runner
	// version counts health changes, to wake the health timer.
	version int
	// rogues are backend members reconcile found, for the next pass to remove.
	rogues []backend.MemberRef
	// reconciles counts this run's periodic reconciles.
	reconciles int
	// listings counts this run's listings in children, which name them.
	listings int
	// rechecking counts the rechecks asked of hosts and not yet answered.
	rechecking int
}

// Options are what a cluster's run decided when it started (see workflows/internal/change).
type Options struct {
	// Bounded keeps every payload bounded (change.BoundedPayloads).
	Bounded bool
	// SetUpElsewhere sets members being set up elsewhere when their host is lost
	// (change.SetUpElsewhere).
	SetUpElsewhere bool
	// AppContract keeps the contract of change.AppContract.
	AppContract bool
	// HostCheck is what placement asks of hosts' allow-lists.
	HostCheck plan.HostCheck
	// HostsAtOnce bounds the hosts a reconcile lists at once (0: all).
	HostsAtOnce int
}

// NewMachine is the health of a cluster whose members the runner acts on.
func NewMachine(runner *role.Runner) *Machine { return &Machine{runner: runner} }

// Cluster is what member health needs of its cluster: its state and specs, showing
// changes, starting a generation, and whether it is being deleted, held by maintenance or
// operating; MembersChanged counts members added or forgotten, so that a reconcile whose
// listing is older than such a change takes no member for gone or rogue.
type Cluster interface {
	State() *workflows.ClusterState
	Desired() spec.Cluster
	RoleSpec(name string) (spec.Role, bool)
	Logger() log.Logger
	Touch(ctx workflow.Context)
	SetPhase(ctx workflow.Context, phase workflows.Phase, message string)
	NewGeneration(reason string)
	Deleting() bool
	InMaintenance() bool
	Operating() bool
	MembershipEpoch() int
	MembersChanged()
	// Retiring are the roles an apply removed whose members are not gone yet.
	Retiring() []spec.Role
	// Folder is the cluster's folder on hosts.
	Folder() backend.ClusterRef
	// HealthReported hears of every report about a member, before its state machine
	// does: a rollout watching the member counts a down report against its gate.
	HealthReported(member string, ev workflows.MemberEvent)
	// StopMovedRun has the run of a member set up elsewhere stopped in its role's
	// operation, outside the handler of the event that moved it.
	StopMovedRun(role, member string, hostLost bool)
}

// Version counts health changes: a change wakes whoever waits on it.
func (hm *Machine) Version() int { return hm.version }

// Reconciles counts this run's periodic reconciles.
func (hm *Machine) Reconciles() int { return hm.reconciles }

// TakeRogues hands the rogues reconcile found to the pass that removes them.
func (hm *Machine) TakeRogues() []backend.MemberRef {
	rogues := hm.rogues
	hm.rogues = nil
	return rogues
}

// roleSpecs are the desired spec's roles and those an apply removed whose members are not
// gone yet.
func roleSpecs(c Cluster) []spec.Role { return slices.Concat(c.Desired().Roles, c.Retiring()) }

func memberRef(folder backend.ClusterRef, role, name string) backend.MemberRef {
	return backend.MemberRef{Cluster: folder.Name, Home: folder.Home, Role: role, Name: name}
}

// Step feeds one event to a member's state machine (Transition) and carries out the
// transition: a replacement when the member enters replacing, a setup elsewhere
// when it goes back to pending.
func (hm *Machine) Step(ctx workflow.Context, c Cluster, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult {
	c.HealthReported(m.Name, ev)
	if c.Deleting() {
		return workflows.MemberEventResult{Member: m.Name, From: m.State, To: m.State, Ignored: fmt.Sprintf("cluster %s is being deleted", c.State().Name)}
	}
	now := workflow.Now(ctx)
	if c.InMaintenance() {
		result := Hold(m, ev, c.State().Maintenance.Describe(), now)
		c.Logger().Info("Member health event held for maintenance", "Member", m.Name, "Event", ev.Event, "Source", ev.Source)
		c.Touch(ctx)
		return result
	}
	r, _ := c.RoleSpec(rs.Name)
	given := Given{
		Paused:         ReplacementPaused(rs, m, UnavailableLimit(rs, r)),
		SetUpElsewhere: hm.SetUpElsewhere,
		// Asked only of a watch-only report, which no history of before it holds.
		WatchOnly: ev.WatchOnly && workflow.GetVersion(ctx, change.WatchOnlyReports, workflow.DefaultVersion, 1) >= 1,
	}
	result := Transition(m, ev, r.Health.WithDefaults(), given, now)
	if result.Ignored != "" {
		c.Logger().Info("Member health event ignored", "Member", m.Name, "State", m.State, "Event", ev.Event, "Source", ev.Source)
		return result
	}
	c.Logger().Info("Member health", "Member", m.Name, "From", result.From, "To", result.To, "Event", ev.Event, "Reason", ev.Reason, "Source", ev.Source)
	metric.Transition(ctx, c.State().Name, rs.Name, result.From, result.To, ev.Event, ev.Source)
	switch result.To {
	case plan.MemberReplacing:
		metric.Replacement(ctx, c.State().Name, rs.Name, ev.Event)
		hm.replace(c, rs, m, ev)
	case plan.MemberPending:
		hm.rehome(ctx, c, rs, m, result.From, ev)
	case plan.MemberDown:
		if result.From != plan.MemberDown && ev.Check == nil && r.Wants(spec.EventCheck) &&
			workflow.GetVersion(ctx, change.RecheckDown, workflow.DefaultVersion, 1) >= 1 {
			hm.recheck(ctx, c, rs, m)
		}
	}
	hm.changed(ctx, c)
	return result
}

// recheck has the host of a member taken down by anything but its own check count its
// checks afresh (change.RecheckDown), without waiting for it: a host that cannot be
// reached leaves the member down, as before, for replaceAfter to decide.
func (hm *Machine) recheck(ctx workflow.Context, c Cluster, rs *plan.RoleState, m *plan.Member) {
	// Asked only at the bound, which no history of before it reached.
	if hm.rechecking >= RechecksAtOnce && workflow.GetVersion(ctx, change.BoundedRechecks, workflow.DefaultVersion, 1) >= 1 {
		c.Logger().Warn("Too many members are being rechecked at once; this one stays down until its checks change or replaceAfter",
			"Member", m.Name, "Rechecking", hm.rechecking)
		return
	}
	hm.rechecking++
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		Summary:             "recheck " + m.Name,
	})
	f := workflow.ExecuteActivity(flow.OnHost(ctx, m.Host, flow.ClientTaskWait), flow.ActRecheckMember, memberRef(c.Folder(), rs.Name, m.Name))
	name := m.Name
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { hm.rechecking-- }()
		if err := f.Get(ctx, nil); err != nil {
			c.Logger().Warn("Could not have a member's checks counted afresh; it stays down until its checks change or replaceAfter", "Member", name, "Error", err)
		}
	})
}

// changed wakes the health watcher, which rearms its timer, and re-evaluates the
// meltdown guard and the phase.
func (hm *Machine) changed(ctx workflow.Context, c Cluster) {
	hm.version++
	hm.RefreshMeltdown(c)
	hm.show(ctx, c)
	c.Touch(ctx)
}

// FailedStartsAreDown makes each member whose start failed down, rather than failed: its
// setup stands; only its services are down, and health takes over.
func (hm *Machine) FailedStartsAreDown(ctx workflow.Context, c Cluster, work []plan.RoleWork) {
	for _, rw := range work {
		for _, m := range rw.Members {
			rs, live := c.State().FindMember(m.Name)
			if live == nil || live.State != plan.MemberConfigError || live.Event != spec.EventStart {
				continue
			}
			why := live.Detail
			live.State = plan.MemberReady
			hm.Step(ctx, c, rs, live, workflows.MemberEvent{Member: m.Name, Event: plan.HealthDown, Reason: why, Source: "hosts", At: workflow.Now(ctx)})
		}
	}
}

// RefreshMeltdown pauses or unpauses each role's replacement, waking the health timer
// when that changed.
func (hm *Machine) RefreshMeltdown(c Cluster) {
	if refreshMeltdown(c.State().Roles, roleSpecs(c)) {
		hm.version++
	}
}

// show puts members' health into the phase while no operation runs: a ready cluster
// with unavailable members is degraded, and paused if a role's replacement is paused.
// Failed and canceled clusters keep their phase; their members show their health.
func (hm *Machine) show(ctx workflow.Context, c Cluster) {
	switch c.State().Phase {
	case workflows.PhaseReady, workflows.PhaseDegraded, workflows.PhasePaused:
	default:
		return
	}
	if c.Operating() || c.Deleting() {
		return // the operation in progress owns the phase
	}
	phase, message := hm.Phase(c)
	c.SetPhase(ctx, phase, message)
}

// Phase is the phase and message of a cluster whose last operation reached its goal.
func (hm *Machine) Phase(c Cluster) (workflows.Phase, string) {
	return phase(c.State().Name, c.State().Roles, hm.AppContract, flow.RefusalNames)
}

// Wake makes the health timer look again at what holds it (maintenance, say).
func (hm *Machine) Wake() { hm.version++ }
