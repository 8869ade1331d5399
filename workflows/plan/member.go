package plan

import (
	"cmp"
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
	// Revision is the cluster revision whose settings the member runs; 0 for members set
	// up before revisions, which run revision 1.
	Revision int `json:"revision,omitempty"`
	// RestartDue marks a member a rolling restart has yet to restart.
	RestartDue bool `json:"restartDue,omitempty"`
	// Joining marks a member added to a role that already had members set up (a grow or
	// a replacement): its configure is told so, to join the app's running cluster rather
	// than start a new one.
	Joining bool `json:"joining,omitempty"`
	// Bootstrap marks the member that forms the app's cluster: added while no member of its
	// role was set up, the first such (or the replacement of that one). Its configure is
	// told so; the others of the role's first setup join it (change.Bootstrap).
	Bootstrap bool `json:"bootstrap,omitempty"`
	// RemovedFor, on a member handed to a teardown, says why it leaves (see
	// backend.ScriptRun.Reason); the cluster's own state never keeps it.
	RemovedFor string `json:"removedFor,omitempty"`
	// Decommission is how the member's decommission went, once it ran: done (its teardown
	// may follow) or failed (it stays until a retry runs it again).
	Decommission string `json:"decommission,omitempty"`
	// Untold are the notices (by ID, oldest first) of the addnodes or delnodes the member
	// failed, and of those that came while it was in config_error since: a retry tells it
	// them again, in order.
	Untold []int `json:"untold,omitempty"`
	// RemovingTold marks a leaving member the survivors subscribed to removing were told of
	// (see spec.EventRemoving): they are told once.
	RemovingTold bool `json:"removingTold,omitempty"`
	// Ports are the member's ports by name, given before its configure and kept for its
	// life (see spec.Role.Ports).
	Ports map[string]int `json:"ports,omitempty"`
}

// The outcomes of a decommission.
const (
	DecommissionDone   = "done"
	DecommissionFailed = "failed"
)

// Outcome is what a role child reports of a member: what its operation did to it. The
// cluster keeps the rest (its role, ordinal and host, who knows whom, health,
// replacements), so leaving it out keeps a wide role's reports and results small: they
// make most of a cluster's history.
func (m Member) Outcome() Member {
	return Member{
		Name: m.Name, State: m.State, Detail: m.Detail, Event: m.Event, Since: m.Since,
		LastLine: m.LastLine, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail, Revision: m.Revision,
		Decommission: m.Decommission,
	}
}

// HasSetup reports whether the member's configure ran, so that a teardown has something to
// undo. A member reported gone has nothing left to run a script in.
func (m Member) HasSetup() bool {
	switch m.State {
	case MemberReady, MemberDown, MemberFlapping, MemberRogue:
		return true
	case MemberReplacing:
		return m.Health == nil || m.Health.LastReport != HealthGone
	case MemberConfigError:
		// A failed update or restart leaves a member that was set up.
		return m.Event == spec.EventConfigure || m.Event == spec.EventUpgrade || m.Event == spec.EventRestart
	}
	return false
}

// ConfigureRan reports whether the member's configure ran, to its end or not, so that a
// delete or removal tears it down: HasSetup as it is now, which also counts a member
// whose configure failed or was cancelled, and one whose later script (addnodes, delnodes,
// start, an action) failed. Only a member whose sandbox was never made, or that is gone,
// has nothing to tear down.
func (m Member) ConfigureRan() bool {
	if m.State == MemberConfigError {
		return m.Event != ""
	}
	return m.HasSetup()
}

// knows reports whether the member has learnt of other, from configmeta or addnodes.
func (m Member) knows(other Member) bool {
	return notice.Knows(m.Knowledge(), other.class())
}

// Knowledge is what decides which members m knows.
func (m Member) Knowledge() notice.Knowledge {
	return notice.Knowledge{ListedIn: m.ListedIn, KnowsUpTo: m.KnowsUpTo}
}

// class is what decides which members know m.
func (m Member) class() notice.Class {
	return notice.Class{ListedIn: m.ListedIn, UnlistedFrom: m.UnlistedFrom, Announced: m.Announced}
}

