package workflows

import (
	"slices"
)

// unavailableStates count against a role's maxUnavailable.
var unavailableStates = []MemberState{MemberDown, MemberFlapping, MemberReplacing}

func (s MemberState) unavailable() bool { return slices.Contains(unavailableStates, s) }

// setUpStates are those of a member whose configure succeeded: down or flapping members
// were set up, and their health is the state machine's concern.
var setUpStates = []MemberState{MemberReady, MemberDown, MemberFlapping}

func (s MemberState) setUp() bool { return slices.Contains(setUpStates, s) }

// status projects the workflow's state into what users see: every member, or one page.
func (s clusterState) status(page *StatusPage) ClusterStatus {
	out := ClusterStatus{
		APIVersion: StatusAPIVersion, Name: s.Name, Phase: s.shownPhase(), Message: s.Message, Origin: s.Origin,
		Levels: s.Levels, Roles: make([]RoleStatus, len(s.Roles)), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Generation: s.Generation, AttemptedGeneration: s.AttemptedGeneration, ReachedGeneration: s.ReachedGeneration,
		Maintenance: s.Maintenance,
	}
	if out.Phase == PhaseMaintenance {
		out.Message = s.maintenanceDetail()
	}
	seen := 0 // members of the roles before this one
	for i, r := range s.Roles {
		role := RoleStatus{
			Name: r.Name, Level: r.Level, DependsOn: r.DependsOn, Desired: r.Desired,
			MemberCount: len(r.Members), States: map[MemberState]int{}, Paused: r.Paused, Resumed: r.Resumed,
		}
		for _, m := range r.Members {
			role.States[m.State]++
		}
		role.Ready = role.States[MemberReady]
		members := r.Members
		if page != nil {
			lo := min(max(page.From-seen, 0), len(members))
			hi := min(max(page.From+page.Limit-seen, 0), len(members))
			members = members[lo:hi]
		}
		seen += len(r.Members)
		role.Members = make([]MemberStatus, len(members))
		for j, m := range members {
			if m.Unplaced != "" {
				m.Detail = m.Unplaced
			}
			role.Members[j] = MemberStatus{
				Name: m.Name, Role: m.Role, Ordinal: m.Ordinal, State: m.State, Detail: m.Detail, Host: m.Host, Event: m.Event, Since: m.Since,
				LastLine: m.LastLine, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail, Leaving: m.Leaving, Health: m.Health,
				Replaces: m.Replaces, ReplacedBy: m.ReplacedBy, Replacements: m.Replacements,
			}
		}
		out.Roles[i] = role
	}
	return out
}

// MemberCount is how many members the cluster has, across roles.
func (s ClusterStatus) MemberCount() int {
	n := 0
	for _, r := range s.Roles {
		n += r.MemberCount
	}
	return n
}

// AddMembers adds the members of another page of the status, each role's to its own, and
// skips any already there.
func (s *ClusterStatus) AddMembers(page ClusterStatus) {
	for _, pr := range page.Roles {
		r := s.Role(pr.Name)
		if r == nil {
			continue
		}
		have := make(map[string]bool, len(r.Members))
		for _, m := range r.Members {
			have[m.Name] = true
		}
		for _, m := range pr.Members {
			if !have[m.Name] {
				r.Members = append(r.Members, m)
			}
		}
	}
}

// Member finds a member of any role by name, or returns nil.
func (s *ClusterStatus) Member(name string) *MemberStatus {
	for i := range s.Roles {
		if m := s.Roles[i].Member(name); m != nil {
			return m
		}
	}
	return nil
}

// Role returns the named role's status.
func (s *ClusterStatus) Role(name string) *RoleStatus {
	return named(s.Roles, name, func(r *RoleStatus) string { return r.Name })
}

// Member returns the named member of the role.
func (r *RoleStatus) Member(name string) *MemberStatus {
	return named(r.Members, name, func(m *MemberStatus) string { return m.Name })
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
