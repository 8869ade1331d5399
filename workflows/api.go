// Package workflows holds clusterflow's deterministic workflow code: one entity workflow per
// cluster, and a child workflow per role operation so that the cluster's own history grows
// with its roles, not its members.
package workflows

import (
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/internal/spec"
)

// The contract shared by workflows, worker and starter.
const (
	DefaultTaskQueue = "clusterflow"

	ClusterWorkflowName = "ClusterWorkflow"
	RoleWorkflowName    = "RoleWorkflow"

	// StatusQuery returns the ClusterStatus that `clusterflow status -o json` prints.
	StatusQuery = "status"
	// DeleteUpdate starts deleting a cluster and returns its status once accepted.
	DeleteUpdate = "delete"
	// ResizeUpdate sets role member counts; it returns a ChangeResult once accepted.
	ResizeUpdate = "resize"
	// ApplyUpdate replaces the desired spec; it returns a ChangeResult once accepted.
	ApplyUpdate = "apply"
	// CancelUpdate stops the operation in progress and returns the status once accepted.
	CancelUpdate = "cancel"
	// RoleProgressSignal carries member changes from a role child to its cluster.
	RoleProgressSignal = "role-progress"
	// StopMembersSignal tells a role child to stop configuring members no longer wanted.
	StopMembersSignal = "stop-members"
	// AddMembersSignal gives a role child that is configuring more members to set up.
	AddMembersSignal = "add-members"

	// MemberEventSignal carries a MemberEvent from any external service (plain JSON, so any
	// Temporal SDK can send it). Events about unknown members are logged and ignored.
	MemberEventSignal = "member-event"
	// MemberEventUpdate takes the same MemberEvent, refuses unknown members and events by
	// name, and returns the MemberEventResult.
	MemberEventUpdate = "report-member-event"
	// ResumeUpdate lifts paused replacement (the meltdown guard) and flapping marks; it
	// returns a ResumeResult.
	ResumeUpdate = "resume"
	// ReconcileUpdate compares the members with what the backend has now and returns a
	// ReconcileReport.
	ReconcileUpdate = "reconcile"

	clusterIDPrefix = "cluster/"
)

// Search attributes set on every cluster workflow.
var (
	ClusterNameKey  = temporal.NewSearchAttributeKeyKeyword("ClusterName")
	ClusterPhaseKey = temporal.NewSearchAttributeKeyKeyword("ClusterPhase")
	// ClusterRolesKey lists the cluster's roles; ClusterMembersKey counts its desired members.
	ClusterRolesKey   = temporal.NewSearchAttributeKeyKeywordList("ClusterRoles")
	ClusterMembersKey = temporal.NewSearchAttributeKeyInt64("ClusterMembers")
	// SearchAttributes lists the custom search attributes a namespace must have registered.
	SearchAttributes = []temporal.SearchAttributeKey{ClusterNameKey, ClusterPhaseKey, ClusterRolesKey, ClusterMembersKey}
)

// SearchAttributeTypes maps each custom search attribute to its type, for registration.
func SearchAttributeTypes() map[string]enums.IndexedValueType {
	types := map[string]enums.IndexedValueType{}
	for _, key := range SearchAttributes {
		types[key.GetName()] = key.GetValueType()
	}
	return types
}

// ClusterWorkflowID is the workflow ID of a cluster's entity workflow.
func ClusterWorkflowID(cluster string) string { return clusterIDPrefix + cluster }

// ClusterNameFromWorkflowID is the reverse of ClusterWorkflowID.
func ClusterNameFromWorkflowID(id string) (string, bool) {
	name, ok := strings.CutPrefix(id, clusterIDPrefix)
	return name, ok && !strings.Contains(name, "/")
}

// Error is the one error type of clusterflow's API: a code and a message, the same words
// in the CLI, the starter and over HTTP. An update's validator refuses with a Temporal
// ApplicationError whose type is the code, and the starter turns it back into an Error.
type Error = apperr.Error

// ErrorCode says what kind of problem an Error is; ErrorCodeOf reads it from any error.
type ErrorCode = apperr.Code

const (
	ErrInvalid     = apperr.Invalid
	ErrNotFound    = apperr.NotFound
	ErrConflict    = apperr.Conflict
	ErrGone        = apperr.Gone
	ErrUnavailable = apperr.Unavailable
	ErrFailed      = apperr.Failed
	ErrInternal    = apperr.Internal
)

// ErrorCodeOf is err's code: ErrInternal for an error without one.
func ErrorCodeOf(err error) ErrorCode { return apperr.CodeOf(err) }

// ClusterInput starts a cluster workflow, or continues one as new.
type ClusterInput struct {
	// Spec is the desired spec.
	Spec spec.Cluster `json:"spec"`
	// ContinueAsNewEvery, when positive, continues the workflow as new after that many
	// operations even if Temporal does not suggest it yet (tests set it to 1).
	ContinueAsNewEvery int `json:"continueAsNewEvery,omitempty"`
	// Carried is the state a previous run handed over when it continued as new.
	Carried *Carried `json:"carried,omitempty"`
}

