package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clusterflow/clusterflow/spec"
)

// One pass of the executor is a walk of stages. At each boundary the executor asks Decide
// what comes next, given the stage it just took and what it sees now, and carries the
// decision out: Decide is the one place a pass's course is chosen (which level is set up,
// which failed members are replaced, which rollout batch runs, and the phase the pass ends
// in), as Nomad's reconciler returns one result for its scheduler to apply. The executor
// only acts.

// Stage is a step of a pass. A pass takes them in this order, some more than once (a setup
// level each, a rollout batch each), and may end after any.
type Stage int

const (
	// StageBegin is where a pass starts, before it has done anything.
	StageBegin Stage = iota
	// StageActions runs the actions asked for, on the members as they are.
	StageActions
	// StageRemoval removes the members no longer wanted (rogues and stale sandboxes too).
	StageRemoval
	// StageRestart starts the members of restarted hosts.
	StageRestart
	// StageReshape adds the pending members the desired spec asks for.
	StageReshape
	// StageSetup sets one level's pending members up (Cursor.Level).
	StageSetup
	// StageReplaceFailed replaces the members whose setup failed (Decision.Replace): those
	// of one level, or of every role once the pass has announced (Cursor.Announced).
	StageReplaceFailed
	// StageKeepReplaced lets a replace rollout whose successor failed pause, keeping the
	// members the successors were to replace.
	StageKeepReplaced
	// StageSkipLevels skips the levels after one that failed (Cursor.Failing).
	StageSkipLevels
	// StageRemoveReplaced removes the members whose successors are set up.
	StageRemoveReplaced
	// StageAnnounce tells the members who joined and left.
	StageAnnounce
	// StageRollout begins the rollout in progress, if any.
	StageRollout
	// StageRolloutBatch moves one batch of the rollout (Decision.Batch).
	StageRolloutBatch
	// StageRolloutReplace starts replacing one batch of a replace rollout
	// (Decision.Batch): a new generation's pass sets the successors up.
	StageRolloutReplace
	// StageRolloutPause pauses the rollout, saying why (Decision.Message).
	StageRolloutPause
	// StageRolloutDone ends the rollout: every member it was to move moved.
	StageRolloutDone
)

// Cursor is where a pass stands: the stage it took last, and what it keeps across stages.
type Cursor struct {
	Stage Stage
	// Level is the setup level, for StageSetup and the stages deciding on its outcome.
	Level int
	// Failing says why a level failed: the pass still removes the replaced members and
	// announces, then ends failed with it.
	Failing string
	// Announced is set once the pass announced: what it replaces then is any role's.
	Announced bool
	// Batches counts the rollout batches taken, for their labels.
	Batches int
}

// PassView is what Decide reads: the cluster as it is now, and what the executor saw.
type PassView struct {
	Desired spec.Cluster
	Roles   []RoleState
	Levels  [][]string
	// Cancelled: the operation was cancelled (or the cluster is being deleted).
	Cancelled bool
	// Held: maintenance holds the cluster's operations.
	Held bool
	// Changed: the desired generation moved since the pass began.
	Changed bool
	// StepFailed: the stage just taken failed, and already said why in the phase (a setup
	// level whose files or ports could not be written).
	StepFailed bool
	// Replaced: the stage just taken started a replacement (StageReplaceFailed), or kept
	// the replaced members of a failed rollout batch (StageKeepReplaced).
	Replaced bool
	Rollout  RolloutView
}

// RolloutView is what Decide reads of the rollout in progress.
type RolloutView struct {
	// Progress is how its last stage went.
	Progress RolloutProgress
	Paused   bool
	Restart  bool
	// Due are each role's members still to move, and Moved how many it moved so far.
	Due   map[string][]Member
	Moved map[string]int
}

// RolloutProgress is how a rollout's stage went.
type RolloutProgress int