// ForChild is what a role child needs of a member: no health history, replacement links
// or output, so that a batch's input stays small however long the member has lived.
func (m Member) ForChild() Member {
	out := Member{
		Name: m.Name, Role: m.Role, Ordinal: m.Ordinal, State: m.State, Host: m.Host, Event: m.Event, Since: m.Since,
		ListedIn: m.ListedIn, KnowsUpTo: m.KnowsUpTo, Revision: m.Revision,
		Joining: m.Joining, Bootstrap: m.Bootstrap, RemovedFor: m.RemovedFor, Ports: m.Ports,
	}
	if m.State == MemberPending {
		out.Replaces = m.Replaces // its configure is told whom it replaces
	}
	if m.Health != nil {
		out.Health = &MemberHealth{LastReport: m.Health.LastReport} // hasSetup reads it
	}
	return out
}

// RoleState is one role's desired size and its members, as the workflow keeps them.
type RoleState struct {
	Name      string   `json:"name"`
	Level     int      `json:"level"`
	DependsOn []string `json:"dependsOn,omitempty"`
	Desired   int      `json:"desired"`
	Members   []Member `json:"members"`
	// NextOrdinal is the lowest ordinal no member of the role has had: a new member never
	// takes a removed member's name, which apps such as etcd and Redis remember. 0 for
	// runs from before it was kept (change.Lifecycle), which counted from the last member.
	NextOrdinal int `json:"nextOrdinal,omitempty"`
	// Paused says why automatic replacement is paused for the role (the meltdown guard);
	// Resumed marks an operator's resume, which holds until the role recovers.
	Paused  string `json:"paused,omitempty"`
	Resumed bool   `json:"resumed,omitempty"`
	// Revisions are the revisions at which the role's settings changed, oldest first (at
	// most keptRoleRevisions); none before the cluster's first revision was recorded.
	Revisions []RoleRevision `json:"revisions,omitempty"`
}

// Member returns the named member of the role. Members are kept in ordinal order and a
// name ends in its ordinal, so a binary search finds it: lookups in loops over a role of
// thousands would otherwise be quadratic and stall the workflow task.
func (r *RoleState) Member(name string) *Member {
	if cut := strings.LastIndexByte(name, '-'); cut >= 0 {
		if ordinal, err := strconv.Atoi(name[cut+1:]); err == nil {
			i, found := slices.BinarySearchFunc(r.Members, ordinal, func(m Member, o int) int { return cmp.Compare(m.Ordinal, o) })
			if found && r.Members[i].Name == name {
				return &r.Members[i]
			}
		}
	}
	return Named(r.Members, name, func(m *Member) string { return m.Name })
}

// Named finds the item called name, for the lookups by name of roles and members.
func Named[T any](items []T, name string, nameOf func(*T) string) *T {
	for i := range items {
		if nameOf(&items[i]) == name {
			return &items[i]
		}
	}
	return nil
}

// NodeGroup names members of one role.
type NodeGroup struct {
	Role  string   `json:"role"`
	Nodes []string `json:"nodes"`
}

// NoticeRef names a notice of a membership change, and the role whose nodes it tells of.
type NoticeRef struct {
	ID   int    `json:"id"`
	Role string `json:"role"`
}

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

	// Health states, entered through the member health state machine (health_table.go).
	MemberDown      MemberState = "down"
	MemberFlapping  MemberState = "flapping"
	MemberReplacing MemberState = "replacing"
	// MemberRogue is a member the backend has but the cluster did not know: it is removed.
	MemberRogue MemberState = "rogue"
)

// HealthEvent is what a member-event reports, or what the machine raises itself.
type HealthEvent string

const (
	HealthDown      HealthEvent = "down"
	HealthUp        HealthEvent = "up"
	HealthGone      HealthEvent = "gone"
	HealthUnhealthy HealthEvent = "unhealthy"

	// HealthTimeout is raised when a state's timer expires.
	HealthTimeout HealthEvent = "timeout"
	// HealthResume is an operator's `clusterflow resume`.
	HealthResume HealthEvent = "resume"
	// HealthConfigError is raised when a member's setup failed and its role asks for a
	// replacement.
	HealthConfigError HealthEvent = "config_error"
	// HealthDrain is raised when the member's host is drained.
	HealthDrain HealthEvent = "drain"
	// HealthLost is raised for a member being set up when its host is lost.
	HealthLost HealthEvent = "lost"
)

