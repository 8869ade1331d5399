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

// Member is one member's observed state.
type Member struct {
	Name    string      `json:"name"`
	Role    string      `json:"role"`
	Ordinal int         `json:"ordinal"`
	State   MemberState `json:"state"`
	Detail  string      `json:"detail,omitempty"`
	// Event is the startscript event running now, or the last one run.
	Event spec.Event `json:"event,omitempty"`
	// Since is when the member entered its state, which for a running script is when the
	// script started.
	Since time.Time `json:"since"`
	// LastLine is a running script's latest line of output. The workflow never sees it
	// (it travels in the script activity's heartbeats), so the status query leaves it
	// empty and starter.Status fills it in.
	LastLine   string `json:"lastLine,omitempty"`
	StdoutTail string `json:"stdoutTail,omitempty"`
	StderrTail string `json:"stderrTail,omitempty"`
	// Leaving marks a member a change stopped while it was being set up: it is removed
	// next, even if a later change asks for more members again (they get new ordinals).
	Leaving bool `json:"leaving,omitempty"`
	// Who knows whom: ListedIn is the first configmeta version listing the member,
	// KnowsUpTo the version the member configured with (it knows every member listed up
	// to it), and Announced says every member has been told of it by addnodes.
	ListedIn  int  `json:"listedIn,omitempty"`
	KnowsUpTo int  `json:"knowsUpTo,omitempty"`
	Announced bool `json:"announced,omitempty"`
	// UnlistedFrom is the first configmeta version that leaves out a member being replaced.
	UnlistedFrom int `json:"unlistedFrom,omitempty"`
	// Health is the member's health record, once anything was reported about it.
	Health *MemberHealth `json:"health,omitempty"`
	// Replaces and ReplacedBy link a replaced member and its successor. Replacements counts
	// the replacements of failed setups in this member's slot, for maxReplacements.
	Replaces     string `json:"replaces,omitempty"`
	ReplacedBy   string `json:"replacedBy,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

// hasSetup reports whether the member's configure ran, so that a teardown has something to
// undo. A member reported gone has nothing left to run a script in.
func (m Member) hasSetup() bool {
	switch m.State {
	case MemberReady, MemberDown, MemberFlapping, MemberRogue:
		return true
	case MemberReplacing:
		return m.Health == nil || m.Health.LastReport != HealthGone
	case MemberConfigError:
		return m.Event == spec.EventConfigure
	}
	return false
}

// knows reports whether the member has learnt of other, from configmeta or addnodes.
func (m Member) knows(other Member) bool {
	if other.UnlistedFrom > 0 && m.ListedIn >= other.UnlistedFrom {
		return false // m joined after other left configmeta, and no one announces a leaver
	}
	return other.Announced || (other.ListedIn > 0 && m.KnowsUpTo >= other.ListedIn)
}

// RoleStatus is one role's desired size and its members.
type RoleStatus struct {
	Name      string   `json:"name"`
	Level     int      `json:"level"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Desired   int      `json:"desired"`
	Ready     int      `json:"ready"`
	Members   []Member `json:"members"`
	// Paused says why automatic replacement is paused for the role (the meltdown guard);
	// Resumed marks an operator's resume, which holds until the role recovers.
	Paused  string `json:"paused,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
}

// ClusterStatus is the answer to the status query, and what `clusterflow status -o json`
// prints. It is also the state the cluster workflow carries.
type ClusterStatus struct {
	Name    string `json:"name"`
	Phase   Phase  `json:"phase"`
	Message string `json:"message,omitempty"`
	Origin  string `json:"origin,omitempty"`
	// Levels is the dependency plan: the roles set up together, level by level.
	Levels    [][]string   `json:"levels"`
	Roles     []RoleStatus `json:"roles"`
	CreatedAt time.Time    `json:"createdAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
	// Operations counts the operations started, to give each role child a unique ID.
	Operations int `json:"operations"`
	// Generation is the desired state's generation: 1 at deploy, one more for every
	// accepted change. AttemptedGeneration is the latest one an operation worked toward,
	// and ReachedGeneration the latest one an operation fully reached.
	Generation          int `json:"generation"`
	AttemptedGeneration int `json:"attemptedGeneration"`
	ReachedGeneration   int `json:"reachedGeneration"`
	// ConfigMetaVersion counts the configmeta files written, for Member.ListedIn.
	ConfigMetaVersion int `json:"configMetaVersion"`
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
func (r *RoleStatus) Member(name string) *Member {
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
