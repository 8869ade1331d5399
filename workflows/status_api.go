package workflows

import (
	"time"

	"github.com/clusterflow/clusterflow/spec"
)

// The status: what the status query, the updates and `clusterflow status -o json` give.

// Phase is where a cluster is in its life.
type Phase string

const (
	PhaseDeploying Phase = "deploying"
	// PhaseUpdating is any later operation: a resize, an apply, a replacement or a rogue's
	// removal converging.
	PhaseUpdating Phase = "updating"
	PhaseReady    Phase = "ready"
	PhaseFailed   Phase = "failed"
	// PhaseCanceled follows a cancel: the operation stopped where it was.
	PhaseCanceled Phase = "canceled"
	// PhaseDegraded is ready but for members that are down, flapping or being replaced.
	PhaseDegraded Phase = "degraded"
	// PhasePaused is degraded with automatic replacement paused for some role, because more
	// of its members are unavailable than its maxUnavailable allows (the meltdown guard).
	PhasePaused   Phase = "paused"
	PhaseDeleting Phase = "deleting"
	PhaseDeleted  Phase = "deleted"
	// PhaseTerminated is never the workflow's own: the starter reports it for a cluster whose
	// workflow ended without deleting it (terminated from the Web UI, say, or timed out).
	PhaseTerminated Phase = "terminated"
)

// StatusAPIVersion names the shape of ClusterStatus. It changes only with a change users
// must adapt their scripts to; testdata/status.golden.json pins the shape, and docs/reference.md
// documents it field by field.
const StatusAPIVersion = "clusterflow/v1"

// ClusterStatus is the answer to the status query, and what `clusterflow status -o json`
// prints: a projection of the workflow's state without its bookkeeping.
type ClusterStatus struct {
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	// Home names the cluster's folders on its hosts, <data>/clusters/NAME@HOME; empty for
	// a cluster deployed before homes, whose folders are <data>/clusters/NAME.
	Home    string `json:"home,omitempty"`
	Phase   Phase  `json:"phase"`
	Message string `json:"message,omitempty"`
	// Origin is where the spec came from, as deploy or apply was told.
	Origin string `json:"origin,omitempty"`
	// Levels is the dependency plan: the roles set up together, level by level.
	Levels    [][]string   `json:"levels"`
	Roles     []RoleStatus `json:"roles"`
	CreatedAt time.Time    `json:"createdAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
	// Generation is the desired state's generation: 1 at deploy, one more for every
	// accepted change. AttemptedGeneration is the latest one an operation worked toward,
	// and ReachedGeneration the latest one an operation fully reached.
	Generation          int `json:"generation"`
	AttemptedGeneration int `json:"attemptedGeneration"`
	ReachedGeneration   int `json:"reachedGeneration"`
	// Maintenance is set while the fleet's maintenance holds the cluster; Phase is then
	// maintenance, and Message says what it holds.
	Maintenance *Maintenance `json:"maintenance,omitempty"`
	// Signatures says who signed the spec of each recent generation, newest first, once
	// any spec of the cluster was signed.
	Signatures []GenerationSignature `json:"signatures,omitempty"`
	// Revision is the revision of what members run: 1 at deploy, one more for every apply
	// that changes a role's settings. Revisions lists the latest ones, and Rollout is the
	// latest rollout's progress.
	Revision  int            `json:"revision,omitempty"`
	Revisions []Revision     `json:"revisions,omitempty"`
	Rollout   *RolloutStatus `json:"rollout,omitempty"`
	// Actions are the latest actions run (clusterflow run), oldest first.
	Actions []ActionStatus `json:"actions,omitempty"`
	// FailedTeardowns are the latest teardowns that failed, oldest first: the member was
	// removed all the same, and its output is kept on its host (see `clusterflow logs`).
	FailedTeardowns []FailedTeardown `json:"failedTeardowns,omitempty"`
}

// FailedTeardown is a removed member whose teardown failed.
type FailedTeardown struct {
	Member string `json:"member"`
	Role   string `json:"role"`
	Host   string `json:"host,omitempty"`
	// Reason is why the member left (delete, shrink, replace, drain, orphan), and
	// Generation the desired generation then.
	Reason     string    `json:"reason,omitempty"`
	Generation int       `json:"generation"`
	At         time.Time `json:"at"`
	Detail     string    `json:"detail"`
	StdoutTail string    `json:"stdoutTail,omitempty"`
	StderrTail string    `json:"stderrTail,omitempty"`
}

// GenerationSignature names the key that signed a generation's spec; none: unsigned. The
// workflow does not check signatures (hosts with --trusted-keys do): this is what the
// spec said.
type GenerationSignature struct {
	Generation int    `json:"generation"`
	Key        string `json:"key,omitempty"`
}

// RoleStatus is one role's desired size and its members.
type RoleStatus struct {
	Name      string   `json:"name"`
	Level     int      `json:"level"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Desired   int      `json:"desired"`
	Ready     int      `json:"ready"`
	// MemberCount is how many members the role has. Members holds them all, except in an
	// answer to a status query for one page of members (StatusPage).
	MemberCount int `json:"memberCount"`
	// States counts the role's members by state: all of them, even in a page that lists
	// none, so that progress needs no member lists.
	States  map[MemberState]int `json:"states"`
	Members []MemberStatus      `json:"members"`
	// Paused says why automatic replacement is paused for the role (the meltdown guard);
	// Resumed marks an operator's resume, which holds until the role recovers.
	Paused  string `json:"paused,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
	// Placement is the role's placement rule from the desired spec, when it has one.
	Placement spec.Placement `json:"placement,omitzero"`
}

// StatusPage asks the status query for some members only: those from From (counting
// across roles, in order) up to Limit of them. A status query without it answers every
// member, which for thousands of members exceeds what Temporal lets a query return.
type StatusPage struct {
	From  int `json:"from"`
	Limit int `json:"limit"`
}

// MemberStatus is one member's state.
type MemberStatus struct {
	Name    string      `json:"name"`
	Role    string      `json:"role"`
	Ordinal int         `json:"ordinal"`
	State   MemberState `json:"state"`
	Detail  string      `json:"detail,omitempty"`
	// Host holds the member; empty in single-host mode.
	Host string `json:"host,omitempty"`
	// Event is the startscript event running now, or the last one run.
	Event spec.Event `json:"event,omitempty"`
	// Since is when the member entered its state; for a running script, when it started.
	Since time.Time `json:"since"`
	// LastLine is a running script's latest line of output. It travels in the script
	// activity's heartbeats, which the workflow never sees: the starter adds it.
	LastLine   string `json:"lastLine,omitempty"`
	StdoutTail string `json:"stdoutTail,omitempty"`
	StderrTail string `json:"stderrTail,omitempty"`
	// Leaving marks a member a change stopped while it was being set up: it is removed next.
	Leaving bool `json:"leaving,omitempty"`
	// Decommission is how the member's decommission went (done, failed), once one ran: a
	// member whose decommission failed stays, and its removal waits for a retry.
	Decommission string `json:"decommission,omitempty"`
	// Ports are the member's ports by name, when its role names any.
	Ports map[string]int `json:"ports,omitempty"`
	// Health is the member's health record, once anything was reported about it.
	Health *MemberHealth `json:"health,omitempty"`
	// Replaces and ReplacedBy link a replaced member and its successor. Replacements counts
	// the replacements of failed setups in this member's slot, for maxReplacements.
	Replaces     string `json:"replaces,omitempty"`
	ReplacedBy   string `json:"replacedBy,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
	// Revision is the revision whose settings the member runs.
	Revision int `json:"revision,omitempty"`
}