// MemberHealth is a member's health record. It lives in the cluster's state, so it, and
// the timer it describes, outlive worker and server restarts and continue-as-new.
type MemberHealth struct {
	// LastReport is the latest event an external service reported.
	LastReport HealthEvent `json:"lastReport,omitempty"`
	// Due is when the member's timer raises HealthTimeout; zero when none is armed.
	Due time.Time `json:"due,omitzero"`
	// Recoveries are the recent times the member came back up, for flapping.
	Recoveries  []time.Time        `json:"recoveries,omitempty"`
	Transitions []HealthTransition `json:"transitions,omitempty"`
	// LastCheck is the member's own check that last changed its health, as its host
	// reported it (a role listing check); checks that change nothing are not reported.
	LastCheck *spec.ProbeCheck `json:"lastCheck,omitempty"`
}

// HealthTransition is one step of the member's state machine.
type HealthTransition struct {
	At     time.Time   `json:"at"`
	From   MemberState `json:"from"`
	To     MemberState `json:"to"`
	Event  HealthEvent `json:"event"`
	Reason string      `json:"reason,omitempty"`
	Source string      `json:"source,omitempty"`
	// ReportedAt is when the source says it saw the event, if it said.
	ReportedAt time.Time `json:"reportedAt,omitzero"`
}

// ReplacedOn is the event that put the member in replacing (a drain, a timeout, gone …),
// from its latest transition there; "" if none is kept.
func (m Member) ReplacedOn() HealthEvent {
	if m.Health == nil {
		return ""
	}
	for i := len(m.Health.Transitions) - 1; i >= 0; i-- {
		if t := m.Health.Transitions[i]; t.To == MemberReplacing {
			return t.Event
		}
	}
	return ""
}

// UnavailableStates count against a role's maxUnavailable.
var UnavailableStates = []MemberState{MemberDown, MemberFlapping, MemberReplacing}

func (s MemberState) Unavailable() bool { return slices.Contains(UnavailableStates, s) }

// setUpStates are those of a member whose configure succeeded: down or flapping members
// were set up, and their health is the state machine's concern.
var setUpStates = []MemberState{MemberReady, MemberDown, MemberFlapping}

func (s MemberState) SetUp() bool { return slices.Contains(setUpStates, s) }

// BeingSetUp says the member's setup has not ended: not started, or running.
func (s MemberState) BeingSetUp() bool {
	return s == MemberPending || s == MemberCreating || s == MemberConfiguring
}

// CountReady counts members in the ready state.
func CountReady(members []Member) int {
	return CountState(members, MemberReady)
}

// CountState counts the members in any of the states.
func CountState(members []Member, states ...MemberState) int {
	n := 0
	for _, m := range members {
		if slices.Contains(states, m.State) {
			n++
		}
	}
	return n
}

// RoleOperation is what a role child workflow does to its members.
type RoleOperation string

const (
	OpConfigure RoleOperation = "configure"
	OpTeardown  RoleOperation = "teardown"
	// OpAddNodes and OpDelNodes notify members of other members joining or leaving.
	OpAddNodes RoleOperation = "addnodes"
	OpDelNodes RoleOperation = "delnodes"
	// OpStart runs the start event on members whose host restarted.
	OpStart RoleOperation = "start"
	// OpUpgrade moves members to the role's current revision in place; OpRestart restarts
	// them (a rolling restart).
	OpUpgrade RoleOperation = "upgrade"
	OpRestart RoleOperation = "restart"
	// OpAction runs a named action of the role on members (clusterflow run).
	OpAction RoleOperation = "action"
	// OpDecommission runs decommission on members about to leave, before their teardown.
	OpDecommission RoleOperation = "decommission"
	// OpRemoving tells survivors of members about to leave, before their decommission.
	OpRemoving RoleOperation = "removing"
)

// Record adds a step to the member's health history, which keeps the latest ones.
func (h *MemberHealth) Record(t HealthTransition) {
	h.Transitions = append(h.Transitions, t)
	if n := len(h.Transitions); n > KeptTransitions {
		h.Transitions = slices.Clone(h.Transitions[n-KeptTransitions:])
	}
}

// Occupies reports whether a member counts against its host's share of the role.
func (m Member) Occupies() bool {
	switch m.State {
	case MemberDeleted, MemberRogue, MemberReplacing:
		return false
	}
	return m.Host != "" && !m.Leaving
}

// KeptTransitions bounds each member's health history.
const KeptTransitions = 10

// CountAll counts the members of every role in one of states, and all of them.
func CountAll(roles []RoleState, states ...MemberState) (matching, total int) {
	for _, r := range roles {
		matching += CountState(r.Members, states...)
		total += len(r.Members)
	}
	return matching, total
}
