package workflows

import (
	"fmt"
	"time"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Rollouts: an apply that changes what a role's members run (its startscript, env,
// events, timeouts or health settings) makes a new revision, and the members of the roles
// it changed move to it by their role's update policy.
const (
	// RolloutPauseUpdate stops a rollout before its next batch; RolloutResumeUpdate goes on
	// with it; RolloutUndoUpdate makes a new revision equal to an earlier one. Each returns
	// the RolloutStatus once accepted.
	RolloutPauseUpdate  = "rollout-pause"
	RolloutResumeUpdate = "rollout-resume"
	RolloutUndoUpdate   = "rollout-undo"
	// RestartUpdate starts a rolling restart (RestartRequest): the restart event on each
	// chosen member, by its role's update policy and health gate. It returns the
	// RolloutStatus once accepted.
	RestartUpdate = "restart"

	// PhaseRollingOut is a rollout moving members to a new revision; PhaseRolloutPaused is
	// one stopped by an operator or by its health gate, its members not yet moved still
	// on the revision they ran.
	PhaseRollingOut    Phase = "rolling-out"
	PhaseRolloutPaused Phase = "rollout-paused"
)

// UndoRequest asks for a new revision equal to an earlier one: ToRevision, or the one
// before the current revision when 0.
type UndoRequest struct {
	ToRevision int    `json:"toRevision,omitempty"`
	By         string `json:"by,omitempty"`
}

// RestartRequest chooses the members a rolling restart restarts: those named, or every
// member of Role, or, with neither, every member of every role that lists restart.
type RestartRequest struct {
	Role    string   `json:"role,omitempty"`
	Members []string `json:"members,omitempty"`
}

// Revision is one revision of the cluster, as `clusterflow revisions` lists it.
type Revision struct {
	Number int       `json:"number"`
	At     time.Time `json:"at"`
	// By is the client identity that applied it.
	By string `json:"by,omitempty"`
	// Change says what changed, e.g. "worker: startscript, env".
	Change string `json:"change"`
	// Digest is a digest of every role's settings at this revision.
	Digest string `json:"digest"`
	// Kept says its settings are kept, so that `rollout undo --to-revision` can go back to it.
	Kept bool `json:"kept"`
}

// RolloutStatus is the latest rollout's progress.
type RolloutStatus struct {
	Revision int `json:"revision"`
	// Restart says this is a rolling restart (clusterflow restart), not a new revision.
	Restart bool `json:"restart,omitempty"`
	// State is running, paused or done.
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Paused says why the rollout is paused, since PausedAt, and Member names the member it
	// is about.
	Paused   string              `json:"paused,omitempty"`
	PausedAt time.Time           `json:"pausedAt,omitzero"`
	Member   string              `json:"member,omitempty"`
	Roles    []RolloutRoleStatus `json:"roles,omitempty"`
}

// RolloutRoleStatus is one role's share of a rollout.
type RolloutRoleStatus struct {
	Role string `json:"role"`
	// Revision is the revision the role's settings last changed at.
	Revision int                 `json:"revision"`
	Strategy spec.UpdateStrategy `json:"strategy"`
	Policy   string              `json:"policy"`
	// Updated run the role's current settings; InWatch were just updated and are watched;
	// Waiting are still to go; Failed failed their update (named, the first ReportNames).
	Updated int      `json:"updated"`
	InWatch []string `json:"inWatch,omitempty"`
	Waiting int      `json:"waiting"`
	Failed  []string `json:"failed,omitempty"`
}

// The rollout's states, as RolloutStatus.State has them.
const (
	RolloutRunning = "running"
	RolloutPaused  = "paused"
	RolloutDone    = "done"
)

// PreviewQuery answers what an apply (Spec) or a resize (Counts) would do, changing
// nothing: `apply --dry-run` and `resize --dry-run` print it. (Named, as ManifestQuery is,
// to sort after status, which the Web UI's Queries tab offers first.)
const PreviewQuery = "what-if"

// PreviewRequest is the change to preview: a spec to apply, or counts to resize to.
type PreviewRequest struct {
	Spec   *spec.Cluster `json:"spec,omitempty"`
	Counts []RoleCount   `json:"counts,omitempty"`
	// Remove names the members a resize takes away (ResizeRequest.Remove).
	Remove []string `json:"remove,omitempty"`
}

// Preview is what a change would do.
type Preview struct {
	// Refused says why the change would be refused; nothing else is set then.
	Refused string `json:"refused,omitempty"`
	// Summary is the change as an accepted one would say it; empty: no change.
	Summary string `json:"summary,omitempty"`
	// Generation is the generation it would make, and Revision the revision (0: none,
	// what members run does not change).
	Generation int           `json:"generation,omitempty"`
	Revision   int           `json:"revision,omitempty"`
	Roles      []RolePreview `json:"roles,omitempty"`
}

// RolePreview is what a change would do to one role, in the order it would be done.
type RolePreview struct {
	Role string `json:"role"`
	// Remove are torn down (teardown, then delnodes to the others); Add are set up
	// (configure, then addnodes to the others), at most ReportNames of each named.
	Remove     []string `json:"remove,omitempty"`
	MoreRemove int      `json:"moreRemove,omitempty"`
	Add        []string `json:"add,omitempty"`
	MoreAdd    int      `json:"moreAdd,omitempty"`
	// Told counts the members that would hear addnodes or delnodes about this role.
	Told int `json:"told,omitempty"`
	// Rollout is how the role's members would move to the new revision.
	Rollout *RolloutPreview `json:"rollout,omitempty"`
}

// RolloutPreview is a role's rollout as planned: its batches in order, canaries first.
type RolloutPreview struct {
	Strategy spec.UpdateStrategy `json:"strategy"`
	Policy   string              `json:"policy"`
	// Changed says what changes, e.g. "env, startscript".
	Changed string  `json:"changed"`
	Batches []Batch `json:"batches"`
	// MoreBatches counts the batches past the first ReportNames.
	MoreBatches int `json:"moreBatches,omitempty"`
}

// Batch is one batch of a rollout.
type Batch struct {
	Canary  bool     `json:"canary,omitempty"`
	Members []string `json:"members"`
}

// RolloutRecord is the latest rollout, as the workflow keeps it: of a revision, or a rolling
// restart (Restart), which runs restart on the members marked RestartDue by the same
// policy and gate.
type RolloutRecord struct {
	Revision int       `json:"revision"`
	Restart  bool      `json:"restart,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	// Paused says why the rollout is paused, since PausedAt; Member names the member it is
	// about.
	Paused   string    `json:"paused,omitempty"`
	PausedAt time.Time `json:"pausedAt,omitzero"`
	Member   string    `json:"member,omitempty"`
	// Failed are members whose update failed: a resume tries them again.
	Failed []string `json:"failed,omitempty"`
	// Watching are the members of the batch being watched, and Tripped why the health gate
	// closed on one of them.
	Watching  []string `json:"watching,omitempty"`
	Tripped   string   `json:"tripped,omitempty"`
	TrippedBy string   `json:"trippedBy,omitempty"`
	// Moved counts, by role, the members this rollout updated: canaries go first until
	// that many have.
	Moved map[string]int `json:"moved,omitempty"`
	// Replacing are the members of a batch of ReplacingRole being replaced (the replace
	// strategy): the passes that set up their successors run between the rollout's
	// batches, and the rollout watches the successors once they are.
	Replacing     []string `json:"replacing,omitempty"`
	ReplacingRole string   `json:"replacingRole,omitempty"`
}

// What names the rollout in messages.
func (ro *RolloutRecord) What() string {
	if ro.Restart {
		return "rolling restart"
	}
	return fmt.Sprintf("rollout of revision %d", ro.Revision)
}

// Due are the members of a role the rollout has yet to update (or restart), those whose
// update failed among them.
func (ro *RolloutRecord) Due(rs plan.RoleState) []Member {
	if ro.Restart {
		return plan.RestartDue(rs)
	}
	return plan.Outdated(rs, ro.Failed)
}

// RevisionRecord is a revision, with the settings of its roles while they are kept.
type RevisionRecord struct {
	Revision
	Roles []spec.Role `json:"roles,omitempty"`
}
