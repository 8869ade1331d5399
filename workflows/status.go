package workflows

import (
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Budgets of a status's members, as JSON: a query's answer, and the status an update or the
// workflow returns (which lands in the history). Temporal refuses a payload past 2 MiB, and
// a member with its output tails and health history takes up to about 20 KiB. A page that
// reaches its budget lists fewer members than asked for; its roles' counts stay whole.
const (
	QueryStatusBytes  = 1 << 20
	ResultStatusBytes = 256 << 10
)

// Status projects the workflow's state into what users see: every member, or one page, as
// many as fit in budget bytes.
func (s ClusterState) Status(page *StatusPage, budget int) ClusterStatus {
	out := ClusterStatus{
		APIVersion: StatusAPIVersion, Name: s.Name, Home: s.Home, Phase: s.ShownPhase(), Message: s.Message, Origin: s.Origin,
		Levels: s.Levels, Roles: make([]RoleStatus, len(s.Roles)), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Generation: s.Generation, AttemptedGeneration: s.AttemptedGeneration, ReachedGeneration: s.ReachedGeneration,
		Maintenance: s.Maintenance, Signatures: s.Signatures, Revision: s.Revision,
		FailedTeardowns: s.FailedTeardowns,
	}
	if out.Phase == PhaseMaintenance {
		out.Message = s.MaintenanceDetail()
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
		role.Members = make([]MemberStatus, 0, len(members))
		for _, m := range members {
			if budget -= memberStatusSize(m); budget < 0 {
				break
			}
			if m.Unplaced != "" {
				m.Detail = m.Unplaced
			}
			role.Members = append(role.Members, MemberStatus{
				Name: m.Name, Role: m.Role, Ordinal: m.Ordinal, State: m.State, Detail: m.Detail, Host: m.Host, Event: m.Event, Since: m.Since,
				LastLine: m.LastLine, StdoutTail: m.StdoutTail, StderrTail: m.StderrTail, Leaving: m.Leaving, Health: m.Health,
				Replaces: m.Replaces, ReplacedBy: m.ReplacedBy, Replacements: m.Replacements, Revision: max(m.Revision, min(s.Revision, 1)),
				Decommission: m.Decommission, Ports: m.Ports,
			})
		}
		out.Roles[i] = role
	}
	return out
}

// memberStatusSize is about what a member takes in a status as JSON, a little more rather than
// less: field names and times are counted as fixed costs.
func memberStatusSize(m Member) int {
	n := 300 + len(m.Name) + len(m.Role) + len(m.Host) + len(m.Detail) + len(m.Unplaced) + len(m.LastLine) +
		2*(len(m.StdoutTail)+len(m.StderrTail)) + len(m.Replaces) + len(m.ReplacedBy)
	if h := m.Health; h != nil {
		n += 100 + 40*len(h.Recoveries)
		for _, t := range h.Transitions {
			n += 200 + 2*(len(t.Reason)+len(t.Source))
		}
	}
	return n
}

// Listed counts the members a status lists: a page lists fewer than its limit when they
// reach its budget.
func (s ClusterStatus) Listed() int {
	n := 0
	for _, r := range s.Roles {
		n += len(r.Members)
	}
	return n
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
	return plan.Named(s.Roles, name, func(r *RoleStatus) string { return r.Name })
}

// Member returns the named member of the role.
func (r *RoleStatus) Member(name string) *MemberStatus {
	return plan.Named(r.Members, name, func(m *MemberStatus) string { return m.Name })
}

// Stable reports whether the phase is one that lasts until someone acts.
func (p Phase) Stable() bool {
	switch p {
	case PhaseReady, PhaseDegraded, PhasePaused, PhaseFailed, PhaseCanceled, PhaseDeleted, PhaseTerminated, PhaseRolloutPaused:
		return true
	}
	return false
}

// Settled reports whether the cluster is stable and done with generation g, however that
// ended: reached, failed or canceled.
func (s ClusterStatus) Settled(g int) bool {
	return s.Phase.Stable() && (s.AttemptedGeneration >= g || s.Phase == PhaseDeleted || s.Phase == PhaseTerminated)
}
