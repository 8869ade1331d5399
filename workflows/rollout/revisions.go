// Package rollout keeps a cluster's revisions and its latest rollout, in the cluster's
// state: a revision per change of what members run, the settings kept for an undo, and
// the rollout's record (its batches' progress, its pause, its health gate). It decides
// nothing about when members move (workflows/plan does) and runs nothing (the cluster
// workflow does).
package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/clusterflow/clusterflow/internal/apperr"
	"github.com/clusterflow/clusterflow/spec"
	"github.com/clusterflow/clusterflow/workflows"
	"github.com/clusterflow/clusterflow/workflows/internal/flow"
	"github.com/clusterflow/clusterflow/workflows/plan"
)

// Bounds of what revisions keep: the records listed, and the settings kept for undo.
// Kept settings ride in the state continue-as-new carries, beside the spec: their roles
// (as JSON, envs included) and the scripts the spec no longer has are held under
// keptSettingsBytes in all, so that the carried state stays under Temporal's payload limit
// whatever the spec holds.
const (
	keptRevisions        = 20
	keptRevisionSettings = 5
	keptSettingsBytes    = 128 << 10
)

// Init starts the revisions of a cluster that has none: a new one, or one from
// before revisions, whose members all run revision 1.
func Init(s *workflows.ClusterState, desired spec.Cluster, at time.Time) {
	if s.Revision > 0 {
		return
	}
	s.Revision = 1
	for _, r := range desired.Roles {
		if rs := s.Role(r.Name); rs != nil {
			rs.NoteRevision(1, plan.SettingsDigest(r))
		}
	}
	s.Revisions = []workflows.RevisionRecord{{Revision: workflows.Revision{Number: 1, At: at, Change: "deployed", Digest: specDigest(desired)}}}
}

// NoteRevision makes the next revision when the desired spec's roles run other settings
// than previous's, and starts rolling it out; or when only their health policies changed,
// which take effect at once and move no member.
func NoteRevision(s *workflows.ClusterState, desired spec.Cluster, previous spec.Cluster, by, why string, at time.Time) bool {
	changed := plan.ChangedRoles(previous, desired)
	var parts []string
	for _, r := range desired.Roles {
		old, ok := previous.Role(r.Name)
		if !ok {
			continue
		}
		fields := SettingsChanged(old, r)
		if old.Health != r.Health {
			fields = append(fields, "health")
		}
		if len(fields) > 0 {
			parts = append(parts, r.Name+": "+strings.Join(fields, ", "))
		}
	}
	if len(parts) == 0 {
		return false
	}
	s.Revision++
	for _, name := range changed {
		r, _ := desired.Role(name)
		if rs := s.Role(name); rs != nil {
			rs.NoteRevision(s.Revision, plan.SettingsDigest(r))
		}
	}
	change := strings.Join(parts, "; ")
	if why != "" {
		change = why + " (" + change + ")"
	}
	// The revision being left is kept now, with what it ran; the current one is the spec.
	if n := len(s.Revisions); n > 0 {
		s.Revisions[n-1].Roles = settingsOf(previous)
	}
	s.Revisions = append(s.Revisions, workflows.RevisionRecord{
		Revision: workflows.Revision{Number: s.Revision, At: at, By: spec.Clip(by, 256), Change: spec.Clip(change, 1024), Digest: specDigest(desired)},
	})
	if n := len(s.Revisions); n > keptRevisions {
		s.Revisions = slices.Clone(s.Revisions[n-keptRevisions:])
	}
	keepSettings(s, desired, previous.Scripts)
	if len(changed) > 0 {
		Start(s, &workflows.RolloutRecord{Revision: s.Revision, Started: at})
	}
	return true
}

// SettingsChanged names what differs between two versions of a role that a member runs.
func SettingsChanged(old, next spec.Role) []string {
	changed := slices.DeleteFunc(plan.Reconfigured(old, next), func(field string) bool {
		return field == "dependsOn" || field == "cardinality"
	})
	return changed
}

// settingsOf is a spec's roles as a revision keeps them.
func settingsOf(c spec.Cluster) []spec.Role { return slices.Clone(c.Roles) }