const (
	// RolloutIdle: no rollout goes on (none, ended, paused, or from before rollouts).
	RolloutIdle RolloutProgress = iota
	// RolloutGoesOn: the next batch is due.
	RolloutGoesOn
	// RolloutStopped: a batch stopped short (it failed, tripped the health gate, was
	// cancelled): a change that arrived meanwhile starts the pass again.
	RolloutStopped
)

// Ending is how a pass ends, or that it goes on.
type Ending int

const (
	// GoOn takes Decision.Take.
	GoOn Ending = iota
	// Stop ends the pass as it stands: cancelled, or held by maintenance (Decision.Held).
	Stop
	// Again ends the pass; another is due, for the desired state moved.
	Again
	// Failed ends the pass with the cluster failed (Decision.Message).
	Failed
	// RolloutPaused ends the pass at its generation, with the rollout paused.
	RolloutPaused
	// Settled ends the pass at its generation, in the phase the members' health gives.
	Settled
)

// Decision is what a pass does next.
type Decision struct {
	End  Ending
	Take Cursor
	// Held: the pass stops because maintenance holds it.
	Held bool
	// Step is the setup level's step, for StageSetup.
	Step Step
	// Replace names the members to replace, for StageReplaceFailed.
	Replace []string
	// Batch is the rollout's batch, one per role rolling together.
	Batch []RoleBatch
	// Message says why the cluster failed, or why the rollout pauses.
	Message string
}

// RoleBatch is one role's batch of a rollout step.
type RoleBatch struct {
	Role spec.Role
	RolloutBatch
}

// Decide chooses what a pass does after the stage at, given what it sees now. A pass
// begins at Cursor{Stage: StageBegin}.
func Decide(at Cursor, v PassView) Decision {
	goTo := func(s Stage) Decision {
		next := at
		next.Stage = s
		return Decision{Take: next}
	}
	switch at.Stage {
	case StageBegin:
		if v.Held {
			return Decision{End: Stop, Held: true}
		}
		return goTo(StageActions)
	case StageActions, StageRemoval:
		if v.Cancelled {
			return Decision{End: Stop}
		}
		return goTo(at.Stage + 1)
	case StageRestart:
		switch {
		case v.Cancelled:
			return Decision{End: Stop}
		case v.Changed:
			return Decision{End: Again}
		}
		return goTo(StageReshape)
	case StageReshape:
		return setUpLevel(at, v, 0)
	case StageSetup:
		switch {
		case v.StepFailed || v.Cancelled:
			return Decision{End: Stop}
		case v.Held:
			return Decision{End: Stop, Held: true}
		case v.Changed:
			return Decision{End: Again}
		}
		if failed := FailedSetups(v.Desired, v.Roles, v.Levels[at.Level]); len(failed) > 0 {
			d := goTo(StageReplaceFailed)
			d.Replace = failed
			return d
		}
		return afterLevel(at, v)
	case StageReplaceFailed:
		switch {
		case v.Replaced:
			return Decision{End: Again}
		case at.Announced:
			return afterAnnounced(at, v)
		}
		return afterLevel(at, v)
	case StageKeepReplaced:
		if v.Replaced {
			return Decision{End: Again}
		}
		d := goTo(StageSkipLevels)
		d.Take.Failing = strings.Join(LevelProblems(v.Desired, v.Roles, v.Levels[at.Level]), "; ")
		return d
	case StageSkipLevels:
		return goTo(StageRemoveReplaced)
	case StageRemoveReplaced:
		switch {
		case at.Failing != "":
			return goTo(StageAnnounce)
		case v.Cancelled:
			return Decision{End: Stop}
		case v.Held:
			return Decision{End: Stop, Held: true}
		}
		return goTo(StageAnnounce)
	case StageAnnounce:
		switch {
		case at.Failing != "":
			return Decision{End: Failed, Message: at.Failing}
		case v.Cancelled:
			return Decision{End: Stop}
		}
		at.Announced = true
		if failed := FailedSetups(v.Desired, v.Roles, slices.Concat(v.Levels...)); len(failed) > 0 {
			d := goTo(StageReplaceFailed)
			d.Replace = failed
			return d
		}
		return afterAnnounced(at, v)
	case StageRollout, StageRolloutBatch:
		switch v.Rollout.Progress {
		case RolloutGoesOn:
			return nextBatch(at, v)
		case RolloutStopped:
			if v.Changed {
				return Decision{End: Again}
			}
		}
		return settle(v)
	case StageRolloutReplace:
		return Decision{End: Again}
	case StageRolloutPause, StageRolloutDone:
		return settle(v)
	}
	panic(fmt.Sprintf("plan: no decision after stage %d", at.Stage))
}

