package workflows

import (
	"time"

	"github.com/clusterflow/clusterflow/internal/spec"
)

// Phase is where a cluster is in its life.
type Phase string

const (
	PhaseDeploying Phase = "deploying"
	PhaseReady     Phase = "ready"
	PhaseFailed    Phase = "failed"
	PhaseDeleting  Phase = "deleting"
	PhaseDeleted   Phase = "deleted"
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
)

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
}

// RoleStatus is one role's desired size and its members.
type RoleStatus struct {
	Name      string   `json:"name"`
	Level     int      `json:"level"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Desired   int      `json:"desired"`
	Ready     int      `json:"ready"`
	Members   []Member `json:"members"`
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

// CountReady counts members in the ready state.
func CountReady(members []Member) int {
	n := 0
	for _, m := range members {
		if m.State == MemberReady {
			n++
		}
	}
	return n
}

// Stable reports whether the phase is one that lasts until someone acts.
func (p Phase) Stable() bool { return p == PhaseReady || p == PhaseFailed || p == PhaseDeleted }
