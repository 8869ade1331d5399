package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/health"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
	"github.com/clusterflow/clusterflow/workflows/rollout"
)

func (u *updates) refuseWhileDeleting(what string) error {
	if u.w.deleteRequested {
		return flow.Refused(apperr.Conflict, "%s refused: cluster %s is being deleted", what, u.w.state.Name)
	}
	return nil
}

// refuseChange refuses a change to a cluster being deleted, or held by maintenance.
func (u *updates) refuseChange(what string) error {
	if err := u.refuseWhileDeleting(what); err != nil {
		return err
	}
	if m := u.w.state.Maintenance; m != nil {
		return flow.RefusedInMaintenance(*m, what)
	}
	return nil
}

// validateResize refuses unknown roles, negative counts and counts the role's cardinality
// does not allow, naming every problem at once.
func (u *updates) validateResize(req workflows.ResizeRequest) error {
	if err := u.refuseChange("resize"); err != nil {
		return err
	}
	if len(req.Counts) == 0 {
		return flow.Refused(apperr.Invalid, "resize refused: give at least one ROLE=N")
	}
	if err := u.refuseRemoval(req); err != nil {
		return err
	}
	var problems []string
	seen := map[string]bool{}
	for _, count := range req.Counts {
		asked := fmt.Sprintf("%s=%d refused: ", count.Role, count.Members)
		r, ok := u.w.spec.Role(count.Role)
		switch {
		case !ok:
			problems = append(problems, asked+fmt.Sprintf("cluster %s has no role %q (its roles: %s)", u.w.state.Name, count.Role, strings.Join(u.w.spec.RoleNames(), ", ")))
		case seen[count.Role]:
			problems = append(problems, asked+fmt.Sprintf("role %s is named more than once", count.Role))
		case count.Members < 0:
			problems = append(problems, asked+"a member count cannot be negative")
		case count.Members > spec.MaxRoleMembers:
			problems = append(problems, asked+fmt.Sprintf("a role has at most %d members", spec.MaxRoleMembers))
		case r.Cardinality.Allows(count.Members) != nil:
			problems = append(problems, asked+fmt.Sprintf("role %s has cardinality %q", count.Role, r.Cardinality))
		}
		seen[count.Role] = true
	}
	if len(problems) > 0 {
		return flow.Refused(apperr.Invalid, "%s", strings.Join(problems, "; "))
	}
	if err := u.refuseSignedFor("resize", req.Signature); err != nil {
		return err
	}
	next := resized(u.w.spec, req)
	if total := next.TotalMembers(); total > spec.MaxClusterMembers {
		return flow.Refused(apperr.Invalid, "resize refused: it asks for %d members in all; a cluster has at most %d", total, spec.MaxClusterMembers)
	}
	return u.refuseUnplaceable("resize", next)
}

