package rollout

import (
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Preview is what a change from the current spec to next would do, worked out on the
// state as it is and changing nothing: the members removed and added role by role, and the
// batches a rollout would take, as the executor would take them if every update succeeded.
// summary describes the change.
func Preview(s *workflows.ClusterState, current, next spec.Cluster, summary string) workflows.Preview {
	out := workflows.Preview{Summary: summary, Generation: s.Generation + 1}
	changed := plan.ChangedRoles(current, next)
	if len(changed) > 0 {
		out.Revision = s.Revision + 1
	}
	levels, _ := plan.Levels(next, s.Roles)
	listening := 0 // members set up that hear of others joining or leaving
	for _, rs := range s.Roles {
		listening += plan.CountState(rs.Members, plan.MemberReady)
	}
	for _, level := range levels {
		for _, name := range level {
			rs := s.Role(name)
			if rs == nil {
				rs = &plan.RoleState{Name: name}
			}
			want := plan.DesiredMembers(next, name)
			wanted, unwanted := plan.SplitMembers(*rs, want)
			added := plan.NewMembers(s.Name, *rs, want, s.UpdatedAt)
			rp := workflows.RolePreview{Role: name}
			for _, m := range unwanted {
				rp.Remove = append(rp.Remove, m.Name)
			}
			for _, m := range added {
				rp.Add = append(rp.Add, m.Name)
			}
			if len(rp.Remove)+len(rp.Add) > 0 {
				rp.Told = listening - len(unwanted)
			}
			rp.Remove, rp.MoreRemove = workflows.CapNames(rp.Remove)
			rp.Add, rp.MoreAdd = workflows.CapNames(rp.Add)
			if role, ok := next.Role(name); ok && slices.Contains(changed, name) {
				old, _ := current.Role(name)
				rp.Rollout = previewRollout(role, old, *rs, wanted)
			}
			if len(rp.Remove)+len(rp.Add) > 0 || rp.Rollout != nil {
				out.Roles = append(out.Roles, rp)
			}
		}
	}
	return out
}

// previewRollout plays plan.NextBatch over the role's members that would move, as if
// every update succeeded.
func previewRollout(role, old spec.Role, rs plan.RoleState, wanted []plan.Member) *workflows.RolloutPreview {
	rp := &workflows.RolloutPreview{Strategy: role.StrategyFor(), Policy: role.Update.String(), Changed: strings.Join(SettingsChanged(old, role), ", ")}
	var outdated []plan.Member
	for _, m := range wanted {
		if m.State == plan.MemberReady && !m.Leaving && m.ReplacedBy == "" {
			outdated = append(outdated, m)
		}
	}
	moved := 0
	for len(outdated) > 0 {
		batch, why := plan.NextBatch(role, rs, outdated, moved)
		if len(batch.Members) == 0 {
			rp.Batches = append(rp.Batches, workflows.Batch{Members: []string{"(paused: " + why + ")"}})
			break
		}
		names := make([]string, len(batch.Members))
		for i, m := range batch.Members {
			names[i] = m.Name
		}
		if len(rp.Batches) < workflows.ReportNames {
			rp.Batches = append(rp.Batches, workflows.Batch{Canary: batch.Canary, Members: names})
		} else {
			rp.MoreBatches++
		}
		outdated = outdated[len(batch.Members):]
		moved += len(batch.Members)
	}
	return rp
}
