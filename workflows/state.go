package workflows

import (
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// ClusterState is the cluster workflow's observed state: what it carries across
// continue-as-new, bookkeeping included. Users see its projection, ClusterStatus.
type ClusterState struct {
	Name string `json:"name"`
	// FailedTeardowns are the latest failed teardowns (at most keptFailedTeardowns).
	FailedTeardowns []FailedTeardown `json:"failedTeardowns,omitempty"`
	// Home sets the cluster's folders on hosts apart from others of its name (see
	// change.SandboxHomes); empty for a cluster deployed before homes.
	Home string `json:"home,omitempty"`
	// FolderKey is the secret the cluster's folders on hosts are marked with (see
	// change.FolderKeys): an export carries it, so that the importing namespace may take them
	// over, and no other namespace may.
	FolderKey string `json:"folderKey,omitempty"`
	Phase     Phase  `json:"phase"`
	Message   string `json:"message,omitempty"`
	Origin    string `json:"origin,omitempty"`
	// Levels is the dependency plan: the roles set up together, level by level.
	Levels    [][]string       `json:"levels"`
	Roles     []plan.RoleState `json:"roles"`
	CreatedAt time.Time        `json:"createdAt"`
	UpdatedAt time.Time        `json:"updatedAt"`
	// Operations counts the operations started, to give each role child a unique ID.
	Operations int `json:"operations"`
	// Generation is the desired state's generation: 1 at deploy, one more for every
	// accepted change. AttemptedGeneration is the latest one an operation worked toward,
	// and ReachedGeneration the latest one an operation fully reached.
	Generation          int `json:"generation"`
	AttemptedGeneration int `json:"attemptedGeneration"`
	ReachedGeneration   int `json:"reachedGeneration"`
	// SpecGeneration is the generation the desired spec last changed in (a deploy, apply,
	// resize or undo; not a replacement), which its signature names.
	SpecGeneration int `json:"specGeneration,omitempty"`
	// ConfigMetaVersion counts the configmeta files written, for Member.ListedIn.
	ConfigMetaVersion int `json:"configMetaVersion"`
	// OnHosts says the cluster places members on hosts; Hosts is the registry's latest
	// view of them.
	OnHosts bool   `json:"onHosts,omitempty"`
	Hosts   []Host `json:"hosts,omitempty"`
	// Restarted lists hosts that restarted, whose members the next pass starts.
	Restarted []string `json:"restarted,omitempty"`
	// Maintenance is set while the fleet's maintenance holds the cluster; Held names the
	// operation it stopped, which runs again once maintenance ends.
	Maintenance *Maintenance `json:"maintenance,omitempty"`
	Held        string       `json:"held,omitempty"`
	// HeldHosts is the registry's latest view of the hosts while maintenance holds it back.
	HeldHosts []Host `json:"heldHosts,omitempty"`
	// ExportedIn is the Since of the maintenance during which the cluster was exported;
	// only then may it be retired.
	ExportedIn time.Time `json:"exportedIn,omitzero"`
	// Signatures is who signed the spec of recent generations, newest first (at most
	// keptSignatures), once any spec was signed.
	Signatures []GenerationSignature `json:"signatures,omitempty"`
	// Notices counts the notices of membership changes written, to number them.
	Notices int `json:"notices,omitempty"`
	// KeptNotices are the notices some member was not told (Member.Untold), for a retry to
	// tell them again; the latest keptUntoldNotices of them.
	KeptNotices []notice.Notice `json:"keptNotices,omitempty"`
	// Installed maps a host ("" in single-host mode) to the digest of the scripts and envs
	// written there, so that they travel to a host once, not with every files write.
	Installed map[string]string `json:"installed,omitempty"`
	// Stale are what members set up elsewhere since left on hosts that were lost:
	// removed (never torn down, which would undo the member where it lives now) once the
	// host is back.
	Stale []StaleMember `json:"stale,omitempty"`
	// Revision is the revision of what the members run (rollout.go): 1 at deploy, one more
	// for every apply that changes a role's settings; 0 in runs from before revisions.
	Revision  int              `json:"revision,omitempty"`
	Revisions []RevisionRecord `json:"revisions,omitempty"`
	// RevisionScripts holds the scripts of kept revisions the desired spec no longer has.
	RevisionScripts map[string]string `json:"revisionScripts,omitempty"`
	// Rollout is the latest rollout, running, paused or done.
	Rollout *RolloutRecord `json:"rollout,omitempty"`
	// Actions are the latest actions asked for (at most keptActions), oldest first.
	Actions []ActionStatus `json:"actions,omitempty"`
}

// StaleMember is what is left of a member on a host it no longer lives on.
type StaleMember struct {
	Role   string `json:"role"`
	Member string `json:"member"`
	Host   string `json:"host"`
}

// ShownPhase is the phase operators see: maintenance while it holds the cluster, unless
// the cluster is being deleted, which maintenance does not hold.
func (s *ClusterState) ShownPhase() Phase {
	if s.Maintenance != nil && s.Phase != PhaseDeleting && s.Phase != PhaseDeleted {
		return PhaseMaintenance
	}
	return s.Phase
}

// MaintenanceDetail says what maintenance holds, for the status message and the details.
func (s *ClusterState) MaintenanceDetail() string {
	text := s.Maintenance.Describe() + "; cluster " + string(s.Phase)
	if s.Message != "" {
		text += ": " + s.Message
	}
	if s.Held != "" || s.Generation > s.AttemptedGeneration {
		text += fmt.Sprintf("; the operation toward generation %d is held and resumes when maintenance ends", s.Generation)
	}
	return text
}

// Role returns the named role's status.
func (s *ClusterState) Role(name string) *plan.RoleState {
	return plan.Named(s.Roles, name, func(r *plan.RoleState) string { return r.Name })
}

// FindMember locates a member by name in any role.
func (s *ClusterState) FindMember(name string) (*plan.RoleState, *plan.Member) {
	for i := range s.Roles {
		if m := s.Roles[i].Member(name); m != nil {
			return &s.Roles[i], m
		}
	}
	return nil, nil
}
