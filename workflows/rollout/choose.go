package rollout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// memberChoice is how a restart or an action chooses its members: those named, or every
// ready member of a role, or, with neither, of every role it applies to.
type memberChoice struct {
	// what names the request in refusals, e.g. "restart" or "run".
	what    string
	role    string
	members []string
	// applies says why the request does not apply to a role, or "".
	applies func(r spec.Role) string
	// none says why no role at all applies.
	none string
}

// choose is the members a request chooses, by role, or why it is refused: an unknown role
// or member, one it does not apply to, or a member not ready.
func choose(s *workflows.ClusterState, desired spec.Cluster, ch memberChoice) (map[string][]string, error) {
	check := func(role string) error {
		r, ok := desired.Role(role)
		if !ok {
			return flow.Refused(apperr.NotFound, "%s refused: cluster %s has no role %q (its roles: %s)", ch.what, s.Name, role, strings.Join(desired.RoleNames(), ", "))
		}
		if why := ch.applies(r); why != "" {
			return flow.Refused(apperr.Invalid, "%s refused: %s", ch.what, why)
		}
		return nil
	}
	chosen := map[string][]string{}
	switch {
	case len(ch.members) > 0:
		for _, name := range ch.members {
			rs, m := s.FindMember(name)
			if m == nil || m.State == plan.MemberDeleted || ch.role != "" && rs.Name != ch.role {
				in := ""
				if ch.role != "" {
					in = " in role " + ch.role
				}
				return nil, flow.Refused(apperr.NotFound, "%s refused: cluster %s has no member %q%s", ch.what, s.Name, spec.Clip(name, spec.MaxMemberNameLength), in)
			}
			if err := check(rs.Name); err != nil {
				return nil, err
			}
			if m.State != plan.MemberReady {
				return nil, flow.Refused(apperr.Conflict, "%s refused: member %s is %s; only ready members are chosen", ch.what, name, m.State)
			}
			if !slices.Contains(chosen[rs.Name], name) {
				chosen[rs.Name] = append(chosen[rs.Name], name)
			}
		}
	case ch.role != "":
		if err := check(ch.role); err != nil {
			return nil, err
		}
		chosen[ch.role] = readyNames(*s.Role(ch.role))
	default:
		for _, r := range desired.Roles {
			if rs := s.Role(r.Name); rs != nil && ch.applies(r) == "" {
				chosen[r.Name] = readyNames(*rs)
			}
		}
		if len(chosen) == 0 {
			return nil, flow.Refused(apperr.NotFound, "%s refused: %s", ch.what, ch.none)
		}
	}
	for role, names := range chosen {
		if len(names) == 0 {
			delete(chosen, role)
		}
	}
	if len(chosen) == 0 {
		return nil, flow.Refused(apperr.Conflict, "%s refused: none of the members it chooses is ready", ch.what)
	}
	return chosen, nil
}

func readyNames(rs plan.RoleState) []string {
	var names []string
	for _, m := range rs.Members {
		if m.State == plan.MemberReady {
			names = append(names, m.Name)
		}
	}
	return names
}

// maxActionMembers bounds the members an action names: a request lands in the history,
// and a role's members can be chosen by the role instead.
const maxActionMembers = 1000

// RestartTargets are the members a rolling restart would restart, by role, or why it is
// refused: while a rollout runs, or for a role whose script has no restart.
func RestartTargets(s *workflows.ClusterState, desired spec.Cluster, req workflows.RestartRequest) (map[string][]string, error) {
	if ro := s.Rollout; Running(s) {
		return nil, flow.Refused(apperr.Conflict, "restart refused: the %s is in progress (%s); restart once it is done", ro.What(), Status(s, desired).State)
	}
	return choose(s, desired, memberChoice{
		what: "restart", role: req.Role, members: req.Members,
		applies: func(r spec.Role) string {
			if r.Wants(spec.EventRestart) {
				return ""
			}
			return fmt.Sprintf("role %s does not list restart in its events, so its startscript has no restart to run (events: %s)", r.Name, spec.EventNames(r.Events))
		},
		none: fmt.Sprintf("no role of cluster %s lists restart in its events", s.Name),
	})
}

// ActionTargets are the members an action would run on, by role, or why it is refused.
// Asked when the action runs, the members it names may have changed since it was asked.
func ActionTargets(s *workflows.ClusterState, desired spec.Cluster, req workflows.ActionRequest) (map[string][]string, error) {
	if err := spec.CheckActionCall(req.Action, req.Params); err != nil {
		return nil, flow.Refused(apperr.Invalid, "run refused: %v", err)
	}
	if req.Parallel < 0 {
		return nil, flow.Refused(apperr.Invalid, "run refused: --parallel is %d; it must be 0 (all at once) or more", req.Parallel)
	}
	if len(req.Members) > maxActionMembers {
		return nil, flow.Refused(apperr.Invalid, "run refused: %d members named; name at most %d, or choose a role", len(req.Members), maxActionMembers)
	}
	return choose(s, desired, memberChoice{
		what: "run", role: req.Role, members: req.Members,
		applies: func(r spec.Role) string {
			if r.HasAction(req.Action) {
				if err := spec.CheckActionParams(r.ActionParams[req.Action], req.Action, req.Params); err != nil {
					return fmt.Sprintf("role %s: %v", r.Name, err)
				}
				return ""
			}
			declared := "none"
			if len(r.Actions) > 0 {
				declared = strings.Join(r.Actions, ", ")
			}
			return fmt.Sprintf("role %s has no action %q (its actions: %s)", r.Name, req.Action, declared)
		},
		none: fmt.Sprintf("no role of cluster %s declares action %q", s.Name, req.Action),
	})
}
