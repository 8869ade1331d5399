package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/clusterflow/clusterflow/spec"
)

// Decide's table: each row walks one pass from its beginning, calling the real Decide at
// every boundary, with a small world standing in for the executor (what a stage does to the
// members, and what it reports). The walk is written as the stages taken, then how the pass
// ended:
//
//	actions removal restart reshape setup:0 replace:worker-1 ... | settled
func TestDecideWalksOnePass(t *testing.T) {
	const deployed = "actions removal restart reshape setup:0 setup:1 setup:2 removeReplaced announce rollout"
	rows := []struct {
		name     string
		desired  string
		observed []string
		// held: maintenance holds the cluster when the pass begins.
		held bool
		// configure is what each member's setup ends in, when not ready.
		configure map[string]MemberState
		// world changes what the executor sees once a stage was taken.
		world func(taken Decision, v *PassView)
		want  string
	}{
		{
			name:     "a deploy sets up level by level, announces and settles",
			desired:  "controller=1 worker=2 edge=1",
			observed: []string{"controller-0=pending", "worker-0=pending", "worker-1=pending", "edge-0=pending"},
			want:     deployed + " | settled",
		},
		{
			name:     "a cluster without levels goes from reshaping to announcing",
			desired:  "",
			observed: nil,
			want:     "actions removal restart reshape removeReplaced announce rollout | settled",
		},
		{
			name:     "maintenance at the start holds the pass before it acts",
			desired:  "controller=1",
			observed: []string{"controller-0=pending"},
			held:     true,
			want:     "| stop held",
		},
		{
			name:     "maintenance arriving while a level is set up holds the pass after it",
			desired:  "controller=1 worker=2 edge=1",
			observed: []string{"controller-0=pending", "worker-0=pending", "worker-1=pending", "edge-0=pending"},
			world: func(d Decision, v *PassView) {
				if d.Take.Stage == StageSetup && d.Take.Level == 1 {
					v.Held = true
				}
			},
			want: "actions removal restart reshape setup:0 setup:1 | stop held",
		},
		{
			name:     "a cancel during the removal ends the pass there",
			desired:  "controller=1",
			observed: []string{"controller-0=ready"},
			world:    onStage(StageRemoval, func(v *PassView) { v.Cancelled = true }),
			want:     "actions removal | stop",
		},
		{
			name:     "a change during the restart starts the pass again before any setup",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=pending"},
			world:    onStage(StageRestart, func(v *PassView) { v.Changed = true }),
			want:     "actions removal restart | again",
		},
		{
			name:     "files that could not be written end the pass at their level",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=pending", "worker-0=pending"},
			world: func(d Decision, v *PassView) {
				v.StepFailed = d.Take.Stage == StageSetup && d.Take.Level == 1
			},
			want: "actions removal restart reshape setup:0 setup:1 | stop",
		},
		{
			name:      "a failed setup in a role that replaces such members is replaced, and the pass starts again",
			desired:   "controller=1 worker=2 edge=1",
			observed:  []string{"controller-0=pending", "worker-0=pending", "worker-1=pending", "edge-0=pending"},
			configure: map[string]MemberState{"worker-1": MemberConfigError},
			world:     onStage(StageReplaceFailed, func(v *PassView) { v.Replaced = true }),
			want:      "actions removal restart reshape setup:0 setup:1 replace:worker-1 | again",
		},
		{
			name:      "a failed setup whose slot has no replacement left fails the level",
			desired:   "controller=1 worker=2 edge=1",
			observed:  []string{"controller-0=pending", "worker-0=pending", "worker-1=pending", "edge-0=pending"},
			configure: map[string]MemberState{"worker-1": MemberConfigError},
			want: "actions removal restart reshape setup:0 setup:1 replace:worker-1 keepReplaced skipLevels:1 removeReplaced announce" +
				" | failed: role worker failed: 1 of 2 members in config_error",
		},
		{
			name:      "a failed successor of a replace rollout keeps what it replaces, and the pass starts again",
			desired:   "controller=1 edge=1",
			observed:  []string{"controller-0=pending", "edge-0=pending"},
			configure: map[string]MemberState{"controller-0": MemberConfigError},
			world:     onStage(StageKeepReplaced, func(v *PassView) { v.Replaced = true }),
			want:      "actions removal restart reshape setup:0 replace:controller-0 keepReplaced | again",
		},
		{
			name:     "a member a notification failed fails the cluster once the pass announced",
			desired:  "controller=1 worker=1",
			observed: []string{"controller-0=ready", "worker-0=ready"},
			world: onStage(StageAnnounce, func(v *PassView) {
				RoleOf(v.Roles, "worker").Members[0].State = MemberConfigError
			}),
			want: "actions removal restart reshape setup:0 setup:1 removeReplaced announce replace:worker-0 | failed: role worker failed: 1 of 1 members in config_error",
		},
		{
			name:     "a rollout moves a canary, then batches of maxInFlight, and ends",
			desired:  "controller=1 worker=5 update=canaries:1,maxInFlight:2,strategy:inPlace",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready", "worker-2=ready", "worker-3=ready", "worker-4=ready"},
			world:    rollingOut("worker"),
			want: "actions removal restart reshape setup:0 setup:1 removeReplaced announce rollout" +
				" canary1:worker-0 b2:worker-1,worker-2 b3:worker-3,worker-4 rolloutDone | settled",
		},
		{
			name:     "a rollout with no room pauses, naming the role, and the pass ends paused",
			desired:  "controller=1 worker=3 update=canaries:0,strategy:inPlace maxUnavailable=1",
			observed: []string{"controller-0=ready", "worker-0=down", "worker-1=ready", "worker-2=ready"},
			world:    rollingOut("worker"),
			want: "actions removal restart reshape setup:0 setup:1 removeReplaced announce rollout" +
				" pause:role worker: its maxUnavailable allows 1 members down at once, and 1 are down now | rollout paused",
		},
		{
			name:     "a replace rollout's batch is a new generation's pass",
			desired:  "controller=1 worker=2 update=canaries:0,strategy:replace",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready"},
			world:    rollingOut("worker"),
			want: "actions removal restart reshape setup:0 setup:1 removeReplaced announce rollout" +
				" replaceBatch:worker-0 | again",
		},
		{
			name:     "a batch stopped short by a change starts the pass again",
			desired:  "controller=1 worker=2 update=canaries:0,strategy:inPlace",
			observed: []string{"controller-0=ready", "worker-0=ready", "worker-1=ready"},
			world: func(d Decision, v *PassView) {
				rollingOut("worker")(d, v)
				if d.Take.Stage == StageRolloutBatch {
					v.Rollout.Progress, v.Changed = RolloutStopped, true
				}
			},
			want: "actions removal restart reshape setup:0 setup:1 removeReplaced announce rollout b1:worker-0 | again",
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			desired := decideCluster(t, row.desired)
			roles := observedRoles(t, desired, row.observed)
			v := PassView{Desired: desired, Roles: roles, Levels: testLevels(roles), Held: row.held}
			if got := walkPass(t, v, row.configure, row.world); got != row.want {
				t.Errorf("walk:\n got %s\nwant %s", got, row.want)
			}
		})
	}
}