// refuseRemoval refuses a resize's members to take away (Remove) unless each is a member of
// the cluster neither gone nor already going, named once, whose role keeps a count its
// cardinality allows, and is given in Counts at its desired count less the members named.
func (u *updates) refuseRemoval(req workflows.ResizeRequest) error {
	if len(req.Remove) == 0 {
		return nil
	}
	if len(req.Remove) > spec.MaxRoleMembers {
		return flow.Refused(apperr.Invalid, "resize refused: it names %d members to remove; a role has at most %d", len(req.Remove), spec.MaxRoleMembers)
	}
	var problems []string
	named := map[string]int{}
	seen := map[string]bool{}
	for _, name := range req.Remove {
		refused := "--remove " + name + " refused: "
		var m *plan.Member
		role, _, ok := spec.ParseMemberName(u.w.state.Name, name)
		if rs := u.w.state.Role(role); ok && rs != nil {
			m = rs.Member(name)
		}
		switch {
		case seen[name]:
			problems = append(problems, refused+"it is named more than once")
		case m == nil || m.State == plan.MemberDeleted:
			problems = append(problems, refused+fmt.Sprintf("cluster %s has no member %q (see `clusterflow status %s`)", u.w.state.Name, name, u.w.state.Name))
		case m.Leaving || m.State == plan.MemberDeleting || m.State == plan.MemberReplacing:
			problems = append(problems, refused+fmt.Sprintf("it is already leaving (%s)", m.State))
		default:
			named[role]++
		}
		seen[name] = true
	}
	for _, role := range slices.Sorted(maps.Keys(named)) {
		r, ok := u.w.spec.Role(role)
		if !ok {
			problems = append(problems, fmt.Sprintf("--remove refused: role %s is leaving the cluster with all its members", role))
			continue
		}
		want := r.Members - named[role]
		i := slices.IndexFunc(req.Counts, func(c workflows.RoleCount) bool { return c.Role == role })
		switch {
		case r.Cardinality.Allows(want) != nil:
			problems = append(problems, fmt.Sprintf("--remove refused: role %s would keep %d %s, and its cardinality is %q", role, want, workflows.Plural(want, "member"), r.Cardinality))
		case i < 0 || req.Counts[i].Members != want:
			problems = append(problems, fmt.Sprintf("--remove refused: role %s has %d members, and %d named to go: give %s=%d, or no count for it", role, r.Members, named[role], role, want))
		}
	}
	if len(problems) > 0 {
		return flow.Refused(apperr.Invalid, "%s", strings.Join(problems, "; "))
	}
	return nil
}

// refuseSignedFor refuses a change whose signature says it is for another generation than
// the one the change makes: signed for an earlier one (a signature replayed to go back to
// its spec), or overtaken by another change since it was signed.
func (u *updates) refuseSignedFor(what string, sig *spec.Signature) error {
	if sig == nil || sig.Generation == 0 {
		return nil // unsigned, or signed before signatures named their generation
	}
	if next := u.w.state.Generation + 1; sig.Generation != next {
		return flow.Refused(apperr.Conflict, "%s refused: it is signed for generation %d of cluster %s, and it would make generation %d (a signature of an earlier change, or another change came first): sign it again", what, sig.Generation, u.w.state.Name, next)
	}
	return nil
}

// refuseUnplaceable refuses a change whose members the hosts cannot hold.
func (u *updates) refuseUnplaceable(what string, next spec.Cluster) error {
	if !u.w.state.OnHosts {
		return nil
	}
	if err := plan.PlacementProblem(next, u.w.state.Roles, u.w.state.Hosts, u.w.hostCheck); err != nil {
		return flow.Refused(apperr.Invalid, "%s refused: %v", what, err)
	}
	return nil
}

// validateApply allows what changes membership (member counts, new roles, removed roles)
// and refuses any other change to a role that has members: reconfiguring running members
// is a different operation.
func (u *updates) validateApply(req workflows.ApplyRequest) error {
	if err := u.refuseChange("apply"); err != nil {
		return err
	}
	next := req.Spec
	if next.Name != u.w.spec.Name {
		return flow.Refused(apperr.Invalid, "apply refused: the spec is for cluster %q, not %q", next.Name, u.w.spec.Name)
	}
	if req.IfSpec != "" {
		if current, err := workflows.SpecHash(u.w.spec); err != nil || current != req.IfSpec {
			return flow.Refused(apperr.Conflict, "apply refused: the cluster's spec changed after it was read (another apply, a resize or an undo came first); read it again")
		}
	}
	if limits := spec.CheckLimits(next); len(limits) > 0 {
		return flow.Refused(apperr.Invalid, "apply refused: %s", describeProblems(limits))
	}
	if err := u.refuseSignedFor("apply", next.Signature); err != nil {
		return err
	}
	var problems []string
	for _, r := range next.Roles {
		if err := r.Cardinality.Allows(r.Members); err != nil {
			problems = append(problems, fmt.Sprintf("role %s refused: %v", r.Name, err))
		}
		if _, ok := next.Scripts[r.ScriptHash]; !ok {
			problems = append(problems, fmt.Sprintf("role %s refused: its startscript is missing from the spec", r.Name))
		}
		if _, current := u.w.spec.Role(r.Name); !current && hasMembers(&u.w.state, r.Name) {
			problems = append(problems, fmt.Sprintf("role %s refused: it is still being removed; apply again once its members are gone", r.Name))
		}
	}
	for _, old := range u.w.spec.Roles {
		r, kept := next.Role(old.Name)
		hasMembers := hasMembers(&u.w.state, old.Name)
		switch {
		case !kept:
			if err := old.Cardinality.Allows(0); err != nil {
				problems = append(problems, fmt.Sprintf("removing role %s refused: its cardinality %q does not allow 0 members", old.Name, old.Cardinality))
			}
			if dependents := dependentsOf(next.Roles, old.Name); len(dependents) > 0 {
				problems = append(problems, fmt.Sprintf("removing role %s refused: %s still depend on it", old.Name, strings.Join(dependents, ", ")))
			}
		case hasMembers:
			problems = append(problems, refusedRollout(old, r)...)
		}
	}
	if len(problems) > 0 {
		return flow.Refused(apperr.Invalid, "%s", strings.Join(problems, "; "))
	}
	if _, err := spec.Levels(next.Roles); err != nil {
		return flow.Refused(apperr.Invalid, "apply refused: %v", err)
	}
	return u.refuseUnplaceable("apply", next)
}

