package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/clusterflow/clusterflow/spec"
)

// A revision is what a cluster's members run: every apply that changes a role's
// startscript, env, events, timeouts or health settings makes the next one, and a rollout
// moves the members of the roles it changed to it. Members of other roles are not touched.

// RoleRevision is a revision at which a role's settings changed, and a digest of them.
type RoleRevision struct {
	Revision int    `json:"revision"`
	Settings string `json:"settings"`
}

// keptRoleRevisions bounds a role's record of its revisions: a member that ran an older
// one than the record goes back to is taken to run something else.
const keptRoleRevisions = 20

// SettingsDigest names what a member of the role runs: the settings a rollout moves
// members between. Member counts, maxInFlight, placement, the update policy and the
// health policy (how clusterflow reacts, not what a member runs) are not among them: they
// take effect without touching a member.
func SettingsDigest(r spec.Role) string {
	data, _ := json.Marshal(struct { // plain values always encode
		Script, Env   string
		Events        []spec.Event
		Timeout, Beat time.Duration
	}{r.ScriptHash, spec.EnvHash(r.Env), r.Events, r.Timeout, r.HeartbeatTimeout})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// NoteRevision records that the role runs settings at revision from now on, if they
// differ from what it ran before; it reports whether they did.
func (r *RoleState) NoteRevision(revision int, settings string) bool {
	if n := len(r.Revisions); n > 0 && r.Revisions[n-1].Settings == settings {
		return false
	}
	r.Revisions = append(r.Revisions, RoleRevision{Revision: revision, Settings: settings})
	if n := len(r.Revisions); n > keptRoleRevisions {
		r.Revisions = slices.Clone(r.Revisions[n-keptRoleRevisions:])
	}
	return true
}

// SettingsAt is the digest of the settings the role ran at revision, or "" when the record
// no longer goes back that far. Members set up before revisions ran revision 1.
func (r RoleState) SettingsAt(revision int) string {
	revision = max(revision, 1)
	for i := len(r.Revisions) - 1; i >= 0; i-- {
		if r.Revisions[i].Revision <= revision {
			return r.Revisions[i].Settings
		}
	}
	return ""
}

// Current is the revision the role's settings last changed at; 1 before any did.
func (r RoleState) Current() int {
	if n := len(r.Revisions); n > 0 {
		return r.Revisions[n-1].Revision
	}
	return 1
}

// Outdated are the role's set-up members that do not run its current settings, and those
// whose last update failed (retry names them), in ordinal order. Members not ready (being
// set up, down, being replaced) are left to the health machine: their successors are set
// up with the current revision.
func Outdated(rs RoleState, retry []string) []Member {
	if len(rs.Revisions) == 0 {
		return nil
	}
	current := rs.Revisions[len(rs.Revisions)-1].Settings
	var out []Member
	for _, m := range rs.Members {
		if m.State == MemberReady && !m.Leaving && m.ReplacedBy == "" && (rs.SettingsAt(m.Revision) != current || slices.Contains(retry, m.Name)) {
			out = append(out, m)
		}
	}
	return out
}

// RestartDue are the role's ready members a rolling restart has yet to restart, in
// ordinal order.
func RestartDue(rs RoleState) []Member {
	var out []Member
	for _, m := range rs.Members {
		if m.RestartDue && m.State == MemberReady && !m.Leaving && m.ReplacedBy == "" {
			out = append(out, m)
		}
	}
	return out
}

// RolloutBatch is a batch of a role's rollout: the canaries one at a time, then batches
// of the update policy's maxInFlight.
type RolloutBatch struct {
	Canary  bool
	Members []Member
}

// NextBatch is the batch a role's rollout takes next, from its outdated members: a canary
// while fewer than the policy's canaries have been updated (updated counts the members the
// rollout moved so far), else up to maxInFlight of them. unavailable counts the role's
// members down now; the batch never takes the role past its maxUnavailable, so it may be
// empty, with why.
func NextBatch(role spec.Role, rs RoleState, outdated []Member, updated int) (batch RolloutBatch, why string) {
	if len(outdated) == 0 {
		return RolloutBatch{}, ""
	}
	size := len(LiveMembers(rs))
	limit := role.Health.UnavailableLimit(size)
	unavailable := 0
	for _, m := range rs.Members {
		if m.State.Unavailable() {
			unavailable++
		}
	}
	room := limit - unavailable
	if room <= 0 {
		return RolloutBatch{}, fmt.Sprintf("its maxUnavailable allows %d members down at once, and %d are down now", limit, unavailable)
	}
	if updated < role.Update.CanaryCount() {
		return RolloutBatch{Canary: true, Members: outdated[:1]}, ""
	}
	n := min(role.Update.BatchSize(size), room, len(outdated))
	return RolloutBatch{Members: outdated[:n]}, ""
}

// LiveMembers are the role's members not deleted.
func LiveMembers(rs RoleState) []Member {
	var live []Member
	for _, m := range rs.Members {
		if m.State != MemberDeleted {
			live = append(live, m)
		}
	}
	return live
}

// RolloutRoles are the roles a rollout visits, in dependency order: each level's roles one
// after another (BOSH's serial), by name.
func RolloutRoles(levels [][]string, roles []RoleState) []string {
	var out []string
	for _, level := range levels {
		sorted := slices.Clone(level)
		slices.Sort(sorted)
		for _, name := range sorted {
			if rs := Named(roles, name, func(r *RoleState) string { return r.Name }); rs != nil && len(rs.Revisions) > 0 {
				out = append(out, name)
			}
		}
	}
	return out
}

// RolloutGroups are the roles a rollout visits, in dependency order, each group rolling
// together: one role at a time (BOSH's serial), except that a level's roles whose update
// policy says parallel roll together, unless they replace their members (each replacement
// batch is a pass of its own).
func RolloutGroups(levels [][]string, roles []RoleState, desired spec.Cluster, restart bool) [][]string {
	var groups [][]string
	for _, level := range levels {
		together := -1 // the level's group of parallel roles, where its first one comes
		for _, name := range RolloutRoles([][]string{level}, roles) {
			r, ok := desired.Role(name)
			switch {
			case !ok || !r.Update.Parallel || !restart && r.StrategyFor() != spec.InPlace:
				groups = append(groups, []string{name})
			case together < 0:
				together = len(groups)
				groups = append(groups, []string{name})
			default:
				groups[together] = append(groups[together], name)
			}
		}
	}
	return groups
}

// ChangedRoles names the roles whose settings differ between two specs, by name.
func ChangedRoles(current, next spec.Cluster) []string {
	changed := map[string]bool{}
	for _, r := range next.Roles {
		if old, ok := current.Role(r.Name); ok && SettingsDigest(old) != SettingsDigest(r) {
			changed[r.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(changed))
}

// Reconfigured lists what changes about a role beyond its member count and maxInFlight.
func Reconfigured(old, next spec.Role) []string {
	var changed []string
	check := func(field string, same bool) {
		if !same {
			changed = append(changed, field)
		}
	}
	check("startscript", old.ScriptHash == next.ScriptHash)
	check("env", maps.Equal(old.Env, next.Env))
	check("dependsOn", slices.Equal(sortedCopy(old.DependsOn), sortedCopy(next.DependsOn)))
	check("events", slices.Equal(old.Events, next.Events))
	check("cardinality", old.Cardinality == next.Cardinality)
	check("timeout", old.Timeout == next.Timeout)
	check("heartbeatTimeout", old.HeartbeatTimeout == next.HeartbeatTimeout)
	check("ports", maps.Equal(old.Ports, next.Ports))
	check("limits", old.Limits == next.Limits)
	return changed
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