// walkPass walks a pass through Decide, as the executor would, and writes it down. What a
// stage reports (StepFailed, Replaced) holds for the next decision only.
func walkPass(t *testing.T, v PassView, setupEnds map[string]MemberState, world func(Decision, *PassView)) string {
	t.Helper()
	var walk []string
	at := Cursor{Stage: StageBegin}
	for range 100 {
		d := Decide(at, v)
		if d.End != GoOn {
			return strings.TrimSpace(strings.Join(walk, " ") + " | " + describeEnd(d))
		}
		at = d.Take
		walk = append(walk, describeStage(d))
		v.StepFailed, v.Replaced = false, false
		if d.Take.Stage == StageSetup {
			for _, rw := range configure(v.Desired, v.Roles, d.Step.Roles) {
				for _, m := range rw.Members {
					state := MemberReady
					if s, ok := setupEnds[shortName(m.Name)]; ok {
						state = s
					}
					RoleOf(v.Roles, rw.Role).Member(m.Name).State = state
				}
			}
		}
		if world != nil {
			world(d, &v)
		}
	}
	t.Fatalf("the pass did not end: %v", walk)
	return ""
}

func describeStage(d Decision) string {
	names := map[Stage]string{
		StageActions: "actions", StageRemoval: "removal", StageRestart: "restart", StageReshape: "reshape",
		StageKeepReplaced: "keepReplaced", StageRemoveReplaced: "removeReplaced", StageAnnounce: "announce",
		StageRollout: "rollout", StageRolloutDone: "rolloutDone",
	}
	switch d.Take.Stage {
	case StageSetup:
		return fmt.Sprintf("setup:%d", d.Take.Level)
	case StageSkipLevels:
		return fmt.Sprintf("skipLevels:%d", d.Take.Level)
	case StageReplaceFailed:
		return "replace:" + strings.Join(short(d.Replace), ",")
	case StageRolloutPause:
		return "pause:" + d.Message
	case StageRolloutBatch, StageRolloutReplace:
		var members []string
		for _, b := range d.Batch {
			for _, m := range b.Members {
				members = append(members, shortName(m.Name))
			}
		}
		label := fmt.Sprintf("b%d", d.Take.Batches)
		switch {
		case d.Take.Stage == StageRolloutReplace:
			label = "replaceBatch"
		case d.Batch[0].Canary:
			label = fmt.Sprintf("canary%d", d.Take.Batches)
		}
		return label + ":" + strings.Join(members, ",")
	}
	return names[d.Take.Stage]
}