func (u *updates) validateCancel() error {
	if err := u.refuseChange("cancel"); err != nil {
		return err
	}
	if !u.w.operating {
		return flow.Refused(apperr.Conflict, "cancel refused: nothing to cancel, cluster %s is %s", u.w.state.Name, u.w.state.Phase)
	}
	return nil
}

func (u *updates) validateMemberEvent(ev workflows.MemberEvent) error {
	if err := u.refuseChange("member-event"); err != nil {
		return err
	}
	if err := workflows.CheckMemberEventText(ev); err != nil {
		return flow.Refused(apperr.Invalid, "member-event refused: %s", err.Error())
	}
	return health.CheckEvent(&u.w.state, ev)
}

func (u *updates) validateResume() error {
	if err := u.refuseChange("resume"); err != nil {
		return err
	}
	if !health.Resumable(u.w.state.Roles) {
		return flow.Refused(apperr.Conflict, "resume refused: nothing to resume: no role of cluster %s has its replacement paused, and no member is flapping", u.w.state.Name)
	}
	return nil
}

func (u *updates) validateReconcile() error {
	return u.refuseChange("reconcile")
}

// describeProblems writes spec problems on one line, each with its field path.
func describeProblems(problems []spec.Problem) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

func dependentsOf(roles []spec.Role, name string) []string {
	var dependents []string
	for _, r := range roles {
		if slices.Contains(r.DependsOn, name) {
			dependents = append(dependents, r.Name)
		}
	}
	return dependents
}

// refusedRollout says why a role with members cannot move from old to next: its place in
// the dependency plan and its cardinality do not change under running members (a change
// to what they run rolls out, in place or by replacement).
func refusedRollout(old, next spec.Role) []string {
	var problems []string
	var fixed []string
	for _, field := range plan.Reconfigured(old, next) {
		if field == "dependsOn" || field == "cardinality" || field == "ports" {
			fixed = append(fixed, field)
		}
	}
	if len(fixed) > 0 {
		problems = append(problems, fmt.Sprintf("role %s refused: it has members, so its %s cannot change (delete the role's members first, or deploy a new cluster)", old.Name, strings.Join(fixed, " and ")))
	}
	return problems
}

// restartTargets are the members a rolling restart would restart, by role, or why it is
// refused.
func (u *updates) restartTargets(req workflows.RestartRequest) (map[string][]string, error) {
	if err := u.refuseChange("restart"); err != nil {
		return nil, err
	}
	return rollout.RestartTargets(&u.w.state, u.w.spec, req)
}

// actionTargets are the members an action would run on, by role, or why it is refused.
func (u *updates) actionTargets(req workflows.ActionRequest) (map[string][]string, error) {
	if err := u.refuseChange("run"); err != nil {
		return nil, err
	}
	return rollout.ActionTargets(&u.w.state, u.w.spec, req)
}