// Carried is what a cluster workflow hands to its next run when it continues as new.
type Carried struct {
	State clusterState `json:"state"`
	// Removed are members that left and that other members have not been told about yet.
	Removed []RemovedNode `json:"removed,omitempty"`
	// Retiring are roles an apply removed whose members are not all gone yet.
	Retiring []spec.Role `json:"retiring,omitempty"`
}

// RemovedNode is a member that left, with what the cluster knew of who knew it.
type RemovedNode struct {
	Role      string `json:"role"`
	Name      string `json:"name"`
	ListedIn  int    `json:"listedIn"`
	Announced bool   `json:"announced,omitempty"`
	// UnlistedFrom is set for a replaced member: members listed from then on never knew it.
	UnlistedFrom int `json:"unlistedFrom,omitempty"`
}

// NodeGroup names members of one role.
type NodeGroup struct {
	Role  string   `json:"role"`
	Nodes []string `json:"nodes"`
}

// RoleCount is one ROLE=N of a resize.
type RoleCount struct {
	Role    string `json:"role"`
	Members int    `json:"members"`
}

// ResizeRequest sets the member count of some roles; the others keep theirs.
type ResizeRequest struct {
	Counts []RoleCount `json:"counts"`
}

// ApplyRequest replaces the desired spec of an existing cluster.
type ApplyRequest struct {
	Spec spec.Cluster `json:"spec"`
}

// ChangeResult says what an accepted resize or apply became.
type ChangeResult struct {
	// Generation is the desired generation the change created, or the current one when it
	// changed nothing.
	Generation int  `json:"generation"`
	Changed    bool `json:"changed"`
	// Summary describes the change, e.g. "worker 2 → 4".
	Summary string `json:"summary"`
}

// StopMembers names members a role child must stop configuring.
type StopMembers struct {
	Members []string `json:"members"`
}

// AddMembers are more members for a role child that is configuring.
type AddMembers struct {
	Members []Member `json:"members"`
}

// MemberEvent is a health report about one member.
type MemberEvent struct {
	Member string      `json:"member"`
	Event  HealthEvent `json:"event"`
	Reason string      `json:"reason,omitempty"`
	// Source names the reporting service, e.g. "prometheus" or "cli".
	Source string `json:"source,omitempty"`
	// At is when the source saw it; the workflow's own clock drives the timers.
	At time.Time `json:"at,omitzero"`
}

// MemberEventResult is the transition a MemberEvent caused, or why it caused none.
type MemberEventResult struct {
	Member string      `json:"member"`
	From   MemberState `json:"from"`
	To     MemberState `json:"to"`
	// Ignored explains an event the state machine has no transition for.
	Ignored string `json:"ignored,omitempty"`
}

// ResumeResult says what a resume lifted.
type ResumeResult struct {
	// Roles had automatic replacement paused; Members were flapping.
	Roles   []string `json:"roles,omitempty"`
	Members []string `json:"members,omitempty"`
}

// ReconcileReport is what comparing the members with the backend found.
type ReconcileReport struct {
	// Listed counts the members the backend has.
	Listed int `json:"listed"`
	// Rogues are backend members the cluster did not know; they are being removed.
	Rogues []string `json:"rogues,omitempty"`
	// Gone are known members the backend no longer has; they are treated as gone.
	Gone []string `json:"gone,omitempty"`
	// Deferred says why rogues were not looked for this time, if they were not.
	Deferred string `json:"deferred,omitempty"`
}

// RoleOperation is what a role child workflow does to its members.
type RoleOperation string

const (
	OpConfigure RoleOperation = "configure"
	OpTeardown  RoleOperation = "teardown"
	// OpAddNodes and OpDelNodes notify members of other members joining or leaving.
	OpAddNodes RoleOperation = "addnodes"
	OpDelNodes RoleOperation = "delnodes"
)

// RoleInput starts a role child workflow.
type RoleInput struct {
	Cluster   string        `json:"cluster"`
	Operation RoleOperation `json:"operation"`
	Role      spec.Role     `json:"role"`
	// Members are the members to act on, in ordinal order.
	Members []Member `json:"members"`
	// Nodes are the members joining or leaving, for OpAddNodes and OpDelNodes.
	Nodes *NodeGroup `json:"nodes,omitempty"`
	// MemberNodes, aligned with Members, are the nodes each member is told about: those of
	// Nodes it does not know yet.
	MemberNodes [][]string `json:"memberNodes,omitempty"`
}

// RoleResult is every member's state once a role operation is over.
type RoleResult struct {
	Members []Member `json:"members"`
}

// RoleProgress reports member changes while a role operation runs.
type RoleProgress struct {
	Role string `json:"role"`
	// Operation is the child workflow ID, so a late report of a finished operation is ignored.
	Operation string   `json:"operation"`
	Members   []Member `json:"members"`
}
