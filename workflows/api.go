// Package workflows holds clusterflow's deterministic workflow code: one entity workflow per
// cluster, and a child workflow per role operation so that the cluster's own history grows
// with its roles, not its members.
package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// The contract shared by workflows, worker and starter.
const (
	DefaultTaskQueue = "clusterflow"

	ClusterWorkflowName = "ClusterWorkflow"
	RoleWorkflowName    = "RoleWorkflow"

	// StatusQuery returns the ClusterStatus that `clusterflow status -o json` prints.
	StatusQuery = "status"
	// ConfigMetaQuery takes the hash of a configmeta the cluster is writing to its hosts
	// (backend.ConfigMetaSource) and returns it, gzipped JSON: a host fetches it rather
	// than every host's write carrying it through the cluster's history.
	ConfigMetaQuery = "configmeta"
	// DeleteUpdate starts deleting a cluster and returns its status once accepted.
	DeleteUpdate = "delete"
	// ResizeUpdate sets role member counts; it returns a ChangeResult once accepted.
	ResizeUpdate = "resize"
	// ApplyUpdate replaces the desired spec; it returns a ChangeResult once accepted.
	ApplyUpdate = "apply"
	// ManifestQuery returns the manifest a signature of the cluster's spec covers
	// (internal/signing), as a ResizeRequest's counts (none: as it is) would make it: what
	// to sign. (Named to sort after status, which the Web UI's Queries tab then offers
	// first.)
	ManifestQuery = "to-sign"
	// SpecQuery returns the desired spec, with its hash (a DesiredSpec): what `clusterflow
	// set` edits and applies again. (Named, as ManifestQuery, to sort after status.)
	SpecQuery = "to-edit"
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

// ClusterInput starts a cluster workflow, or continues one as new.
type ClusterInput struct {
	// Spec is the desired spec.
	Spec spec.Cluster `json:"spec"`
	// ContinueAsNewEvery, when positive, continues the workflow as new after that many
	// operations even if Temporal does not suggest it yet (tests set it to 1).
	ContinueAsNewEvery int `json:"continueAsNewEvery,omitempty"`
	// Carried is the state a previous run handed over when it continued as new. A large
	// one comes as CarriedGzip instead: Carried's JSON, gzipped.
	Carried     *Carried `json:"carried,omitempty"`
	CarriedGzip []byte   `json:"carriedGzip,omitempty"`
	// Hosts is the registry's view when the cluster was deployed; with any host, the
	// cluster places its members on hosts.
	Hosts []Host `json:"hosts,omitempty"`
	// HostsGzip, for a fleet of thousands of hosts, is Hosts as gzipped JSON.
	HostsGzip []byte `json:"hostsGzip,omitempty"`
}

// Carried is what a cluster workflow hands to its next run when it continues as new.
type Carried struct {
	State ClusterState `json:"state"`
	// Removed are members that left and that other members have not been told about yet.
	Removed []RemovedNode `json:"removed,omitempty"`
	// Retiring are roles an apply removed whose members are not all gone yet.
	Retiring []spec.Role `json:"retiring,omitempty"`
	// Deleting says a delete was accepted: the next run deletes the cluster.
	Deleting bool `json:"deleting,omitempty"`
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

// RoleCount is one ROLE=N of a resize.
type RoleCount struct {
	Role    string `json:"role"`
	Members int    `json:"members"`
}

// ResizeRequest sets the member count of some roles; the others keep theirs.
type ResizeRequest struct {
	Counts []RoleCount `json:"counts"`
	// Remove names members to take away (resize --remove): they leave as any shrink's
	// members do (decommission, removing, teardown), the others stay. Each one's role must
	// be in Counts at its desired count less the members named in it.
	Remove []string `json:"remove,omitempty"`
	// Signature signs the resized spec's manifest (see ManifestQuery); without one the new
	// generation is unsigned, and hosts that trust keys run what an earlier signed spec
	// of theirs covers (the member count is not checked on hosts).
	Signature *spec.Signature `json:"signature,omitempty"`
}

// ApplyRequest replaces the desired spec of an existing cluster.
type ApplyRequest struct {
	Spec spec.Cluster `json:"spec"`
	// By is the client identity applying it, which the revisions record.
	By string `json:"by,omitempty"`
	// IfSpec, when set, is the hash (DesiredSpec.Hash) of the desired spec Spec was made
	// from: the apply is refused if the desired spec changed since, so that an edit of one
	// setting never undoes a change that came between (a resize, another edit).
	IfSpec string `json:"ifSpec,omitempty"`
}

// DesiredSpec is the answer of SpecQuery.
type DesiredSpec struct {
	Spec spec.Cluster `json:"spec"`
	// Hash is SpecHash of Spec.
	Hash string `json:"hash"`
}

// SpecHash names a desired spec by its content: the SHA-256 of its JSON (whose maps
// encode in sorted order), in hex.
func SpecHash(c spec.Cluster) (string, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode spec %s: %w", c.Name, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// ChangeResult says what an accepted resize or apply became.
type ChangeResult struct {
	// Generation is the desired generation the change created, or the current one when it
	// changed nothing.
	Generation int  `json:"generation"`
	Changed    bool `json:"changed"`
	// Summary describes the change, e.g. "worker 2 → 4".
	Summary string `json:"summary"`
	// Revision is the revision the change made, when it changed what members run: a
	// rollout of it has started.
	Revision int `json:"revision,omitempty"`
}

// StopMembers names members a role child must stop configuring.
type StopMembers struct {
	Members []string `json:"members"`
	// HostLost says their host is lost: nothing is sent there to stop their scripts.
	HostLost bool `json:"hostLost,omitempty"`
	// Halt, when set, stops the child starting any further member, and says why: another
	// batch of the same role failed.
	Halt string `json:"halt,omitempty"`
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
	// WatchOnly says the reporter may watch but not replace (a gateway token without the
	// replace scope): a down or unhealthy it reports never leads to a replacement by
	// itself.
	WatchOnly bool `json:"watchOnly,omitempty"`
	// Check, from a member's own probe (Source "probe"), is the check that changed its
	// health: the host that ran it, and how many in a row agreed.
	Check *spec.ProbeCheck `json:"check,omitempty"`
}

// ProbeSource is the Source of the reports a member's host sends of its checks.
const ProbeSource = "probe"

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
	// Roles had automatic replacement paused; Members were flapping (the first
	// ReportNames of them, and MoreMembers more).
	Roles       []string `json:"roles,omitempty"`
	Members     []string `json:"members,omitempty"`
	MoreMembers int      `json:"moreMembers,omitempty"`
}

// ReconcileReport is what comparing the members with the backend found. Its lists name
// at most ReportNames members each, and count the rest.
type ReconcileReport struct {
	// Listed counts the members the backend has.
	Listed int `json:"listed"`
	// Rogues are backend members the cluster did not know; they are being removed.
	Rogues     []string `json:"rogues,omitempty"`
	MoreRogues int      `json:"moreRogues,omitempty"`
	// Gone are known members the backend no longer has; they are treated as gone.
	Gone     []string `json:"gone,omitempty"`
	MoreGone int      `json:"moreGone,omitempty"`
	// Deferred says why rogues were not looked for this time, if they were not.
	Deferred string `json:"deferred,omitempty"`
}

// ReportNames is how many members an update's answer names in one list; it counts the rest.
const ReportNames = 100

// CapNames keeps the first ReportNames names of a list and counts the rest.
func CapNames(names []string) ([]string, int) {
	if len(names) <= ReportNames {
		return names, 0
	}
	return names[:ReportNames], len(names) - ReportNames
}

// RoleInput starts a role child workflow.
type RoleInput struct {
	Cluster string `json:"cluster"`
	// Home is the cluster's (clusterState.Home), which its members' hosts need.
	Home      string        `json:"home,omitempty"`
	Operation RoleOperation `json:"operation"`
	Role      spec.Role     `json:"role"`
	// Members are the members to act on, in ordinal order.
	Members []Member `json:"members"`
	// Nodes are the members joining or leaving, for OpAddNodes and OpDelNodes.
	Nodes *NodeGroup `json:"nodes,omitempty"`
	// MemberNodes, aligned with Members, are the nodes each member is told about: those of
	// Nodes it does not know yet.
	MemberNodes [][]string `json:"memberNodes,omitempty"`
	// MaxInFlight, when set, is this child's share of the role's maxInFlight: a wide role
	// runs as batches, a child each, and the limit holds across all of them.
	MaxInFlight int `json:"maxInFlight,omitempty"`
	// Notice, for OpAddNodes and OpDelNodes, names the notice the members' hosts hold:
	// each host works out from it the nodes each member is told of (Nodes and MemberNodes
	// are then empty).
	Notice *NoticeRef `json:"notice,omitempty"`
	// EnvHash names the role's env among the cluster's files; Role.Env is then empty.
	EnvHash string `json:"envHash,omitempty"`
	// Revision is the cluster's revision: the members a configure or an upgrade sets up
	// run it.
	Revision int `json:"revision,omitempty"`
	// Action is what an OpAction runs.
	Action *plan.ActionCall `json:"action,omitempty"`
}

// RoleResult is every member's state once a role operation is over.
type RoleResult struct {
	Members []Member `json:"members"`
}

// What a role child reports of a member's detail: at most MaxDetail bytes; SeeLogs ends one
// whose output tails were not kept; TeardownFailed starts one whose teardown failed.
const (
	MaxDetail      = 512
	SeeLogs        = " (output: `clusterflow logs`)"
	TeardownFailed = "teardown failed (ignored): "
)

// RoleProgress reports member changes while a role operation runs.
type RoleProgress struct {
	Role string `json:"role"`
	// Operation is the child workflow ID, so a late report of a finished operation is ignored.
	Operation string   `json:"operation"`
	Members   []Member `json:"members"`
}

// Member health: the events services report, and each member's record of them.

// ReportedEvents are the events external services may send.
var ReportedEvents = []HealthEvent{HealthDown, HealthUp, HealthGone, HealthUnhealthy}

// CheckReportedEvent says why an event is not one external services may send, or nil: the
// one check of the update's validator and the gateway.
func CheckReportedEvent(event HealthEvent) error {
	if slices.Contains(ReportedEvents, event) {
		return nil
	}
	names := make([]string, len(ReportedEvents))
	for i, e := range ReportedEvents {
		names[i] = string(e)
	}
	return fmt.Errorf("%q is not one of %s", spec.Clip(string(event), 32), strings.Join(names, ", "))
}

// CheckMemberEventText refuses a reason, source or check longer than its limit: they are
// kept in the member's health history, carried whole across continue-as-new.
func CheckMemberEventText(ev MemberEvent) error {
	type text struct {
		name, value string
		limit       int
	}
	texts := []text{{"reason", ev.Reason, spec.MaxTextBytes}, {"source", ev.Source, spec.MaxTextBytes}}
	if c := ev.Check; c != nil {
		texts = append(texts, text{"check.host", c.Host, spec.MaxTextBytes}, text{"check.result", c.Result, spec.MaxTextBytes}, text{"check.output", c.Output, spec.MaxCheckOutput})
	}
	for _, t := range texts {
		if len(t.value) > t.limit {
			return apperr.Errorf(apperr.Invalid, "%s: is %d bytes; at most %d", t.name, len(t.value), t.limit)
		}
	}
	return nil
}

// ConfigMetaLeaving is the state configmeta gives a member a change no longer wants, until
// it is gone.
const ConfigMetaLeaving = "leaving"

// ErrPayloadTooLarge is the error type of an operation that would have sent a payload
// Temporal refuses.
const ErrPayloadTooLarge = "PayloadTooLarge"