// setUpLevel takes the setup of a level, or what follows the last.
func setUpLevel(at Cursor, v PassView, level int) Decision {
	switch {
	case v.Cancelled:
		return Decision{End: Stop}
	case level == len(v.Levels):
		at.Stage = StageRemoveReplaced
		return Decision{Take: at}
	case v.Held:
		return Decision{End: Stop, Held: true}
	}
	at.Stage, at.Level = StageSetup, level
	return Decision{Take: at, Step: Setup(v.Levels).Steps[level]}
}

// afterLevel goes on to the next level when every member of this one is set up; else the
// rollout may keep what it replaced, or the levels after it are skipped.
func afterLevel(at Cursor, v PassView) Decision {
	if len(LevelProblems(v.Desired, v.Roles, v.Levels[at.Level])) > 0 {
		at.Stage = StageKeepReplaced
		return Decision{Take: at}
	}
	return setUpLevel(at, v, at.Level+1)
}

// afterAnnounced ends the pass failed if a member is still not set up (a failed
// notification leaves its member in config_error); else the rollout in progress goes on.
func afterAnnounced(at Cursor, v PassView) Decision {
	var failed []string
	for _, level := range v.Levels {
		failed = append(failed, LevelProblems(v.Desired, v.Roles, level)...)
	}
	if len(failed) > 0 {
		return Decision{End: Failed, Message: strings.Join(failed, "; ")}
	}
	at.Stage = StageRollout
	return Decision{Take: at}
}

// nextBatch is the rollout's next batch: the first group of roles in dependency order with
// members still to move, each role's batch as its update policy allows.
func nextBatch(at Cursor, v PassView) Decision {
	switch {
	case v.Cancelled:
		return Decision{End: Stop}
	case v.Held:
		return Decision{End: Stop, Held: true}
	case v.Changed:
		return Decision{End: Again}
	case v.Rollout.Paused:
		return settle(v)
	}
	ro := v.Rollout
	for _, group := range RolloutGroups(v.Levels, v.Roles, v.Desired, ro.Restart) {
		var batch []RoleBatch
		for _, role := range group {
			def, ok := v.Desired.Role(role)
			due := ro.Due[role]
			if !ok || len(due) == 0 {
				continue
			}
			b, why := NextBatch(def, *RoleOf(v.Roles, role), due, ro.Moved[role])
			if len(b.Members) == 0 {
				at.Stage = StageRolloutPause
				return Decision{Take: at, Message: fmt.Sprintf("role %s: %s", role, why)}
			}
			batch = append(batch, RoleBatch{Role: def, RolloutBatch: b})
		}
		if len(batch) == 0 {
			continue
		}
		at.Batches++
		at.Stage = StageRolloutBatch
		if len(batch) == 1 && batch[0].Role.StrategyFor() == spec.Replace && !ro.Restart {
			at.Stage = StageRolloutReplace
		}
		return Decision{Take: at, Batch: batch}
	}
	at.Stage = StageRolloutDone
	return Decision{Take: at}
}

// settle ends the pass at its generation: with the rollout paused, or settled.
func settle(v PassView) Decision {
	switch {
	case v.Cancelled:
		return Decision{End: Stop}
	case v.Held:
		return Decision{End: Stop, Held: true}
	case v.Rollout.Paused:
		return Decision{End: RolloutPaused}
	}
	return Decision{End: Settled}
}