// specDigest names every role's settings at once, health policies included.
func specDigest(c spec.Cluster) string {
	h := sha256.New()
	for _, r := range c.Roles {
		fmt.Fprintf(h, "%s=%s %+v\n", r.Name, plan.SettingsDigest(r), r.Health)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// keepSettings keeps the settings of the newest earlier revisions that fit the
// bounds, with the scripts they need that the spec does not hold (from those kept before,
// or from left, the spec just left), and drops the others'.
func keepSettings(s *workflows.ClusterState, desired spec.Cluster, left map[string]string) {
	scripts := map[string]string{}
	budget, kept := keptSettingsBytes, 0
	for i := len(s.Revisions) - 1; i >= 0; i-- {
		rec := &s.Revisions[i]
		if rec.Roles == nil {
			continue
		}
		cost, needs := workflows.PayloadSize(rec.Roles), map[string]string{}
		for _, r := range rec.Roles {
			if _, inSpec := desired.Scripts[r.ScriptHash]; inSpec {
				continue
			}
			if _, have := scripts[r.ScriptHash]; have {
				continue
			}
			content, ok := s.RevisionScripts[r.ScriptHash]
			if !ok {
				content, ok = left[r.ScriptHash]
			}
			if !ok {
				cost = budget + 1 // its script is gone: it cannot be kept
				break
			}
			needs[r.ScriptHash] = content
			cost += len(content)
		}
		if kept >= keptRevisionSettings || cost > budget {
			rec.Roles = nil
			continue
		}
		kept++
		budget -= cost
		maps.Copy(scripts, needs)
	}
	s.RevisionScripts = scripts
	if len(scripts) == 0 {
		s.RevisionScripts = nil
	}
}

// recordOf finds a revision still listed.
func recordOf(s *workflows.ClusterState, number int) *workflows.RevisionRecord {
	for i := range s.Revisions {
		if s.Revisions[i].Number == number {
			return &s.Revisions[i]
		}
	}
	return nil
}

// UndoSpec is the desired spec with every role's settings as they were at revision to:
// member counts, placement and dependencies stay as they are now.
func UndoSpec(s *workflows.ClusterState, desired spec.Cluster, to int) (spec.Cluster, error) {
	if to == 0 {
		to = s.Revision - 1
	}
	rec := recordOf(s, to)
	switch {
	case to < 1 || to >= s.Revision:
		return spec.Cluster{}, flow.Refused(apperr.Invalid, "rollout undo refused: cluster %s is at revision %d; undo goes back to an earlier one (see `clusterflow revisions %s`)", s.Name, s.Revision, s.Name)
	case rec == nil:
		return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: revision %d of cluster %s is no longer listed (the last %d are); apply its spec file again", to, s.Name, keptRevisions)
	case rec.Roles == nil:
		return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: the settings of revision %d are no longer kept (the newest %d are, within %d KiB of envs and scripts); apply its spec file again", to, keptRevisionSettings, keptSettingsBytes>>10)
	}
	next := desired
	next.Roles = slices.Clone(desired.Roles)
	next.Scripts = maps.Clone(desired.Scripts)
	next.Signature = nil
	for i, r := range next.Roles {
		old := plan.Named(rec.Roles, r.Name, func(r *spec.Role) string { return r.Name })
		if old == nil {
			continue // a role added since: nothing to go back to
		}
		r.Startscript, r.ScriptHash, r.Env, r.Events = old.Startscript, old.ScriptHash, old.Env, old.Events
		r.Timeout, r.HeartbeatTimeout, r.Health = old.Timeout, old.HeartbeatTimeout, old.Health
		next.Roles[i] = r
		if _, ok := next.Scripts[r.ScriptHash]; !ok {
			content, kept := s.RevisionScripts[r.ScriptHash]
			if !kept {
				return spec.Cluster{}, flow.Refused(apperr.NotFound, "rollout undo refused: the startscript role %s ran at revision %d is no longer kept; apply its spec file again", r.Name, to)
			}
			next.Scripts[r.ScriptHash] = content
		}
	}
	return next, nil
}
