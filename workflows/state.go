package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/notice"
	"github.com/clusterflow/clusterflow/spec"
)

// Member is one member's observed state, as the cluster workflow keeps it and hands it to
// role children. Users see its projection, MemberStatus.
type Member struct {
	Name    string      `json:"name"`
	Role    string      `json:"role,omitempty"`
	Ordinal int         `json:"ordinal,omitempty"`
	State   MemberState `json:"state"`
	// Host holds the member; empty in single-host mode, where members use the shared
	// task queue. Unplaced says why a pending member has no host yet.
	Host     string `json:"host,omitempty"`
	Unplaced string `json:"unplaced,omitempty"`
	Detail   string `json:"detail,omitempty"`
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
	// Moved marks a member being set up that was placed afresh (its host was lost): what the
	// operation it was in reports of it is ignored, until another sets it up.
	Moved bool `json:"moved,omitempty"`
	// Health is the member's health record, once anything was reported about it.
	Health *MemberHealth `json:"health,omitempty"`
	// Replaces and ReplacedBy link a replaced member and its successor. Replacements counts
	// the replacements of failed setups in this member's slot, for maxReplacements.
	Replaces     string `json:"replaces,omitempty"`
	ReplacedBy   string `json:"replacedBy,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

// outcome is what a role child reports of a member: what its operation did to it. The
// cluster keeps the rest (its role, ordinal and host, who knows whom, health,
// replacements), so leaving it out keeps a wide role's reports and results small: they
// make most of a cluster's history.
func (m Member) outcome() Member {
	return Member{
		Name: m.Name, State: m.State, Detail: m.Detail, Event: m.Event, Since: m.Since,
		LastLine: m.LastLine, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail,
	}
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
	return notice.Knows(m.knowledge(), other.class())
}

// knowledge is what decides which members m knows.
func (m Member) knowledge() notice.Knowledge {
	return notice.Knowledge{ListedIn: m.ListedIn, KnowsUpTo: m.KnowsUpTo}
}

// class is what decides which members know m.
func (m Member) class() notice.Class {
	return notice.Class{ListedIn: m.ListedIn, UnlistedFrom: m.UnlistedFrom, Announced: m.Announced}
}

// forChild is what a role child needs of a member: no health history, replacement links
// or output, so that a batch's input stays small however long the member has lived.
func (m Member) forChild() Member {
	out := Member{
		Name: m.Name, Role: m.Role, Ordinal: m.Ordinal, State: m.State, Host: m.Host, Event: m.Event, Since: m.Since,
		ListedIn: m.ListedIn, KnowsUpTo: m.KnowsUpTo,
	}
	if m.Health != nil {
		out.Health = &MemberHealth{LastReport: m.Health.LastReport} // hasSetup reads it
	}
	return out
}

// roleState is one role's desired size and its members, as the workflow keeps them.
type roleState struct {
	Name      string   `json:"name"`
	Level     int      `json:"level"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Desired   int      `json:"desired"`
	Members   []Member `json:"members"`
	// Paused says why automatic replacement is paused for the role (the meltdown guard);
	// Resumed marks an operator's resume, which holds until the role recovers.
	Paused  string `json:"paused,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
}

// clusterState is the cluster workflow's observed state: what it carries across
// continue-as-new, bookkeeping included. Users see its projection, ClusterStatus.
type clusterState struct {
	Name string `json:"name"`
	// Home sets the cluster's folders on hosts apart from others of its name (see
	// changeSandboxHomes); empty for a cluster deployed before homes.
	Home    string `json:"home,omitempty"`
	Phase   Phase  `json:"phase"`
	Message string `json:"message,omitempty"`
	Origin  string `json:"origin,omitempty"`
	// Levels is the dependency plan: the roles set up together, level by level.
	Levels    [][]string  `json:"levels"`
	Roles     []roleState `json:"roles"`
	CreatedAt time.Time   `json:"createdAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
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
	// Installed maps a host ("" in single-host mode) to the digest of the scripts and envs
	// written there, so that they travel to a host once, not with every files write.
	Installed map[string]string `json:"installed,omitempty"`
	// Stale are sandboxes of members set up elsewhere since, left on hosts that were lost:
	// removed (never torn down, which would undo the member where it lives now) once the
	// host is back.
	Stale []StaleSandbox `json:"stale,omitempty"`
}

// StaleSandbox is a member's sandbox on a host it no longer lives on.
type StaleSandbox struct {
	Role   string `json:"role"`
	Member string `json:"member"`
	Host   string `json:"host"`
}

// shownPhase is the phase operators see: maintenance while it holds the cluster, unless
// the cluster is being deleted, which maintenance does not hold.
func (s *clusterState) shownPhase() Phase {
	if s.Maintenance != nil && s.Phase != PhaseDeleting && s.Phase != PhaseDeleted {
		return PhaseMaintenance
	}
	return s.Phase
}

// maintenanceDetail says what maintenance holds, for the status message and the details.
func (s *clusterState) maintenanceDetail() string {
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
func (s *clusterState) Role(name string) *roleState {
	return named(s.Roles, name, func(r *roleState) string { return r.Name })
}

// Member returns the named member of the role. Members are kept in ordinal order and a
// name ends in its ordinal, so a binary search finds it: lookups in loops over a role of
// thousands would otherwise be quadratic and stall the workflow task.
func (r *roleState) Member(name string) *Member {
	if cut := strings.LastIndexByte(name, '-'); cut >= 0 {
		if ordinal, err := strconv.Atoi(name[cut+1:]); err == nil {
			i, found := slices.BinarySearchFunc(r.Members, ordinal, func(m Member, o int) int { return cmp.Compare(m.Ordinal, o) })
			if found && r.Members[i].Name == name {
				return &r.Members[i]
			}
		}
	}
	return named(r.Members, name, func(m *Member) string { return m.Name })
}

// named finds the item called name, for the lookups by name of roles and members.
func named[T any](items []T, name string, nameOf func(*T) string) *T {
	for i := range items {
		if nameOf(&items[i]) == name {
			return &items[i]
		}
	}
	return nil
}
