package cluster

import (
	"fmt"

	"go.temporal.io/sdk/log"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/details"
	"github.com/clusterflow/clusterflow/workflows/hosts"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
	"go.temporal.io/sdk/workflow"
)

// cluster is the cluster's desired and observed state, with the bookkeeping around them,
// and every decision about them that needs no workflow context: the workflow
// (clusterWorkflow) carries them out.
type cluster struct {
	// spec is the desired state; its generation is state.Generation.
	spec spec.Cluster
	// retiring holds roles an apply removed, until their members are gone.
	retiring []spec.Role
	state    workflows.ClusterState
	// removed are members that left and that others are still to be told about.
	removed []workflows.RemovedNode

	continueAsNewEvery int
	operationsThisRun  int

	deleteRequested bool
	cancelRequested bool
	// retireRequested closes the workflow without a teardown: the cluster moved.
	retireRequested bool

	// membershipEpoch counts members added and forgotten, so that a reconcile whose
	// listing is older than a membership change does not take a new or just removed
	// member for a rogue.
	membershipEpoch int
	// lastChange says what the latest generation is for, in the updating phase's message.
	lastChange string
	// touches counts changes of the state (touch), so that waits on the state can check a
	// number rather than walk every member.
	touches int

	// bounded says this run keeps every payload bounded (change.BoundedPayloads); runs that
	// began before keep the old ways to their end.
	bounded bool
	// signedGenerations says hosts are sent the manifest of the current spec, signed or
	// not (change.SignedGenerations).
	signedGenerations bool
	// setUpElsewhere says members being set up on a lost host are set up elsewhere
	// (change.SetUpElsewhere).
	setUpElsewhere bool
	// configMetaByQuery says hosts fetch configmeta by its hash (change.ConfigMetaByQuery)
	// from configMetas, the latest written.
	configMetaByQuery bool
	configMetas       hosts.ConfigMetas
	// lifecycle says this run keeps the lifecycle contract of change.Lifecycle.
	lifecycle bool
	// appContract says this run keeps the contract of change.AppContract too.
	appContract bool
	// bootstrap says this run marks who forms each role (change.Bootstrap).
	bootstrap bool
	// hostCheck is what placement asks of hosts' allow-lists (change.HostAllowLists).
	hostCheck plan.HostCheck
	// operating says an operation is in progress (the workflow can cancel it).
	operating bool
	// childrenDue wakes the children's follower: a change is to be told to the role
	// children running now.
	childrenDue bool
	// movedRuns are the runs of members set up elsewhere that the follower is to stop.
	movedRuns []movedRun
	// logger is the workflow's, which stays quiet during replay.
	logger log.Logger
}

// changePending says an operation is owed: a new generation, or one maintenance held.
func (c *cluster) changePending() bool {
	return c.state.Generation > c.state.AttemptedGeneration || c.state.Held != ""
}

// operationDue says an operation should start now: maintenance holds them all.
func (c *cluster) operationDue() bool {
	return c.changePending() && !c.InMaintenance()
}

// SetPhase records a phase change where operators look: status, search attributes, details.
func (c *cluster) SetPhase(ctx workflow.Context, phase workflows.Phase, message string) {
	shown := c.state.ShownPhase()
	c.state.Phase, c.state.Message = phase, message
	c.Touch(ctx)
	if c.state.ShownPhase() != shown {
		if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.ClusterPhaseKey.ValueSet(string(c.state.ShownPhase()))); err != nil {
			c.logger.Warn("Could not upsert the ClusterPhase search attribute", "Error", err)
		}
	}
	c.logger.Info("Cluster phase", "Phase", phase, "Message", message)
}

// Touch notes that the state changed and refreshes the workflow's current details.
func (c *cluster) Touch(ctx workflow.Context) {
	c.touches++
	c.state.UpdatedAt = workflow.Now(ctx)
	workflow.SetCurrentDetails(ctx, details.Current(&c.state, c.spec))
}

// resultMembers bounds the members in the status that updates and the workflow return:
// results land in the history, and a status of thousands of members would pass Temporal's
// payload limit. The status query pages through them all.
const resultMembers = 1000

// State is the cluster's observed state, which the concepts acting on it update.
func (c *cluster) State() *workflows.ClusterState { return &c.state }

// snapshot is the status as updates and the workflow's result carry it.

func (c *cluster) snapshot() workflows.ClusterStatus {
	return c.state.Status(&workflows.StatusPage{Limit: resultMembers}, workflows.ResultStatusBytes)
}

// RoleSpec finds a role of the desired spec, or one an apply removed whose members are not
// gone yet.
func (c *cluster) RoleSpec(name string) (spec.Role, bool) {
	if r, ok := c.spec.Role(name); ok {
		return r, true
	}
	for _, r := range c.retiring {
		if r.Name == name {
			return r, true
		}
	}
	return spec.Role{}, false
}

// canceledMessage sums up what a cancel left behind.
func canceledMessage(s *workflows.ClusterState) string {
	canceled, notStarted := 0, 0
	for _, r := range s.Roles {
		for _, m := range r.Members {
			switch {
			case m.State == plan.MemberConfigError && m.Detail == "canceled":
				canceled++
			case m.State == plan.MemberPending:
				notStarted++
			}
		}
	}
	return fmt.Sprintf("stopped at generation %d by a cancel: %d %s canceled, %d not started", s.Generation, canceled, workflows.Plural(canceled, "member"), notStarted)
}

// Desired is the desired spec.
func (c *cluster) Desired() spec.Cluster { return c.spec }

// Logger is the workflow's logger, quiet during replay.
func (c *cluster) Logger() log.Logger { return c.logger }

// Deleting, InMaintenance and Operating say whether a delete was accepted, maintenance
// holds the cluster, and an operation runs: for the concepts that act between passes.
func (c *cluster) Deleting() bool { return c.deleteRequested }

// MembershipEpoch counts members added and forgotten, so that a reconcile whose listing is
// older than a membership change does not take a new or just removed member for a rogue.
func (c *cluster) MembershipEpoch() int { return c.membershipEpoch }

// MembersChanged counts a member added or forgotten.
func (c *cluster) MembersChanged() { c.membershipEpoch++ }

// Retiring are the roles an apply removed whose members are not gone yet.
func (c *cluster) Retiring() []spec.Role { return c.retiring }

func (c *cluster) Operating() bool { return c.operating }

// Touches counts the changes of the state (Touch), so that waits on the state can check a
// number rather than walk every member.
func (c *cluster) Touches() int { return c.touches }

// movedRun is the run of a member set up elsewhere, to stop in its role's operation.
type movedRun struct {
	role, member string
	hostLost     bool
}

// StopMovedRun has the children's follower stop the run of a member set up elsewhere.
func (c *cluster) StopMovedRun(role, member string, hostLost bool) {
	c.movedRuns = append(c.movedRuns, movedRun{role, member, hostLost})
	c.childrenDue = true
}

// HealthReported lets the rollout's health gate count a report about a member it watches.
func (c *cluster) HealthReported(member string, ev workflows.MemberEvent) {
	rollout.NoteHealthReport(&c.state, member, ev)
}

// HealthEvent feeds an event about a member to its state machine: for the hosts' view.
func (w *clusterWorkflow) HealthEvent(ctx workflow.Context, rs *plan.RoleState, m *plan.Member, ev workflows.MemberEvent) workflows.MemberEventResult {
	return w.health.Step(ctx, w, rs, m, ev)
}
