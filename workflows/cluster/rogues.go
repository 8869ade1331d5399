package cluster

import (
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/internal/backend"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// adoptRogues records the rogues reconcile found as leaving members, so that this pass
// tears them down and removes them like any member no longer wanted. Only the operation
// changes the roles and members it works on; reconcile just queues them.
func (e *executor) adoptRogues(now time.Time) {
	for _, ref := range e.w.health.TakeRogues() {
		if _, m := e.w.state.FindMember(ref.Name); m == nil {
			e.adoptRogue(ref, now)
		}
	}
}

// adoptRogue records one rogue as a leaving member of its role, adding the role (placed
// last) if the cluster has no such role.
func (e *executor) adoptRogue(ref backend.MemberRef, now time.Time) {
	role, ordinal, ok := spec.ParseMemberName(e.w.state.Name, ref.Name)
	if !ok || role != ref.Role {
		e.w.logger.Warn("Backend listed a member whose name does not match its role; left alone", "Member", ref.Name, "Role", ref.Role)
		return
	}
	rs := e.w.state.Role(role)
	if rs == nil {
		e.w.state.Roles = append(e.w.state.Roles, plan.RoleState{Name: role})
		e.w.state.Levels = e.plan()
		rs = e.w.state.Role(role)
		rs.Level = plan.LevelOf(e.w.state.Levels, role)
	}
	rogue := plan.Member{
		Name: ref.Name, Role: role, Ordinal: ordinal, State: plan.MemberRogue, Leaving: true, Since: now, Host: ref.Host,
		Detail: "found on the backend, but never a member of this cluster: being torn down and removed",
	}
	at, _ := slices.BinarySearchFunc(rs.Members, ordinal, func(m plan.Member, ordinal int) int { return m.Ordinal - ordinal })
	rs.Members = slices.Insert(rs.Members, at, rogue)
	e.w.MembersChanged()
}
