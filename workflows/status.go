package workflows

import (
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/internal/spec"
)

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

// MemberState is where a member is in its life.
type MemberState string

const (
	MemberPending     MemberState = "pending"
	MemberCreating    MemberState = "creating"
	MemberConfiguring MemberState = "configuring"
	MemberReady       MemberState = "ready"
	MemberConfigError MemberState = "config_error"
	MemberDeleting    MemberState = "deleting"
	MemberDeleted     MemberState = "deleted"

	// Health states, entered through the member health state machine (health.go).
	MemberDown      MemberState = "down"
	MemberFlapping  MemberState = "flapping"
	MemberReplacing MemberState = "replacing"
	// MemberRogue is a member the backend has but the cluster did not know: it is removed.
	MemberRogue MemberState = "rogue"
)

// unavailableStates count against a role's maxUnavailable.
var unavailableStates = []MemberState{MemberDown, MemberFlapping, MemberReplacing}

func (s MemberState) unavailable() bool { return slices.Contains(unavailableStates, s) }

// StatusAPIVersion names the shape of ClusterStatus. It changes only with a change users
// must adapt their scripts to; testdata/status.golden.json pins the shape, and the README
// documents it field by field.
const StatusAPIVersion = "clusterflow/v1"

// ClusterStatus is the answer to the status query, and what `clusterflow status -o json`
// prints: a projection of the workflow's state without its bookkeeping.
type ClusterStatus struct {
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Phase      Phase  `json:"phase"`
	Message    string `json:"message,omitempty"`
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
}

// RoleStatus is one role's desired size and its members.
type RoleStatus struct {
	Name      string         `json:"name"`
	Level     int            `json:"level"`
	DependsOn []string       `json:"dependsOn,omitempty"`
	Desired   int            `json:"desired"`
	Ready     int            `json:"ready"`
	Members   []MemberStatus `json:"members"`
	// Paused says why automatic replacement is paused for the role (the meltdown guard);
	// Resumed marks an operator's resume, which holds until the role recovers.
	Paused  string `json:"paused,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
}

// MemberStatus is one member's state.
type MemberStatus struct {
	Name    string      `json:"name"`
	Role    string      `json:"role"`
	Ordinal int         `json:"ordinal"`
	State   MemberState `json:"state"`
	Detail  string      `json:"detail,omitempty"`
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
	// Health is the member's health record, once anything was reported about it.
	Health *MemberHealth `json:"health,omitempty"`
	// Replaces and ReplacedBy link a replaced member and its successor. Replacements counts
	// the replacements of failed setups in this member's slot, for maxReplacements.
	Replaces     string `json:"replaces,omitempty"`
	ReplacedBy   string `json:"replacedBy,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

// status projects the workflow's state into what users see.
func (s clusterState) status() ClusterStatus {
	out := ClusterStatus{
		APIVersion: StatusAPIVersion, Name: s.Name, Phase: s.Phase, Message: s.Message, Origin: s.Origin,
		Levels: s.Levels, Roles: make([]RoleStatus, len(s.Roles)), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Generation: s.Generation, AttemptedGeneration: s.AttemptedGeneration, ReachedGeneration: s.ReachedGeneration,
	}
	for i, r := range s.Roles {
		role := RoleStatus{
			Name: r.Name, Level: r.Level, DependsOn: r.DependsOn, Desired: r.Desired, Ready: CountReady(r.Members),
			Members: make([]MemberStatus, len(r.Members)), Paused: r.Paused, Resumed: r.Resumed,
		}
		for j, m := range r.Members {
			role.Members[j] = MemberStatus{
				Name: m.Name, Role: m.Role, Ordinal: m.Ordinal, State: m.State, Detail: m.Detail, Event: m.Event, Since: m.Since,
				LastLine: m.LastLine, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail, Leaving: m.Leaving, Health: m.Health,
				Replaces: m.Replaces, ReplacedBy: m.ReplacedBy, Replacements: m.Replacements,
			}
		}
		out.Roles[i] = role
	}
	return out
}

// Role returns the named role's status.
func (s *ClusterStatus) Role(name string) *RoleStatus {
	for i := range s.Roles {
		if s.Roles[i].Name == name {
			return &s.Roles[i]
		}
	}
	return nil
}

// Member returns the named member of the role.
func (r *RoleStatus) Member(name string) *MemberStatus {
	for i := range r.Members {
		if r.Members[i].Name == name {
			return &r.Members[i]
		}
	}
	return nil
}

// CountReady counts members in the ready state.
func CountReady(members []Member) int {
	return countState(members, MemberReady)
}

// Stable reports whether the phase is one that lasts until someone acts.
func (p Phase) Stable() bool {
	switch p {
	case PhaseReady, PhaseDegraded, PhasePaused, PhaseFailed, PhaseCanceled, PhaseDeleted, PhaseTerminated:
		return true
	}
	return false
}

// Settled reports whether the cluster is stable and done with generation g, however that
// ended: reached, failed or canceled.
func (s ClusterStatus) Settled(g int) bool {
	return s.Phase.Stable() && (s.AttemptedGeneration >= g || s.Phase == PhaseDeleted || s.Phase == PhaseTerminated)
}