func describeEnd(d Decision) string {
	switch d.End {
	case Stop:
		if d.Held {
			return "stop held"
		}
		return "stop"
	case Again:
		return "again"
	case Failed:
		return "failed: " + d.Message
	case RolloutPaused:
		return "rollout paused"
	case Settled:
		return "settled"
	}
	return fmt.Sprintf("end %d", d.End)
}

// onStage changes the view once the given stage was taken.
func onStage(s Stage, change func(v *PassView)) func(Decision, *PassView) {
	return func(d Decision, v *PassView) {
		if d.Take.Stage == s {
			change(v)
		}
	}
}

// rollingOut stands in for a rollout of role's members: each batch moves its members,
// a pause pauses it, and the rollout goes on until none is due.
func rollingOut(role string) func(Decision, *PassView) {
	return func(d Decision, v *PassView) {
		ro := &v.Rollout
		switch d.Take.Stage {
		case StageRemoveReplaced:
			rs := RoleOf(v.Roles, role)
			rs.Revisions = []RoleRevision{{}}
			ro.Due = map[string][]Member{role: slices.Clone(LiveMembers(*rs))}
			ro.Moved = map[string]int{}
		case StageRollout:
			ro.Progress = RolloutGoesOn
		case StageRolloutBatch:
			for _, b := range d.Batch {
				ro.Due[b.Role.Name] = ro.Due[b.Role.Name][len(b.Members):]
				ro.Moved[b.Role.Name] += len(b.Members)
			}
		case StageRolloutPause:
			ro.Paused = true
		}
	}
}

// decideCluster is testCluster with a role's update policy and maxUnavailable:
// "worker=5 update=canaries:1,maxInFlight:2 maxUnavailable=1" (they apply to the role
// before them). Every role replaces members whose setup failed.
func decideCluster(t *testing.T, text string) spec.Cluster {
	t.Helper()
	var counts []string
	type extra struct{ update, unavailable string }
	extras := map[int]*extra{}
	for _, f := range strings.Fields(text) {
		key, value, _ := strings.Cut(f, "=")
		switch key {
		case "update":
			extras[len(counts)-1] = &extra{update: value}
		case "maxUnavailable":
			if extras[len(counts)-1] == nil {
				extras[len(counts)-1] = &extra{}
			}
			extras[len(counts)-1].unavailable = value
		default:
			counts = append(counts, f)
		}
	}
	c := testCluster(t, strings.Join(counts, " "))
	for i := range c.Roles {
		r := &c.Roles[i]
		r.Health.ReplaceOnConfigError = true
		e := extras[i]
		if e == nil {
			continue
		}
		r.Health.MaxUnavailable = e.unavailable
		for _, kv := range strings.Split(e.update, ",") {
			k, val, _ := strings.Cut(kv, ":")
			switch k {
			case "canaries":
				r.Update.Canaries, r.Update.CanariesSet = int(val[0]-'0'), true
			case "maxInFlight":
				r.Update.MaxInFlight = val
			case "strategy":
				r.Update.Strategy = spec.UpdateStrategy(val)
			}
		}
	}
	return c
}
